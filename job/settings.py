"""Process settings, from JOB_* environment variables. Read by the CLI (and `job.api` for its
default database); everything below takes what it needs as arguments.

Read with msgspec, not pydantic-settings: every command reads its settings at start, and importing
pydantic-settings alone took 0.27 s of CPU (the start budget is 0.3 s, bench/README.md),
msgspec 0.03 s, for seven variables."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Annotated, Literal
from urllib.parse import urlsplit

import msgspec

from job.core.errors import BadInput

PREFIX = "JOB_"


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    database_url: str | None = None
    # `serve`'s login, read only (job_reader); JOB_DATABASE_URL where it is not set.
    reader_url: str | None = None
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # Crash-test aid: exit at once at this point of a tick, as a kill would.
    failpoint: Literal["after-intent", "after-preempt-intent", "after-stop", "after-submit"] | None = None
    submit_concurrency: Annotated[int, msgspec.Meta(ge=1, le=64)] = 8
    # Bounded: past 300 s a hung dashboard holds the group's lock as long; under 1 s a busy one
    # answers too late, and a cluster that seems not to answer is taken for lost (its jobs run
    # again elsewhere). `inf` failed every call to Ray (a socket takes no such timeout).
    ray_timeout_s: Annotated[float, msgspec.Meta(ge=1, le=300)] = 10.0

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> Settings:
        """The settings of the JOB_* variables in `environ` (any case, as the shell gives them);
        BadInput naming the first bad variable."""
        values = {name[len(PREFIX):].lower(): value for name, value in environ.items()
                  if name[:len(PREFIX)].upper() == PREFIX and name[len(PREFIX):].lower() in FIELDS}
        for name in ("database_url", "reader_url"):
            # The URL itself is not echoed: it may hold a password.
            if values.get(name) and urlsplit(values[name]).scheme not in ("postgres", "postgresql"):
                raise BadInput(f"{PREFIX}{name.upper()} is invalid: must be a postgresql:// URL")
            if not values.get(name, True):
                del values[name]
        if "log_level" in values:
            values["log_level"] = values["log_level"].upper()
        try:
            return msgspec.convert(values, cls, strict=False)
        except msgspec.ValidationError as exc:
            # The values are a dict of known fields: msgspec's every error is at a field's path.
            path = _PATH.fullmatch(str(exc))
            assert path is not None, exc
            message, field = path.groups()
            raise BadInput(f"{PREFIX}{field.upper()} is invalid: {message}") from None

    def require_database_url(self) -> str:
        if not self.database_url:
            raise BadInput("JOB_DATABASE_URL is not set: give the PostgreSQL URL, e.g. postgresql://user@host:5432/db")
        return self.database_url

    def require_reader_url(self) -> str:
        return self.reader_url or self.require_database_url()


FIELDS = frozenset(Settings.__struct_fields__)
# msgspec's words for a bad field: "Expected `int` >= 1 - at `$.submit_concurrency`".
_PATH = re.compile(r"(.*) - at `\$\.(\w+)`", re.DOTALL)


@lru_cache(maxsize=1)
def settings() -> Settings:
    return Settings.read(os.environ)
