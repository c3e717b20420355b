"""Wall and CPU time per stage of a pipeline run, for the benchmark (``bench.py``).

The stages are the run's own (``cdc_ingest.stages``), recorded with this module's CPU clock.

CPU time is that of the whole process tree (this interpreter, Spark's JVM and its Python workers):
on shared cores it says what a phase costs when wall time mostly says how busy the machine was.
"""

from __future__ import annotations

import os

from cdc_ingest.stages import SEPARATOR, StageTimings

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# Processes seen not to descend from the measured one: a process never becomes another's
# descendant later (an orphan goes to init), so each is read once, not on every reading.
_FOREIGN: set[int] = set()


def tree_cpu_seconds(root: int | None = None) -> float:
    """User + system CPU seconds of a process and its live descendants (and their reaped ones).

    A stage table reads this clock at every stage's start and end, thousands of times in a batch
    of hundreds of tables: reading every process's stat each time cost 3.8 ms a reading (about 6
    of 50 CPU-s of a 300-table pair of batches, 27 November 2026), so processes once found
    foreign are skipped.
    """
    root = os.getpid() if root is None else root
    # Foreign to this process, not to another root (the bench's engine is not its descendant).
    skipped = _FOREIGN if root == os.getpid() else set()
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skipped:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue
        # Fields after the command name, which is in parentheses and may hold spaces.
        fields = stat[stat.rindex(b")") + 2 :].split()
        pid, ppid = int(name), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        cpu[pid] = sum(int(f) for f in fields[11:15]) / CLOCK_TICKS
    total, stack, mine = 0.0, [root], set()
    while stack:
        pid = stack.pop()
        mine.add(pid)
        total += cpu.get(pid, 0.0)
        stack += children.get(pid, [])
    if root == os.getpid():
        _FOREIGN.update(pid for pid in cpu if pid not in mine)
    return total


def render_phases(timings: StageTimings) -> list[str]:
    """The stages as an indented tree (wall and CPU), each parent's unaccounted time last."""
    spent = timings.spent
    lines = [f"  {'stage':<56} {'wall':>8}   {'CPU':>8}"]

    def line(label: str, depth: int, wall: float, cpu: float) -> None:
        lines.append(f"  {'  ' * depth}{label:<{56 - 2 * depth}} {wall:8.2f} s {cpu:8.2f} s")

    def walk(path: str, depth: int) -> None:
        wall, cpu = spent[path]
        line(path.rsplit(SEPARATOR, 1)[-1], depth, wall, cpu)
        kids = [p for p in spent if p.rsplit(SEPARATOR, 1)[0] == path and p != path]
        for kid in kids:
            walk(kid, depth + 1)
        if kids:
            rest_wall = wall - sum(spent[k][0] for k in kids)
            rest_cpu = cpu - sum(spent[k][1] for k in kids)
            line("other", depth + 1, rest_wall, rest_cpu)

    for path in spent:
        if SEPARATOR not in path:
            walk(path, 0)
    return lines
