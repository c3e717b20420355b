"""Wall (and, when asked, CPU) time per stage of a run, nested: one mechanism for all readers.

A run opens ``with stage("apply"):`` around each of its stages, and lower layers open their own
steps the same way (``with stage("merge target"):``); a step opened inside another is recorded
under its path (``apply/merge target``). The run's summary keeps the top-level wall times
(``phase_seconds``); the bench records the same stages with the process tree's CPU time as well,
by passing its clock to :class:`StageTimings`. Steps outside any recording cost two lookups.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

SEPARATOR = "/"


@dataclass
class StageTimings:
    """Seconds spent per stage path, summed over every time the stage ran.

    Attributes:
        cpu_clock: a clock of CPU seconds (the bench's process-tree clock), or None for wall only.
        spent: ``[wall, cpu]`` seconds by stage path (``cpu`` stays 0 without a clock).
    """

    cpu_clock: Callable[[], float] | None = None
    spent: dict[str, list[float]] = field(default_factory=dict)
    _open: list[str] = field(default_factory=list)

    def top_level(self) -> dict[str, float]:
        """Wall seconds of the stages opened outside any other, rounded to milliseconds."""
        return {p: round(s[0], 3) for p, s in self.spent.items() if SEPARATOR not in p}


_recording: ContextVar[StageTimings | None] = ContextVar("cdc_ingest_stage_timings", default=None)


@contextmanager
def recording(timings: StageTimings) -> Iterator[StageTimings]:
    """Record the stages opened inside this context (in this thread) into ``timings``."""
    token = _recording.set(timings)
    try:
        yield timings
    finally:
        _recording.reset(token)


def current() -> StageTimings | None:
    """The timings being recorded, if any."""
    return _recording.get()


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Time one stage or step into the timings being recorded (nothing when none is)."""
    timings = _recording.get()
    if timings is None:
        yield
        return
    timings._open.append(name)
    path = SEPARATOR.join(timings._open)
    clock = timings.cpu_clock
    start, cpu = time.perf_counter(), clock() if clock else 0.0
    try:
        yield
    finally:
        spent = timings.spent.setdefault(path, [0.0, 0.0])
        spent[0] += time.perf_counter() - start
        if clock:
            spent[1] += clock() - cpu
        timings._open.pop()
