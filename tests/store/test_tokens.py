"""A token is a submitter, whatever its role becomes (job/store/tokens.py), and one installation
cannot act in another on the same server (sql/0021_installations_apart.sql), on the real
PostgreSQL.

Roles belong to the server and are shared with concurrent test runs: the roles made here have
names no other test uses, and are dropped at the end."""

from __future__ import annotations

import os

import psycopg
import pytest
from cli_helpers import run_cli
from psycopg import sql
from psycopg.rows import dict_row

from job.devtools.local_postgres import with_database
from job.store import tokens
from job.store.migrations import migrate
from job.store.tokens import RoleRefused

ATTRIBUTES = ("SUPERUSER", "CREATEDB", "CREATEROLE", "REPLICATION", "BYPASSRLS")


@pytest.fixture
def make_role(conn):
    """`make_role(name, attributes, members_of)`: the role `name`, NOLOGIN with `attributes` and no
    others, a member of `members_of` alone, granted to no one; dropped at the end."""
    made = []

    def make(name: str, attributes: str, members_of: tuple[str, ...] = ()) -> None:
        role = sql.Identifier(name)
        options = " ".join(each if each in attributes.split() else f"NO{each}" for each in ATTRIBUTES)
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(role))  # left by a run that was killed
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN " + options).format(role))
        made.append(role)
        for group in members_of:
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), role))

    yield make
    for role in made:
        conn.execute(sql.SQL("DROP ROLE {}").format(role))


def granted(conn, role: str) -> list[str]:
    """The roles `role` is a direct member of, and the roles that are members of it."""
    return [row["name"] for row in conn.execute(
        """SELECT 'member of ' || pg_get_userbyid(roleid) AS name FROM pg_auth_members WHERE member = to_regrole(%(r)s)
           UNION ALL
           SELECT pg_get_userbyid(member) || ' is a member' FROM pg_auth_members WHERE roleid = to_regrole(%(r)s)
           ORDER BY 1""", {"r": role})]


WIDER = [
    # (user, attributes, more memberships than job_submitter, what the refusal names)
    ("jobtok_createrole", "CREATEROLE", (), "(CREATEROLE)"),
    ("jobtok_createdb", "CREATEDB", (), "(CREATEDB)"),
    ("jobtok_replication", "REPLICATION", (), "(REPLICATION)"),
    ("jobtok_bypassrls", "BYPASSRLS", (), "(BYPASSRLS)"),
    ("jobtok_superuser", "SUPERUSER CREATEDB", (), "(SUPERUSER, CREATEDB)"),
    ("jobtok_readall", "", ("pg_read_all_data",), "(member of pg_read_all_data)"),
    ("jobtok_signal", "", ("pg_signal_backend", "pg_write_all_data"), "(member of pg_signal_backend, pg_write_all_data)"),
    ("jobtok_admin", "", ("job_admin",), "(member of job_admin)"),
    ("jobtok_nosubmitter", "", None, "(not a member of job_submitter)"),
    # The name alone is refused, whatever its role.
    ("job_submitter", None, (), "user: 'job_submitter' is reserved"),
    ("job_gateway", None, (), "user: 'job_gateway' is reserved"),
    ("pg_x", None, (), "user: 'pg_x' is reserved"),
    ("pg_read_all_data", None, (), "user: 'pg_read_all_data' is reserved"),
]


@pytest.mark.parametrize("user, attributes, members_of, message", WIDER, ids=[case[0] for case in WIDER])
def test_token_create_refuses_a_role_that_is_more_than_a_submitter(conn, capsys, make_role, user, attributes,
                                                                  members_of, message):
    if attributes is not None:
        make_role(user, attributes, () if members_of is None else ("job_submitter", *members_of))
    conn.execute("INSERT INTO users (name) VALUES (%s)", (user,))
    before = granted(conn, user)
    result = run_cli(capsys, "token", "create", user)
    assert result.status == 2 and result.out == "", result
    assert result.err.startswith("error: user: ") and result.err.count("\n") == 1, result
    assert message in result.err
    assert granted(conn, user) == before  # not granted to job_gateway, nor anything else
    assert conn.execute("SELECT count(*) AS n FROM tokens").fetchone()["n"] == 0


@pytest.fixture
def carol(conn, make_role):
    """A user with a token, whose role a test widens."""
    name = "jobtok_carol"
    make_role(name, "", ("job_submitter",))
    conn.execute("INSERT INTO users (name) VALUES (%s)", (name,))
    return name, tokens.create_token(conn, name, None)[1]


def test_a_token_whose_role_grew_is_refused_at_use_and_taken_again_once_it_is_a_submitter(conn, carol):
    name, token = carol
    assert tokens.user_of(conn, token) == name
    conn.execute(sql.SQL("ALTER ROLE {} CREATEDB").format(sql.Identifier(name)))
    with pytest.raises(RoleRefused, match=rf"^token of {name} refused: its database role is not exactly a submitter "
                                          r"\(CREATEDB\)$"):
        tokens.user_of(conn, token)
    conn.execute(sql.SQL("ALTER ROLE {} NOCREATEDB").format(sql.Identifier(name)))
    conn.execute(sql.SQL("GRANT job_admin TO {}").format(sql.Identifier(name)))
    with pytest.raises(RoleRefused, match=r"\(member of job_admin\)$"):
        tokens.user_of(conn, token)
    conn.execute(sql.SQL("REVOKE job_admin FROM {}").format(sql.Identifier(name)))
    assert tokens.user_of(conn, token) == name
    assert tokens.user_of(conn, token + "x") is None


@pytest.fixture
def installations(pg_server_url):
    """Two installations on one server, `a` and `b`: each a fresh database migrated as `migrate`
    does, with a gateway login of its own, granted job_gateway and CONNECT on its own database
    alone. Databases and roles are dropped at the end."""
    pid = os.getpid()
    made = {side: (f"jobtok_{pid}_{side}", f"jobtok_gateway_{pid}_{side}") for side in ("a", "b")}
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        for dbname, login in made.values():
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE job_gateway").format(sql.Identifier(login)))
    try:
        for dbname, login in made.values():
            with psycopg.connect(with_database(pg_server_url, dbname), autocommit=True, row_factory=dict_row) as owner:
                migrate(owner)
                owner.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                    sql.Identifier(dbname), sql.Identifier(login)))
        yield {side: (with_database(pg_server_url, dbname), login) for side, (dbname, login) in made.items()}
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            for dbname, login in made.values():
                admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
                admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(login)))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(f"jobtok_alice_{pid}")))


def test_two_installations_on_one_server_are_apart(installations):
    (url_a, gateway_a), (url_b, gateway_b) = installations["a"], installations["b"]
    alice = f"jobtok_alice_{os.getpid()}"
    with psycopg.connect(url_a, autocommit=True, row_factory=dict_row) as owner:
        # A's submitter, with a login of her own on A, as docs/operations/roles-and-logins.md makes one.
        owner.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE job_submitter").format(sql.Identifier(alice)))
        owner.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
            sql.Identifier(owner.info.dbname), sql.Identifier(alice)))
        owner.execute("INSERT INTO resource_groups (name, clusters) VALUES ('g', '[{\"name\": \"c\", \"address\": \"http://ray.invalid:8265\"}]')")
        owner.execute("INSERT INTO users (name) VALUES (%s)", (alice,))
        token = tokens.create_token(owner, alice, None)[1]
        owner.execute("INSERT INTO jobs (user_name, group_name, entrypoint, resources) VALUES (%s, 'g', 'secret.py', '{}')",
                      (alice,))
    # A's gateway login acts for A's user in A: her token, her role, her job.
    with psycopg.connect(url_a, user=gateway_a, row_factory=dict_row) as gateway:
        tokens.act_as(gateway, tokens.user_of(gateway, token))
        assert [row["entrypoint"] for row in gateway.execute("SELECT entrypoint FROM jobs")] == ["secret.py"]
    # B's gateway login is a member of job_gateway, a member of alice's role since her token: it
    # may SET ROLE to her, but it cannot connect to A, where her jobs are. job_gateway is NOINHERIT,
    # so it holds none of her rights, not her CONNECT on A either.
    with psycopg.connect(url_b, user=gateway_b, autocommit=True) as gateway:
        assert gateway.execute("SELECT pg_has_role(%s, 'MEMBER'), pg_has_role(%s, 'USAGE')",
                               (alice, alice)).fetchone() == (True, False)
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        psycopg.connect(url_a, user=gateway_b).close()
    # Nor may the server's other roles: PUBLIC and the group roles every installation shares.
    with psycopg.connect(url_a, autocommit=True) as owner:
        may = owner.execute(
            """SELECT r FROM unnest(ARRAY['public', 'job_admin', 'job_scheduler', 'job_submitter', 'job_reader',
                                          'job_gateway']) AS r
               WHERE has_database_privilege(r, current_database(), 'CONNECT')
                  OR has_database_privilege(r, current_database(), 'TEMPORARY')""").fetchall()
    assert may == []
