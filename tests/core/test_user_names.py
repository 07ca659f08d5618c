"""A user's name is its PostgreSQL role's: the names PostgreSQL reserves or reads as another role,
and the queue's group roles, are refused (job/core/roles.py), by `user set` as by every UserSpec."""

import pytest

from job.core.errors import BadInput
from job.core.specs import UserSpec, validated


@pytest.mark.parametrize("name", ["public", "PUBLIC", "none", "current_user", "session_user", "Current_Role",
                                  "system_user", "pg_monitor", "pg_x", "PG_anything", "job_submitter", "job_admin",
                                  "job_scheduler", "job_reader", "job_gateway"])
def test_reserved_role_names_are_no_users(name):
    with pytest.raises(BadInput, match=rf"^name: '{name}' is reserved: a user's name is its database role's"):
        validated(UserSpec, {"name": name})


@pytest.mark.parametrize("name", ["alice", "publicity", "nonet", "pgx", "job_submitters", "team.pg_x", "a@pg_b"])
def test_names_near_them_are_users(name):
    assert validated(UserSpec, {"name": name}).name == name
