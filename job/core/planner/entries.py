"""The planner's entry for one pending job, and the names of its fields.

An entry is a plain flat tuple, in this order (the positions are the constants below):

    NEG_PRIORITY  -priority
    SUBMITTED_AT  submitted_at, or the earliest datetime for a job without one
    POSITION      the job's place in the snapshot's list if it has no submitted_at, else 0
    ID_LENGTH     len(id)
    ID            the job's id
    NOT_BEFORE    when it may start, if still to come, else None
    SHAPE         its Shape
    USER          its UserState
    JOB           the pending job itself (its Struct in the snapshot)

Sorted as they are, entries come in fifo order: higher priority first, then older first (jobs
without submitted_at before the others, in list order), then by id, shorter first: the tick's ids
are numbers, and "9" goes before "10". Ids are unique, so a comparison never goes past ID.

Why a plain tuple, with positions as constants rather than a NamedTuple: the planner makes one
entry per pending job (100k and more), sorts them, and reads each in its main loop. Flat, not
(key, job): sorting flat tuples is about twice as fast. Not a NamedTuple: the interpreter's fast
paths for building and indexing a tuple are for exact tuples only, so a NamedTuple per job costs
more to build (tuple.__new__(Entry, (...)) copies a tuple, the class constructor is a Python call)
and more to read in the loop, for the same sort. Read a field as `entry[USER]`; the planner's loop
reads only the fields it needs of every entry (the sorted entries lie scattered in memory, and a
field read is an object touched), and the job and its time only where it goes on to read them.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Final

from job.core.planner.picture import Shape, UserState

if TYPE_CHECKING:
    # Not imported to run: the snapshot imports the rules and through them this module.
    from job.core.planner.snapshot import Pending

Entry = tuple[int, datetime, int, int, str, datetime | None, Shape, UserState, "Pending"]

# Final, so that the type checker reads `entry[USER]` as the type of that field.
NEG_PRIORITY: Final = 0
SUBMITTED_AT: Final = 1
POSITION: Final = 2
ID_LENGTH: Final = 3
ID: Final = 4
NOT_BEFORE: Final = 5
SHAPE: Final = 6
USER: Final = 7
JOB: Final = 8
