"""The names a queue user may not have. A user's name is its PostgreSQL role's (a submitter logs in
as itself; the gateway acts as a token's user with SET ROLE): names PostgreSQL reserves or reads
as something else where a role is named, and the queue's own group roles, are no user's."""

from __future__ import annotations

SUBMITTER_ROLE = "job_submitter"
GATEWAY_ROLE = "job_gateway"
# The group roles of sql/0005_roles.sql and sql/0018_tokens.sql.
GROUP_ROLES = ("job_admin", "job_scheduler", SUBMITTER_ROLE, "job_reader", GATEWAY_ROLE)
# PostgreSQL refuses `public` and `none` as role names, and reads the others (its keywords) as
# another role wherever a statement names a role unquoted; `pg_` names are its own.
_POSTGRES_NAMES = ("public", "none", "current_user", "session_user", "current_role", "system_user")


def reserved_role_problem(name: str) -> str | None:
    """Why `name` cannot be a user's database role, or None. Compared without case: `PUBLIC` and
    `Pg_x` read as the reserved names to a person, if not to PostgreSQL."""
    lowered = name.lower()
    if lowered in GROUP_ROLES:
        why = "it names a group role of the queue"
    elif lowered in _POSTGRES_NAMES or lowered.startswith("pg_"):
        why = "PostgreSQL reserves it"
    else:
        return None
    return f"{name!r} is reserved: a user's name is its database role's, and {why}"
