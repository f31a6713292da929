"""A roles-and-members workflow through the Python client that
openapi-python-client generates from GET /openapi.json
(tests/api/openapi_client.rs runs it against a real server).

Usage: python_roles_workflow.py BASE_URL OWNER_TOKEN ORG_ID INVITEE_USER_ID

Every call goes through the generated functions and models; every error is
read from the generated Problem model, extension members included. Prints
one line per step; exits non-zero on the first step that goes otherwise.
"""

import sys

from rolecall_client import AuthenticatedClient
from rolecall_client.api.members import add_member, check_permissions, remove_member
from rolecall_client.api.roles import create_role, delete_role, get_role, list_roles, update_role
from rolecall_client.models import (
    AddMemberType0,
    CheckRequest,
    CheckRequestPermissionsItem,
    CreateRole,
    CreateRolePermissionsItem,
    MembershipView,
    PageRoleView,
    Problem,
    RoleView,
    UpdateRole,
    UpdateRolePermissionsItem,
)


def expect(condition, what):
    if not condition:
        sys.exit(f"FAILED: {what}")
    print(f"ok: {what}")


def problem(response, status, code):
    """The typed problem of `response`, checked to be `status` and `code`."""
    parsed = response.parsed
    expect(
        response.status_code == status and isinstance(parsed, Problem) and parsed.code == code,
        f"{status} {code} read from the Problem model (got {response.status_code} "
        f"{getattr(parsed, 'code', parsed)!r})",
    )
    return parsed


def main(base_url, token, org_id, invitee):
    client = AuthenticatedClient(base_url=base_url, token=token, raise_on_unexpected_status=True)

    created = create_role.sync_detailed(
        org_id,
        client=client,
        body=CreateRole(
            name="Reviewers",
            description="reads tasks",
            permissions=[CreateRolePermissionsItem("org:tasks:read")],
        ),
    )
    role = created.parsed
    expect(created.status_code == 201 and isinstance(role, RoleView), "create a role")
    expect(role.permissions == ["org:tasks:read"], "its permissions as sent")

    fetched = get_role.sync_detailed(org_id, str(role.id), client=client)
    etag = fetched.headers.get("etag")
    expect(isinstance(fetched.parsed, RoleView) and fetched.parsed.name == "Reviewers" and etag, "get it, with its ETag")

    updated = update_role.sync_detailed(
        org_id,
        str(role.id),
        client=client,
        body=UpdateRole(permissions=[UpdateRolePermissionsItem("org:tasks:read"), UpdateRolePermissionsItem("org:tasks:update")]),
        if_match=etag,
    )
    expect(
        updated.status_code == 200
        and isinstance(updated.parsed, RoleView)
        and updated.parsed.permissions == ["org:tasks:read", "org:tasks:update"],
        "patch it with If-Match",
    )
    stale = update_role.sync_detailed(
        org_id, str(role.id), client=client, body=UpdateRole(description="stale"), if_match=etag
    )
    problem(stale, 412, "PRECONDITION_FAILED")

    duplicate = create_role.sync_detailed(org_id, client=client, body=CreateRole(name="reviewers"))
    problem(duplicate, 409, "NAME_CONFLICT")

    invited = add_member.sync_detailed(
        org_id, client=client, body=AddMemberType0(user_id=invitee, role_id=role.id)
    )
    expect(
        invited.status_code == 201
        and isinstance(invited.parsed, MembershipView)
        and invited.parsed.role_name == "Reviewers",
        "invite a member with the role",
    )

    names, cursor = [], None
    while True:
        kwargs = {"limit": 1}
        if cursor:
            kwargs["cursor"] = cursor
        page = list_roles.sync_detailed(org_id, client=client, **kwargs).parsed
        expect(isinstance(page, PageRoleView) and len(page.items) <= 1, f"a page of roles after {cursor!r}")
        names.extend(item.name for item in page.items)
        cursor = page.next_cursor if isinstance(page.next_cursor, str) else None
        if not cursor:
            break
    expect(names == ["Owner", "Member", "Reviewers"], f"list with a cursor: {names}")

    checked = check_permissions.sync_detailed(
        org_id,
        client=client,
        body=CheckRequest(
            user_id=invitee,
            permissions=[
                CheckRequestPermissionsItem("org:tasks:update"),
                CheckRequestPermissionsItem("org:team:manage"),
            ],
        ),
    )
    results = checked.parsed.results.additional_properties
    expect(results == {"org:tasks:update": True, "org:team:manage": False}, f"check permissions: {results}")

    in_use = delete_role.sync_detailed(org_id, str(role.id), client=client)
    expect(problem(in_use, 422, "ROLE_IN_USE").member_count == 1, "ROLE_IN_USE carries member_count")

    removed = remove_member.sync_detailed(org_id, invitee, client=client)
    expect(removed.status_code == 204, "remove the member")
    deleted = delete_role.sync_detailed(org_id, str(role.id), client=client)
    expect(deleted.status_code == 204, "delete the role")
    problem(get_role.sync_detailed(org_id, str(role.id), client=client), 404, "NOT_FOUND")
    print("workflow done")


if __name__ == "__main__":
    main(*sys.argv[1:5])
