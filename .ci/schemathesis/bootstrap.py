"""Seeds a fresh rolecall server for the API fuzzer (run by .ci/schemathesis.sh).

Creates, through the admin API and the owner's token, everything the fuzzer's
path parameters point at, and prints `export NAME=value` lines for the
shell to eval (fuzz.toml and stateful.toml read them as ${NAME}).

Usage: python bootstrap.py BASE_URL ADMIN_TOKEN
"""

import json
import sys
import urllib.error
import urllib.request

BASE, ADMIN = sys.argv[1], sys.argv[2]


def call(method, path, token, body=None, expect=(200, 201, 202)):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    if status not in expect:
        sys.exit(f"bootstrap: {method} {path} answered {status}: {raw[:500]!r}")
    return json.loads(raw) if raw else None


def user(email):
    """A user and an API token for it: (user id, token id, token)."""
    uid = call("POST", "/admin/users", ADMIN, {"email": email, "name": email.split("@")[0]})["id"]
    tok = call("POST", f"/admin/users/{uid}/tokens", ADMIN, {"kind": "api", "name": "fuzz"})
    return uid, tok["id"], tok["token"]


def org(name, owner):
    body = {"name": name, "plan": "enterprise", "owner_user_id": owner}
    return call("POST", "/admin/organizations", ADMIN, body)["id"]


owner, _, owner_token = user("owner@fuzz.example")
# Users the admin operations and the member operations point at, so that
# revoking a token or removing a member never hits the owner's own.
spare, spare_token_id, _ = user("spare@fuzz.example")
member, _, _ = user("member@fuzz.example")
leaver, _, _ = user("leaver@fuzz.example")

main = org("Fuzz main", owner)
# Organizations whose plan and name the fuzzer may change, so that a
# downgrade to free there does not turn the main org's role writes into 402s.
settings_org = org("Fuzz settings", owner)
admin_org = org("Fuzz admin", owner)

o = f"/organizations/{main}"
T = owner_token
roles = call("GET", f"{o}/roles", T)["items"]
member_role = roles[1]["id"]
role = call("POST", f"{o}/roles", T, {"name": "Fuzz role", "permissions": ["org:team:read"]})["id"]
doomed_role = call("POST", f"{o}/roles", T, {"name": "Doomed role"})["id"]
for uid in (member, leaver):
    call("POST", f"{o}/members", T, {"user_id": uid, "role_id": member_role})


def two(collection, body):
    """One resource to read and edit, and one for the DELETE operation."""
    return (
        call("POST", f"{o}/{collection}", T, body)["id"],
        call("POST", f"{o}/{collection}", T, body)["id"],
    )


decision, doomed_decision = two("decisions", {"title": "Use Rust", "status": "PENDING"})
task, doomed_task = two("tasks", {"title": "Write fuzz tests"})
memory, doomed_memory = two("memories", {"content": "remember", "metadata": {"k": 1}})
capsule, doomed_capsule = two("capsules", {"title": "Capsule", "body": "text"})
project, doomed_project = two("projects", {"name": "rolecall"})
imp = call("POST", f"{o}/projects/{project}/imports", T, {"source": "github"})["id"]
analysis = call(
    "POST",
    f"{o}/pull-requests/analyses",
    T,
    {"repository": "acme/app", "number": 7, "findings": [{"decision_id": decision, "summary": "x"}]},
)["id"]
# A failed webhook test leaves a delivery-log record. The fuzzer runs in a
# network namespace with only loopback, so the attempt on this public address
# literal (a host name that does not resolve is refused with 400) fails at
# once: there is no route, and nothing leaves the machine.
test = call("POST", f"{o}/webhook/test", T, {"url": "https://93.184.215.14/hook", "events": ["member.added"]})
log = call("GET", f"{o}/webhook/deliveries", T)["items"]
delivery = log[0]["delivery_id"] if log else test["test_id"]

out = dict(
    RC_OWNER_TOKEN=owner_token,
    RC_OWNER_ID=owner,
    RC_SPARE_USER=spare,
    RC_SPARE_TOKEN_ID=spare_token_id,
    RC_MEMBER=member,
    RC_LEAVER=leaver,
    RC_ORG=main,
    RC_SETTINGS_ORG=settings_org,
    RC_ADMIN_ORG=admin_org,
    RC_ROLE=role,
    RC_DOOMED_ROLE=doomed_role,
    RC_DECISION=decision,
    RC_DOOMED_DECISION=doomed_decision,
    RC_TASK=task,
    RC_DOOMED_TASK=doomed_task,
    RC_MEMORY=memory,
    RC_DOOMED_MEMORY=doomed_memory,
    RC_CAPSULE=capsule,
    RC_DOOMED_CAPSULE=doomed_capsule,
    RC_PROJECT=project,
    RC_DOOMED_PROJECT=doomed_project,
    RC_IMPORT=imp,
    RC_ANALYSIS=analysis,
    RC_DELIVERY=delivery,
)
for key, value in out.items():
    print(f"export {key}='{value}'")
