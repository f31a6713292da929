"""Verifies rolecall deliveries with the Standard Webhooks and Svix libraries.

    pip install standardwebhooks svix
    WEBHOOK_SECRET=whsec_... python3 verify_delivery.py HEADERS.json BODY [HEADERS.json BODY ...]

Each HEADERS.json holds one delivery's headers as a JSON object, BODY its raw body.
"""
import json
import os
import sys

from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from svix.webhooks import Webhook as SvixWebhook
from svix.webhooks import WebhookVerificationError as SvixVerificationError

seen = set()  # delivery ids already processed: keep them in your database


def handle(secret: str, headers: dict, body: bytes) -> str:
    """What to answer one delivery: 401 unless the signature holds, then 200."""
    try:
        # Verify the raw bytes, before parsing; both reject stale timestamps.
        envelope = Webhook(secret).verify(body, headers)
        SvixWebhook(secret).verify(body, headers)  # the same check, with Svix's library
    except (WebhookVerificationError, SvixVerificationError):
        return "401"
    delivery = {k.lower(): v for k, v in headers.items()}["x-service-delivery"]
    if delivery in seen:
        return f"200 duplicate {delivery}"  # a retry of what we processed: acknowledge only
    seen.add(delivery)
    # Hand the event to a queue here and answer at once.
    return f"200 {envelope['event']} {delivery}"


if __name__ == "__main__":
    secret = os.environ["WEBHOOK_SECRET"]
    args = sys.argv[1:]
    for headers_file, body_file in zip(args[::2], args[1::2]):
        with open(headers_file) as f:
            headers = json.load(f)
        with open(body_file, "rb") as f:
            body = f.read()
        print(handle(secret, headers, body))
