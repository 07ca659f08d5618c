"""The cyclic garbage collector paused while a step makes millions of objects that are never
cyclic garbage (100k pending rows, their snapshot and plan; a million jobs validated): meanwhile
each collection would only walk them again, and one at the end would walk them all while they are
still held. Reference counting frees them as ever; the collector is on again after, as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
