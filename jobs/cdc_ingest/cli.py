"""``cdc-ingest``: run a pipeline's micro-batch from a shell, spark-submit or Airflow."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from collections.abc import Sequence
from datetime import datetime

from cdc_ingest.config import Config, ConfigError, load_config
from cdc_ingest.landing.landed_time import INSTANT_HELP, LandedAtError, LandedRange, parse_instant
from cdc_ingest.landing.zones import LandingError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc-ingest",
        description="Mirror landed CDC topic dumps into Apache Iceberg tables.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="apply every landed file not applied yet, as one batch")
    run.add_argument("--config", required=True, help="pipelines YAML file")
    run.add_argument("--pipeline", required=True, help="pipeline name")
    run.add_argument(
        "--tables",
        type=_names,
        default=(),
        help="comma-separated target tables to apply (empty: all); the files stay pending for "
        "the other tables, which the next full run applies",
    )
    run.add_argument(
        "--max-files",
        type=_max_files,
        default=None,
        help="plan at most N new files, oldest (first in landing order) first (empty: no cap)",
    )
    run.add_argument(
        "--dry-run",
        nargs="?",
        const=True,
        default=False,
        type=_boolean,
        help="decode and report, write nothing (--dry-run=false is accepted for templating)",
    )
    run.add_argument(
        "--replay-from",
        type=_instant,
        default=None,
        help="replay the applied files that landed at or after this instant (UTC unless it "
        f"names a zone; {INSTANT_HELP}); empty: not set",
    )
    run.add_argument(
        "--replay-to",
        type=_instant,
        default=None,
        help="replay the applied files that landed before this instant; empty: not set",
    )
    run.add_argument(
        "--rebuild-tables",
        type=_names,
        default=(),
        help="comma-separated target tables to drop and rebuild from every applied file "
        "still landed",
    )
    run.add_argument("--json", action="store_true", help="print the summary JSON as last line")
    run.add_argument("--run-id", default=None, help="orchestrator run id kept in _cdc_batches")
    maintain = commands.add_parser(
        "maintain",
        help="compact the pipeline's tables, expire old snapshots, remove orphan files",
    )
    maintain.add_argument("--config", required=True, help="pipelines YAML file")
    maintain.add_argument("--pipeline", required=True, help="pipeline name")
    maintain.add_argument("--json", action="store_true", help="print the summary JSON as last line")
    check = commands.add_parser("check", help="validate a pipelines file and list its pipelines")
    check.add_argument("--config", required=True)
    return parser


def _names(text: str) -> tuple[str, ...]:
    return tuple(sorted({n.strip() for n in text.split(",") if n.strip()}))


def _instant(text: str) -> datetime | None:
    if not text.strip():
        return None
    try:
        return parse_instant(text)
    except LandedAtError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _replay_options(args: argparse.Namespace) -> tuple[LandedRange | None, str | None]:
    """The replay range of the flags, or the one-line reason they do not go together."""
    replaying = args.replay_from is not None or args.replay_to is not None
    if not replaying:
        return None, None
    if args.rebuild_tables:
        return None, "--replay-from/--replay-to and --rebuild-tables exclude each other"
    try:
        return LandedRange(args.replay_from, args.replay_to), None
    except LandedAtError as exc:
        return None, str(exc)


def _max_files(text: str) -> int | None:
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


def _engine_failure(config: Config, pipeline_name: str, exc: Exception) -> int:
    """A failure of the catalog or of Spark as one line, secrets scrubbed; else re-raise.

    The batch is planned before anything is written and every commit is checkpointed, so the
    rerun that follows such a failure resumes the batch; the stack is for a developer, on
    request (``CDC_INGEST_TRACEBACK=1``).
    """
    from cdc_ingest.catalog.properties import scrub, secret_values

    line = _failure_line(exc)
    if line is None:
        raise exc
    if os.environ.get("CDC_INGEST_TRACEBACK"):
        traceback.print_exception(exc, file=sys.stderr)
    secrets = secret_values(config.catalog)
    return _fail(scrub(f"pipeline {pipeline_name}: catalog or engine failure: {line}", secrets))


def _failure_line(exc: BaseException) -> str | None:
    """The first line of a JVM-side failure (py4j, pyspark's captured exceptions), of a catalog
    database's (the namespace lock's SQLAlchemy connection) or of a connection failure; None for
    anything else (a bug, to be seen with its traceback)."""
    from py4j.protocol import Py4JError, Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, Py4JJavaError):
        text = str(exc.java_exception.toString())
    elif isinstance(exc, DBAPIError):
        # The driver's own message, without SQLAlchemy's statement and background link.
        text = f"{type(exc.orig).__name__}: {exc.orig}"
    elif isinstance(exc, (CapturedException, Py4JError, ConnectionError)):
        text = f"{type(exc).__name__}: {exc}"
    else:
        return None
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def _fail(message: str) -> int:
    print(f"cdc-ingest: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    landed: LandedRange | None = None
    if args.command == "run":
        landed, problem = _replay_options(args)
        replaying = landed is not None or bool(args.rebuild_tables)
        if problem is None and replaying and (args.tables or args.max_files is not None):
            problem = "--tables and --max-files do not apply to a replay or rebuild"
        if problem is not None:
            parser.error(problem)
    config_path = args.config or os.environ.get("CDC_INGEST_CONFIG", "")
    try:
        config = load_config(config_path)
        if args.command == "check":
            for p in config.pipelines:
                print(f"{p.name}: format={p.format} landing={p.landing} -> {p.namespace}.{p.table}")
            return EXIT_OK
        pipeline = config.pipeline(args.pipeline)
    except ConfigError as exc:
        return _fail(str(exc))

    from cdc_ingest.landing.zones import list_landed
    from cdc_ingest.run.batch import run_pipeline
    from cdc_ingest.run.modes import ReplayRefused
    from cdc_ingest.run.options import RunOptions, RunRefused
    from cdc_ingest.schema.evolution import SchemaChangeRefused
    from cdc_ingest.spark_session import EnvironmentProblem, build_session
    from cdc_ingest.state.locks import (
        NamespaceLocked,
        PipelineLocked,
        namespace_lock,
        pipeline_lock,
    )

    if args.command == "maintain":
        return _maintain(config, pipeline.name, args.json)
    runs = contextlib.ExitStack()
    try:
        # List before starting Spark so that a wrong landing zone fails in a second, not ten.
        list_landed(pipeline.landing)
        if not args.dry_run:
            # Taken before Spark starts: a run that must wait costs no JVM meanwhile.
            runs.enter_context(
                pipeline_lock(
                    config.catalog,
                    pipeline.namespace,
                    pipeline.name,
                    wait=pipeline.maintenance.lock_wait,
                )
            )
        spark = build_session(config.catalog, app_name=f"cdc-ingest-{pipeline.name}")
        options = RunOptions(
            args.tables,
            args.dry_run,
            args.max_files,
            args.run_id,
            landed,
            args.rebuild_tables,
        )
        # Shared: other ingest runs of the namespace go on; maintenance waits for them all.
        with namespace_lock(
            config.catalog,
            pipeline.namespace,
            exclusive=False,
            wait=pipeline.maintenance.lock_wait,
            purpose="ingest",
        ):
            summary = run_pipeline(spark, config, pipeline.name, options)
    except PipelineLocked as exc:
        return _fail(str(exc))
    except (LandingError, EnvironmentProblem, RunRefused, ReplayRefused, NamespaceLocked) as exc:
        return _fail(f"pipeline {pipeline.name}: {exc}")
    except SchemaChangeRefused as exc:
        return _fail(str(exc))
    except Exception as exc:
        return _engine_failure(config, pipeline.name, exc)
    finally:
        runs.close()
    print(summary.render(), flush=True)
    if args.json:
        print(summary.to_json(), flush=True)
    return EXIT_OK


def _maintain(config: Config, pipeline_name: str, as_json: bool) -> int:
    from cdc_ingest.maintenance import maintain_pipeline
    from cdc_ingest.spark_session import EnvironmentProblem, build_session
    from cdc_ingest.state.locks import NamespaceLocked

    try:
        spark = build_session(config.catalog, app_name=f"cdc-ingest-maintain-{pipeline_name}")
        summary = maintain_pipeline(spark, config, pipeline_name)
    except (EnvironmentProblem, NamespaceLocked) as exc:
        return _fail(f"pipeline {pipeline_name}: {exc}")
    except Exception as exc:
        return _engine_failure(config, pipeline_name, exc)
    print(summary.render(), flush=True)
    if as_json:
        print(summary.to_json(), flush=True)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
