"""Bearer tokens of the gateway (sql/0018_tokens.sql): create, list, revoke, and who a token is.

A token is 32 random bytes, shown once; only its SHA-256 is stored. The gateway acts for a token's
user under that user's own database role (SET ROLE), so that the row-level security of
sql/0005_roles.sql confines it: `create` makes the role where it is missing (a member of
job_submitter, without login) and grants it to job_gateway. A role that is more than a submitter
gets no token, and a token whose role has become more is refused at its next use."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from psycopg import sql

from job.core.errors import BadInput, NotFound, PermissionDenied
from job.core.roles import GATEWAY_ROLE, SUBMITTER_ROLE, reserved_role_problem
from job.store import DictConnection, one

PREFIX = "jobtok_"

# Why the database role named {name} is not exactly a submitter, NULL when it is one: the one
# definition that `token create` checks and every use of a token checks again (user_of), so that
# what is granted to a role later never reaches a token. Attributes are not inherited, memberships
# are: the role may be a member of job_submitter alone, and job_submitter of nothing (a role
# granted to job_submitter is granted to every submitter). pg_roles and pg_auth_members are read
# by every role, the gateway's login too.
_NOT_A_SUBMITTER = f"""(
    SELECT CASE WHEN r.oid IS NULL THEN 'no such role' ELSE nullif(concat_ws(', ',
               CASE WHEN r.rolsuper THEN 'SUPERUSER' END,
               CASE WHEN r.rolbypassrls THEN 'BYPASSRLS' END,
               CASE WHEN r.rolcreaterole THEN 'CREATEROLE' END,
               CASE WHEN r.rolcreatedb THEN 'CREATEDB' END,
               CASE WHEN r.rolreplication THEN 'REPLICATION' END,
               'member of ' || m.others,
               CASE WHEN m.submits IS NOT TRUE THEN 'not a member of {SUBMITTER_ROLE}' END), '') END
    FROM (SELECT {{name}}::name) AS n (name)
    LEFT JOIN pg_catalog.pg_roles r ON r.rolname = n.name
    LEFT JOIN pg_catalog.pg_roles s ON s.rolname = '{SUBMITTER_ROLE}'
    LEFT JOIN LATERAL (
        SELECT bool_or(m.member = r.oid AND m.roleid = s.oid) AS submits,
               string_agg(m.roleid::regrole::text, ', ' ORDER BY m.roleid::regrole::text)
                   FILTER (WHERE m.roleid IS DISTINCT FROM s.oid) AS others
        FROM pg_catalog.pg_auth_members m WHERE m.member IN (r.oid, s.oid)) AS m ON true)"""
_USER_OF = f"""SELECT user_name, {_NOT_A_SUBMITTER.format(name="user_name")} AS not_a_submitter FROM tokens
    WHERE hash = %s AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())"""
_ROLE_OF = f"SELECT {_NOT_A_SUBMITTER.format(name='%(user)s')} AS not_a_submitter"


class RoleRefused(PermissionDenied):
    """A valid token whose user's database role is, today, more (or other) than a submitter."""


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def create_token(conn: DictConnection, user: str, expires_at: datetime | None) -> tuple[int, str]:
    """A new token for `user`: its id and the token itself, which is not kept."""
    if conn.execute("SELECT 1 FROM users WHERE name = %s", (user,)).fetchone() is None:
        raise NotFound(f"user: {user!r} does not exist (add it with `python -m job user set {user}`)")
    _ensure_submitter_role(conn, user)
    token = PREFIX + secrets.token_urlsafe(32)
    row = one(conn.execute("INSERT INTO tokens (user_name, hash, expires_at) VALUES (%s, %s, %s) RETURNING id",
                           (user, token_hash(token), expires_at)))
    return row["id"], token


def _ensure_submitter_role(conn: DictConnection, user: str) -> None:
    problem = reserved_role_problem(user)
    if problem:
        raise BadInput(f"user: {problem}")
    role = sql.Identifier(user)
    if conn.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", (user,)).fetchone() is None:
        # Roles belong to the server: another database (or a concurrent `token create`) may make it first.
        conn.execute(sql.SQL(
            """DO $$ BEGIN CREATE ROLE {role} NOLOGIN IN ROLE {submitter};
               EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$""").format(
            role=role, submitter=sql.Identifier(SUBMITTER_ROLE)))
    why = one(conn.execute(_ROLE_OF, {"user": user}))["not_a_submitter"]
    if why:
        raise BadInput(f"user: the database role {user!r} is not exactly a submitter ({why}); "
                       "a token acts only as a submitter of its own jobs")
    conn.execute(sql.SQL("GRANT {role} TO {gateway}").format(role=role, gateway=sql.Identifier(GATEWAY_ROLE)))


def list_tokens(conn: DictConnection, user: str | None) -> list[dict]:
    return conn.execute(
        """SELECT id, user_name, created_at, expires_at, revoked_at,
                  CASE WHEN revoked_at IS NOT NULL THEN 'revoked'
                       WHEN expires_at <= now() THEN 'expired' ELSE 'active' END AS state
           FROM tokens WHERE %(user)s::text IS NULL OR user_name = %(user)s ORDER BY id""",
        {"user": user}).fetchall()


def revoke_token(conn: DictConnection, token_id: int) -> dict:
    row = conn.execute(
        """UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = %s
           RETURNING id, user_name, revoked_at""", (token_id,)).fetchone()
    if row is None:
        raise NotFound(f"token {token_id} does not exist (see `python -m job token list`)")
    return row


def user_of(conn: DictConnection, token: str) -> str | None:
    """The user of a token that is neither revoked nor expired, else None; RoleRefused when that
    user's role is not exactly a submitter today. One statement: it runs for every request."""
    row = conn.execute(_USER_OF, (token_hash(token),)).fetchone()
    if row is None:
        return None
    if row["not_a_submitter"]:
        raise RoleRefused(f"token of {row['user_name']} refused: its database role is not exactly a submitter "
                          f"({row['not_a_submitter']})")
    return row["user_name"]


def act_as(conn: DictConnection, user: str) -> None:
    """The rest of this transaction runs as `user`'s role, under its row-level security."""
    conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(user)))
