"""Process settings, from JOB_* environment variables. Read by the CLI (and `job.api` for its
default database); everything below takes what it needs as arguments."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from job.core.errors import BadInput


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JOB_", extra="ignore")

    database_url: str | None = None
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # Crash-test aid: exit at once at this point of a tick, as a kill would.
    failpoint: Literal["after-intent", "after-preempt-intent", "after-stop", "after-submit"] | None = None
    submit_concurrency: int = Field(default=8, ge=1, le=64)
    ray_timeout_s: float = Field(default=10.0, gt=0)

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, url: str | None) -> str | None:
        if not url:
            return None
        scheme = urlsplit(url).scheme
        if scheme not in ("postgres", "postgresql"):
            raise ValueError("must be a postgresql:// URL")
        return url

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, level: object) -> object:
        return level.upper() if isinstance(level, str) else level

    def require_database_url(self) -> str:
        if not self.database_url:
            raise BadInput("JOB_DATABASE_URL is not set: give the PostgreSQL URL, e.g. postgresql://user@host:5432/db")
        return self.database_url


@lru_cache(maxsize=1)
def settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        error = exc.errors()[0]
        variable = "JOB_" + str(error["loc"][0]).upper() if error["loc"] else "JOB_*"
        # The input itself is not echoed: it may be a URL with a password.
        raise BadInput(f"{variable} is invalid: {error['msg'].removeprefix('Value error, ')}") from None
