"""Errors that end a command with a clear one-line message instead of a traceback."""

import re

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.@/-]{1,63}")


def quoted(value: object, most: int = 40) -> str:
    """A value as a refusal quotes it: its repr (control characters escaped, one line), cut to
    `most` characters, so that a refused 4,000-digit number or a megabyte of name is not echoed."""
    try:
        text = repr(value)
    except ValueError:  # an integer of more digits than Python writes out
        return "a number too long to show"
    return text if len(text) <= most else text[:most - 3] + "..."


def key_named(key: object) -> str:
    """A key as a refusal names it in a field's path (`metadata.KEY: ...`): as it is when plain,
    else quoted."""
    text = str(key)
    return text if isinstance(key, int) or _PLAIN_KEY.fullmatch(text) else quoted(key)


class JobError(Exception):
    """An expected failure: its message is shown to the person, as is."""

    exit_status = 1


class BadInput(JobError):
    """Input refused before anything was written."""

    exit_status = 2


class NotFound(JobError):
    exit_status = 2


class PermissionDenied(JobError):
    """The database role the command runs as may not do this (PostgreSQL's privileges and row-level
    security, sql/0005_roles.sql): the message names what was refused."""

    exit_status = 2


class Conflict(JobError):
    """The request is valid but the current state forbids it (e.g. removing a busy group)."""

    exit_status = 2


class NotMigrated(JobError):
    exit_status = 2


class IncompleteInstall(JobError):
    """The installed package lacks files it ships with (e.g. its SQL migrations): a broken build
    or image, not a state of the database."""

    exit_status = 1


class Unavailable(JobError):
    """PostgreSQL, Ray or Kubernetes could not be reached."""

    exit_status = 1


class DatabaseUnavailable(Unavailable):
    """PostgreSQL refused or lost the connection: the loop waits for it (scheduler/loop.py)."""


class ClusterNotReady(JobError):
    """A group's Ray cluster cannot be used this tick (e.g. its RayCluster is missing or not ready):
    the group is skipped with this reason, the other groups go on."""

    exit_status = 1


class InvalidRow(JobError):
    """A stored row that fails the checks its command makes, written past the command (an admin's
    SQL): the row's own work fails with this, naming the field and the value; the others go on."""

    exit_status = 1

    def __init__(self, message: str, field: str, value: str):
        super().__init__(message)
        self.fields = {"field": field, "value": value}
