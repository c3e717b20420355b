"""How one run differs from "apply every new file to every table": the options, defined once.

:data:`RUN_OPTIONS` is the one definition. The ``cdc-ingest run`` flags (``cli.py``), the ingest
DAG's Params and the flags its ``apply_batch`` task passes to spark-submit (``dag_factory.py``),
and the ``check_landing`` rule "a replay always has work" are all generated from it. Plain Python
only: the DAG processor imports this.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cdc_ingest.landing.landed_time import INSTANT_HELP, LandedAtError, LandedRange, parse_instant

NAMES, BOOLEAN, COUNT, INSTANT, TEXT = "names", "boolean", "count", "instant", "text"
# A table name as a Param accepts it (target tables are identifier parts, see schema/names.py).
TABLE_NAME_PATTERN = "^[A-Za-z0-9_]+$"
# An ISO 8601 date or date-time (optional seconds, fraction and zone): what parse_instant takes.
INSTANT_PATTERN = r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$"


class RunRefused(RuntimeError):
    """The run's options cannot be honoured in the pipeline's current state."""


class OptionsError(ValueError):
    """Options that do not go together (one line naming them)."""


@dataclass(frozen=True)
class RunOption:
    """One option of a run.

    Attributes:
        name: the DAG Param's name (``tables``); the flag is ``--`` and the name with dashes.
        kind: ``names`` (comma-separated table names), ``boolean``, ``count`` (an integer of at
            least 1), ``instant`` (:data:`INSTANT_HELP`) or ``text``.
        title: the Param's title in the trigger form.
        help: what it does, for ``--help`` and the trigger form.
        param: whether the DAG declares it as a Param (else the value comes from the run).
        value: the Jinja expression of its value in an ingest DAG run.
        backfill: the Jinja expression of its value in a backfill run, if that differs.
        forces_run: a run with it set has work even when nothing new landed.
    """

    name: str
    kind: str
    title: str
    help: str
    param: bool = True
    value: str | None = None
    backfill: str | None = None
    forces_run: bool = False

    @property
    def flag(self) -> str:
        """The command-line flag."""
        return "--" + self.name.replace("_", "-")

    def template(self) -> str:
        """The ``--flag=value`` argument of the ingest DAG's spark-submit, as a Jinja template."""
        value = self.value or _VALUE_TEMPLATES[self.kind].format(name=f"params.{self.name}")
        if self.backfill is not None:
            value = f"({self.backfill}) if dag_run.run_type == 'backfill' else ({value})"
        return f"{self.flag}={{{{ {value} }}}}"

    def param_schema(self) -> tuple[Any, dict[str, Any]]:
        """The Param's default and JSON schema."""
        if self.kind == NAMES:
            items = {"type": "string", "pattern": TABLE_NAME_PATTERN}
            return [], {"type": "array", "items": items, "uniqueItems": True}
        if self.kind == BOOLEAN:
            return False, {"type": "boolean"}
        if self.kind == COUNT:
            return None, {"type": ["null", "integer"], "minimum": 1}
        if self.kind == INSTANT:
            return None, {"type": ["null", "string"], "pattern": INSTANT_PATTERN}
        return None, {"type": ["null", "string"]}


# Empty values mean "not set", so that one template serves every run.
_VALUE_TEMPLATES = {
    NAMES: "{name} | join(',')",
    BOOLEAN: "'true' if {name} else 'false'",
    COUNT: "{name} if {name} is not none else ''",
    INSTANT: "{name} or ''",
    TEXT: "{name} or ''",
}

RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption(
        "tables",
        NAMES,
        "Tables",
        "Apply only these target tables (empty: all). The batch's files stay pending, and the "
        "next full run applies them to every table.",
    ),
    RunOption(
        "max_files",
        COUNT,
        "Max files",
        "Plan at most this many new files, oldest first (in landing order; empty: all).",
    ),
    RunOption(
        "dry_run",
        BOOLEAN,
        "Dry run",
        "Decode and report; write no table, dead letter, batch row or checkpoint.",
    ),
    RunOption(
        "run_id",
        TEXT,
        "Run id",
        "The orchestrator's run id, kept in _cdc_batches.",
        param=False,
        value="run_id",
    ),
    # A backfill run replays the files that landed in its data interval; other runs replay only
    # when the Params ask.
    RunOption(
        "replay_from",
        INSTANT,
        "Replay from",
        "Re-apply the already-applied files that landed at or after this instant (UTC unless it "
        f"names a zone; {INSTANT_HELP}; landing time as the pipeline's landed_at says). "
        "Harmless to the tables; empty: no replay.",
        backfill="data_interval_start.isoformat()",
        forces_run=True,
    ),
    RunOption(
        "replay_to",
        INSTANT,
        "Replay to",
        "Replay the applied files that landed before this instant (empty: no end).",
        backfill="data_interval_end.isoformat()",
        forces_run=True,
    ),
    RunOption(
        "rebuild_tables",
        NAMES,
        "Rebuild tables",
        "Drop these tables of the pipeline and rebuild them from every applied file still "
        "landed (not with a replay range).",
        backfill="''",
        forces_run=True,
    ),
)


@dataclass(frozen=True)
class RunOptions:
    """How one run differs from "apply every new file to every table".

    Attributes:
        tables: apply only these target tables. The checkpoint is file-level, so the batch's
            files are not marked applied: a later full run applies them to every table, and
            re-applying them to these tables changes nothing (the ordering guards skip changes
            not newer than what a table holds). Dead letters and DDL history are left to that
            full run, so they are written once. Append-only (keyless) tables are not applied by
            such a run: appends cannot be repeated safely. Refused while a batch is pending.
        dry_run: read, decode and count; write nothing (no table, dead letter, batch row or
            checkpoint; not even the system tables of a new namespace).
        max_files: plan at most this many new files, the first in landing order.
        run_id: the orchestrator's run id, stored in ``_cdc_batches``.
        landed: replay the committed files whose landing time is in this range (see ``modes``).
        rebuild_tables: drop these tables and apply every committed file still landed to them.
    """

    tables: tuple[str, ...] = ()
    dry_run: bool = False
    max_files: int | None = None
    run_id: str | None = None
    landed: LandedRange | None = None
    rebuild_tables: tuple[str, ...] = ()

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> RunOptions:
        """The options of parsed values by :data:`RUN_OPTIONS` name (missing: not set).

        Raises:
            OptionsError: a replay range with rebuild tables, tables or a file cap with a replay
                or rebuild, or a range that ends before it starts.
        """
        start, end = values.get("replay_from"), values.get("replay_to")
        rebuild = tuple(values.get("rebuild_tables") or ())
        landed = None
        if start is not None or end is not None:
            if rebuild:
                raise OptionsError(
                    "--replay-from/--replay-to and --rebuild-tables exclude each other"
                )
            try:
                landed = LandedRange(start, end)
            except LandedAtError as exc:
                raise OptionsError(str(exc)) from None
        tables = tuple(values.get("tables") or ())
        max_files = values.get("max_files")
        if (landed is not None or rebuild) and (tables or max_files is not None):
            raise OptionsError("--tables and --max-files do not apply to a replay or rebuild")
        return cls(
            tables=tables,
            dry_run=bool(values.get("dry_run")),
            max_files=max_files,
            run_id=values.get("run_id"),
            landed=landed,
            rebuild_tables=rebuild,
        )


def forces_run(params: Mapping[str, Any]) -> list[str]:
    """The options set in ``params`` that give a run work even when nothing new landed."""
    return [o.name for o in RUN_OPTIONS if o.forces_run and params.get(o.name)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``cdc-ingest run`` flags of :data:`RUN_OPTIONS` (an empty value means not set)."""
    for option in RUN_OPTIONS:
        parse = _PARSERS[option.kind]
        if option.kind == BOOLEAN:
            # --dry-run alone, or --dry-run=false as a template renders it.
            parser.add_argument(
                option.flag, nargs="?", const=True, default=False, type=parse, help=option.help
            )
        else:
            default = () if option.kind == NAMES else None
            parser.add_argument(option.flag, type=parse, default=default, help=option.help)


def parsed_options(args: argparse.Namespace) -> RunOptions:
    """The run options of parsed ``cdc-ingest run`` flags.

    Raises:
        OptionsError: options that do not go together.
    """
    return RunOptions.from_values({o.name: getattr(args, o.name) for o in RUN_OPTIONS})


def _names(text: str) -> tuple[str, ...]:
    return tuple(sorted({n.strip() for n in text.split(",") if n.strip()}))


def _instant(text: str) -> datetime | None:
    if not text.strip():
        return None
    try:
        return parse_instant(text)
    except LandedAtError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(text: str) -> int | None:
    if not text.strip():
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no", ""):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


def _text(text: str) -> str | None:
    return text or None


_PARSERS = {NAMES: _names, BOOLEAN: _boolean, COUNT: _count, INSTANT: _instant, TEXT: _text}
