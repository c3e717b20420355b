"""Wall and CPU time per phase of a pipeline run, for the benchmark (``bench.py``).

CPU time is that of the whole process tree (this interpreter, Spark's JVM and its Python workers):
on shared cores it says what a phase costs when wall time mostly says how busy the machine was.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# (module, attribute, label, parent label): functions wrapped while the pipeline runs.
STORE = "cdc_ingest.state.checkpoints"
APPLY_ALL = "cdc_ingest.apply.batch"
PHASES: tuple[tuple[str, str, str, str | None], ...] = (
    ("cdc_ingest.run.batch", "run_pipeline", "run_pipeline", None),
    ("cdc_ingest.run.batch", "list_landed", "list landing zone", "run_pipeline"),
    ("cdc_ingest.run.batch", "ensure_system_tables", "ensure _cdc_ tables", "run_pipeline"),
    (STORE, "CheckpointStore.load", "load checkpoints", "run_pipeline"),
    (STORE, "CheckpointStore.plan", "plan (sha256 of files)", "run_pipeline"),
    (STORE, "CheckpointStore.record_planned", "record planned (overlaps 1st pass)", "run_pipeline"),
    (
        "cdc_ingest.run.batch",
        "take_inventory",
        "read + decode + inventory (1st pass)",
        "run_pipeline",
    ),
    ("cdc_ingest.run.batch", "apply_all_tables", "apply all tables", "run_pipeline"),
    (APPLY_ALL, "prepare_target", "prepare target (infer types, DDL)", "apply all tables"),
    (APPLY_ALL, "apply_table", "apply table", "apply all tables"),
    ("cdc_ingest.apply.keyed", "_merge_target", "MERGE INTO target", "apply table"),
    ("cdc_ingest.apply.keyed", "_merge_tombstones", "MERGE INTO tombstones", "apply table"),
    ("cdc_ingest.apply.keyed", "_append_target", "append to created target", "apply table"),
    ("cdc_ingest.apply.keyed", "_append_tombstones", "append first tombstones", "apply table"),
    ("cdc_ingest.run.batch", "write_dead_letters", "dead letters", "run_pipeline"),
    (STORE, "CheckpointStore.record_committed", "record committed", "run_pipeline"),
)
REMAINDER = {
    "run_pipeline": "other (less the overlap of record planned)",
    "apply all tables": "other",
    "apply table": "type + collapse + classify + count",
}


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int | None = None) -> float:
    """User + system CPU seconds of a process and its live descendants (and their reaped ones)."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name, which is in parentheses and may hold spaces.
        fields = stat[stat.rindex(")") + 2 :].split()
        pid, ppid = int(entry.name), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        cpu[pid] = sum(int(f) for f in fields[11:15]) / CLOCK_TICKS
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += cpu.get(pid, 0.0)
        stack += children.get(pid, [])
    return total


@contextmanager
def timed_phases(totals: dict[str, list[float]]) -> Iterator[None]:
    """Accumulate [wall, CPU] seconds per phase into ``totals`` while the context is open."""
    import importlib

    undo: list[tuple[Any, str, Any]] = []

    def wrap(original: Callable[..., Any], label: str) -> Callable[..., Any]:
        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), tree_cpu_seconds()
            try:
                return original(*args, **kwargs)
            finally:
                spent = totals.setdefault(label, [0.0, 0.0])
                spent[0] += time.perf_counter() - start
                spent[1] += tree_cpu_seconds() - cpu

        return timed

    try:
        for module_name, attribute, label, _ in PHASES:
            owner: Any = importlib.import_module(module_name)
            *path, name = attribute.split(".")
            for part in path:
                owner = getattr(owner, part)
            original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            undo.append((owner, name, original))
            setattr(owner, name, wrap(original, label))
        yield
    finally:
        for owner, name, original in reversed(undo):
            setattr(owner, name, original)


def render_phases(totals: dict[str, list[float]]) -> list[str]:
    """The phases as an indented tree, each parent's unaccounted time as its remainder."""
    children: dict[str | None, list[str]] = {}
    for _, _, label, parent in PHASES:
        children.setdefault(parent, []).append(label)
    lines = [f"  {'phase':<56} {'wall':>8}   {'CPU':>8}"]

    def line(label: str, depth: int, spent: list[float]) -> None:
        wall, cpu = spent
        lines.append(f"  {'  ' * depth}{label:<{56 - 2 * depth}} {wall:8.2f} s {cpu:8.2f} s")

    def walk(label: str, depth: int) -> None:
        line(label, depth, totals.get(label, [0.0, 0.0]))
        kids = children.get(label, [])
        for kid in kids:
            walk(kid, depth + 1)
        if kids and label in REMAINDER:
            rest = [
                totals.get(label, [0.0, 0.0])[i] - sum(totals.get(k, [0.0, 0.0])[i] for k in kids)
                for i in (0, 1)
            ]
            line(REMAINDER[label], depth + 1, rest)

    walk("run_pipeline", 0)
    return lines
