"""Bearer tokens of the gateway (sql/0018_tokens.sql): create, list, revoke, and who a token is.

A token is 32 random bytes, shown once; only its SHA-256 is stored. The gateway acts for a token's
user under that user's own database role (SET ROLE), so that the row-level security of
sql/0005_roles.sql confines it: `create` makes the role where it is missing (a member of
job_submitter, without login) and grants it to job_gateway."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

import psycopg
from psycopg import sql

from job.core.errors import BadInput, NotFound

PREFIX = "jobtok_"
GATEWAY_ROLE = "job_gateway"
SUBMITTER_ROLE = "job_submitter"
# Roles whose rights reach beyond a user's own jobs: a token must never carry them.
_WIDER_ROLES = ("job_admin", "job_scheduler", "job_reader", GATEWAY_ROLE)


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def create_token(conn: psycopg.Connection, user: str, expires_at: datetime | None) -> tuple[int, str]:
    """A new token for `user`: its id and the token itself, which is not kept."""
    if conn.execute("SELECT 1 FROM users WHERE name = %s", (user,)).fetchone() is None:
        raise NotFound(f"user: {user!r} does not exist (add it with `python -m job user set {user}`)")
    _ensure_submitter_role(conn, user)
    token = PREFIX + secrets.token_urlsafe(32)
    row = conn.execute("INSERT INTO tokens (user_name, hash, expires_at) VALUES (%s, %s, %s) RETURNING id",
                       (user, token_hash(token), expires_at)).fetchone()
    return row["id"], token


def _ensure_submitter_role(conn: psycopg.Connection, user: str) -> None:
    role = sql.Identifier(user)
    row = conn.execute(
        """SELECT r.rolsuper OR r.rolbypassrls AS unconfined,
                  pg_has_role(r.oid, %s, 'MEMBER') AS submits,
                  (SELECT array_agg(w) FROM unnest(%s::text[]) AS w
                   WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = w) AND pg_has_role(r.oid, w, 'MEMBER')) AS wider
           FROM pg_roles r WHERE r.rolname = %s""",
        (SUBMITTER_ROLE, list(_WIDER_ROLES), user)).fetchone()
    if row is None:
        # Roles belong to the server: another database (or a concurrent `token create`) may make it first.
        conn.execute(sql.SQL(
            """DO $$ BEGIN CREATE ROLE {role} NOLOGIN IN ROLE {submitter};
               EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$""").format(
            role=role, submitter=sql.Identifier(SUBMITTER_ROLE)))
    elif row["unconfined"] or row["wider"] or not row["submits"]:
        what = ("is a superuser or bypasses row-level security" if row["unconfined"] else
                f"is a member of {', '.join(row['wider'])}" if row["wider"] else f"is not a member of {SUBMITTER_ROLE}")
        raise BadInput(f"user: the database role {user!r} {what}; a token acts only as a submitter of its own jobs")
    conn.execute(sql.SQL("GRANT {role} TO {gateway}").format(role=role, gateway=sql.Identifier(GATEWAY_ROLE)))


def list_tokens(conn: psycopg.Connection, user: str | None) -> list[dict]:
    return conn.execute(
        """SELECT id, user_name, created_at, expires_at, revoked_at,
                  CASE WHEN revoked_at IS NOT NULL THEN 'revoked'
                       WHEN expires_at <= now() THEN 'expired' ELSE 'active' END AS state
           FROM tokens WHERE %(user)s::text IS NULL OR user_name = %(user)s ORDER BY id""",
        {"user": user}).fetchall()


def revoke_token(conn: psycopg.Connection, token_id: int) -> dict:
    row = conn.execute(
        """UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = %s
           RETURNING id, user_name, revoked_at""", (token_id,)).fetchone()
    if row is None:
        raise NotFound(f"token {token_id} does not exist (see `python -m job token list`)")
    return row


def user_of(conn: psycopg.Connection, token: str) -> str | None:
    """The user of a token that is neither revoked nor expired, else None."""
    row = conn.execute(
        """SELECT user_name FROM tokens
           WHERE hash = %s AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())""",
        (token_hash(token),)).fetchone()
    return None if row is None else row["user_name"]


def act_as(conn: psycopg.Connection, user: str) -> None:
    """The rest of this transaction runs as `user`'s role, under its row-level security."""
    conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(user)))
