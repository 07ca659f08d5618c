"""Crash-test aid: JOB_FAILPOINT=NAME kills the process at that point of a tick, as `kill -9`
would, so tests can prove that the next tick loses and repeats nothing."""

from __future__ import annotations

import os
import signal

from job import log


def failpoint(name: str, armed: str | None) -> None:
    """Die here if `armed` (the configured failpoint) names this point."""
    if armed == name:
        log.warning("failpoint", name=name)
        os.kill(os.getpid(), signal.SIGKILL)
