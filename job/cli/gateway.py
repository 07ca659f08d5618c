"""The gateway and its tokens: `gateway` (Ray's Job Submission API in front of the queue, a
long-lived server) and `token create USER`, `token list`, `token revoke ID`."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta

from job import log
from job.cli.output import iso, print_json, print_table
from job.cli.parsing import command, database, parser_of, positive_duration
from job.core.errors import BadInput
from job.settings import settings
from job.store import tokens

DEFAULT_PORT = 8265
DEFAULT_CONNECTIONS = 8


def register(sub) -> None:
    p = command(sub, "gateway", gateway)
    p.add_argument("--port", default=str(DEFAULT_PORT), help=f"TCP port (default {DEFAULT_PORT}, Ray's dashboard's)")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default every address)")
    p.add_argument("--connections", default=str(DEFAULT_CONNECTIONS), metavar="N",
                   help=f"PostgreSQL connections, and requests served at once (default {DEFAULT_CONNECTIONS})")
    # Well within the 600 s Ray keeps a package no job uses.
    p.add_argument("--keep-packages", metavar="DURATION", default="4m",
                   help="how often waiting jobs' --working-dir packages are pinned again in Ray, which lets an "
                        "unused one go after 10 minutes (default 4m)")

    token = parser_of(sub, "token")
    actions = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    p = command(actions, "create", token_create, "a new token for USER, printed once (only its hash is kept)")
    p.add_argument("user", metavar="USER")
    p.add_argument("--expires", metavar="DURATION", help="valid for this long, e.g. 90d (default: until revoked)")
    p = command(actions, "list", token_list, "every token: its id, user, when it expires, whether revoked",
                json_output=True)
    p.add_argument("--user", help="only this user's")
    command(actions, "revoke", token_revoke, "revoke a token: the gateway refuses it from now on").add_argument(
        "id", metavar="ID")


def _number(text: str, option: str, low: int, high: int) -> int:
    if not text.isdigit() or not low <= int(text) <= high:
        raise BadInput(f"{option}: expected a whole number from {low} to {high}, got {text!r}")
    return int(text)


def gateway(args: argparse.Namespace) -> int:
    # aiohttp and the server are for this long-lived command only, never a short `tick`'s start.
    from aiohttp import web

    from job.gateway.server import Database, make_app

    port = _number(args.port, "--port", 1, 65535)
    keep_packages_s = positive_duration(args.keep_packages, "--keep-packages")
    db = Database(settings().require_database_url(), _number(args.connections, "--connections", 1, 64))
    db.ping()  # a wrong URL or an old schema is said now, not at the first request
    log.event("gateway_serving", host=args.host, port=port, connections=db.size)
    try:
        web.run_app(make_app(db, settings().ray_timeout_s, keep_packages_s), host=args.host, port=port, print=None,
                    access_log=None, handle_signals=True,
                    # What a refused request still sends is not read (aiohttp would, for 10 s, to
                    # keep the connection): the connection closes after the answer.
                    lingering_time=0)
    except OSError as exc:
        raise BadInput(f"--port: cannot listen on {args.host}:{port}: {exc.strerror}") from None
    finally:
        db.close()
    return 0


def token_create(args: argparse.Namespace) -> int:
    expires_at = None
    if args.expires is not None:
        expires_at = datetime.now(UTC) + timedelta(seconds=positive_duration(args.expires, "--expires"))
    with database() as conn:
        token_id, token = tokens.create_token(conn, args.user, expires_at)
    # The token on stdout alone, for `$(...)`; what it is on stderr.
    print(token)
    print(f"token {token_id} for {args.user}, " + (f"expires {iso(expires_at)}" if expires_at else "valid until revoked")
          + ": shown only now, keep it secret", file=sys.stderr)
    return 0


def token_list(args: argparse.Namespace) -> int:
    with database() as conn:
        found = tokens.list_tokens(conn, args.user)
    listed = [{"id": row["id"], "user": row["user_name"], "state": row["state"], "created_at": iso(row["created_at"]),
               "expires_at": iso(row["expires_at"]), "revoked_at": iso(row["revoked_at"])} for row in found]
    if args.json:
        print_json(listed)
    elif not listed:
        print("no tokens")
    else:
        print_table(listed, ["id", "user", "state", "created_at", "expires_at", "revoked_at"])
    return 0


def token_revoke(args: argparse.Namespace) -> int:
    if not args.id.isdigit() or int(args.id) >= 2**63:
        raise BadInput(f"token id: {args.id!r} is not a token id (see `python -m job token list`)")
    with database() as conn:
        row = tokens.revoke_token(conn, int(args.id))
    print(f"token {row['id']} of {row['user_name']} revoked at {iso(row['revoked_at'])}")
    return 0
