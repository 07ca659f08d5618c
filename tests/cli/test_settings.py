"""The JOB_* variables read into the process's settings (job/settings.py): values converted from
the environment's text, a bad one named in one line, the URLs never echoed."""

from __future__ import annotations

import pytest

from job.core.errors import BadInput
from job.settings import Settings


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, Settings()),
    ({"JOB_DATABASE_URL": "postgresql://u@h:5432/db"}, Settings(database_url="postgresql://u@h:5432/db")),
    ({"JOB_DATABASE_URL": "postgres://u@h/db", "JOB_READER_URL": ""}, Settings(database_url="postgres://u@h/db")),
    ({"JOB_DATABASE_URL": ""}, Settings()),
    ({"JOB_SUBMIT_CONCURRENCY": "64", "JOB_RAY_TIMEOUT_S": "2.5"}, Settings(submit_concurrency=64, ray_timeout_s=2.5)),
    ({"JOB_LOG_LEVEL": "debug", "JOB_LOG_FORMAT": "json"}, Settings(log_level="DEBUG", log_format="json")),
    ({"JOB_FAILPOINT": "after-submit"}, Settings(failpoint="after-submit")),
    # The shell's names in any case, as pydantic-settings read them; other variables ignored.
    ({"job_log_level": "ERROR", "Job_Ray_Timeout_S": "1"}, Settings(log_level="ERROR", ray_timeout_s=1.0)),
    ({"JOB_UNKNOWN": "x", "JOBS_LOG_LEVEL": "loud", "PATH": "/bin"}, Settings()),
])
def test_settings_read(environ, expected):
    assert Settings.read(environ) == expected


@pytest.mark.parametrize(("environ", "message"), [
    ({"JOB_SUBMIT_CONCURRENCY": "0"}, "JOB_SUBMIT_CONCURRENCY is invalid: Expected `int` >= 1"),
    ({"JOB_SUBMIT_CONCURRENCY": "65"}, "JOB_SUBMIT_CONCURRENCY is invalid: Expected `int` <= 64"),
    ({"JOB_SUBMIT_CONCURRENCY": "eight"}, "JOB_SUBMIT_CONCURRENCY is invalid: Expected `int`, got `str`"),
    ({"JOB_RAY_TIMEOUT_S": "0"}, "JOB_RAY_TIMEOUT_S is invalid: Expected `float` >= 1.0"),
    ({"JOB_RAY_TIMEOUT_S": "0.001"}, "JOB_RAY_TIMEOUT_S is invalid: Expected `float` >= 1.0"),
    ({"JOB_RAY_TIMEOUT_S": "inf"}, "JOB_RAY_TIMEOUT_S is invalid: Expected `float` <= 300.0"),
    ({"JOB_RAY_TIMEOUT_S": "nan"}, "JOB_RAY_TIMEOUT_S is invalid: Expected `float` >= 1.0"),
    ({"JOB_LOG_LEVEL": "loud"}, "JOB_LOG_LEVEL is invalid: Invalid enum value 'LOUD'"),
    ({"JOB_LOG_FORMAT": "xml"}, "JOB_LOG_FORMAT is invalid: Invalid enum value 'xml'"),
    ({"JOB_FAILPOINT": "before-intent"}, "JOB_FAILPOINT is invalid: Invalid enum value 'before-intent'"),
    ({"JOB_DATABASE_URL": "mysql://ann:s3cret@h/db"}, "JOB_DATABASE_URL is invalid: must be a postgresql:// URL"),
    ({"JOB_READER_URL": "ann:s3cret@h/db"}, "JOB_READER_URL is invalid: must be a postgresql:// URL"),
])
def test_a_bad_variable_is_named_in_one_line(environ, message):
    with pytest.raises(BadInput) as raised:
        Settings.read(environ)
    assert str(raised.value) == message
    assert "s3cret" not in str(raised.value)


def test_the_database_url_is_required_where_needed():
    with pytest.raises(BadInput, match="JOB_DATABASE_URL is not set"):
        Settings.read({}).require_database_url()
    assert Settings.read({"JOB_DATABASE_URL": "postgresql://h/db"}).require_reader_url() == "postgresql://h/db"
