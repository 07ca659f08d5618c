"""Crash-test aid: JOB_FAILPOINT=after-intent|after-submit kills the process at that point of a
tick, as `kill -9` would, so tests can prove that the next tick loses and repeats nothing."""

from __future__ import annotations

import os
import signal

from job import log
from job.settings import settings


def failpoint(name: str) -> None:
    if settings().failpoint == name:
        log.warning("failpoint", name=name)
        os.kill(os.getpid(), signal.SIGKILL)
