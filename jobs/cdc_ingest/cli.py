"""``cdc-ingest``: run a pipeline's micro-batch from a shell, spark-submit or Airflow."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_ingest.config import Config, ConfigError, PipelineConfig, load_config
from cdc_ingest.landing.zones import LandingError
from cdc_ingest.run.options import OptionsError, RunOptions, add_arguments, parsed_options
from cdc_ingest.run_environment import environ
from cdc_ingest.state.summary import RunSummary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.catalog.config import CatalogConfig
    from cdc_ingest.lineage import LineageConfig
    from cdc_ingest.maintenance import MaintenanceSummary

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
COLD_HELP = "start Spark in this process even if a warm engine answers"
# Where a run's Spark session comes from: a cold run builds its own; a warm engine hands out one
# of its sessions (cdc_ingest.engine.server).
# The last argument: the planned batch's bytes (None: not known), which a cold driver's JIT
# settings depend on (spark_session.sized_for_batch).
SessionFactory = Callable[
    ["CatalogConfig", str, "LineageConfig | None", "int | None"], "SparkSession"
]


def cold_session(
    catalog: CatalogConfig, app_name: str, lineage: LineageConfig | None, planned: int | None
) -> SparkSession:
    from cdc_ingest.spark_session import build_session

    return build_session(catalog, app_name=app_name, lineage=lineage, planned_bytes=planned)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc-ingest",
        description="Mirror landed CDC topic dumps into Apache Iceberg tables.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="apply every landed file not applied yet, as one batch")
    run.add_argument("--config", required=True, help="pipelines YAML file")
    run.add_argument("--pipeline", required=True, help="pipeline name")
    add_arguments(run)
    run.add_argument("--json", action="store_true", help="print the summary JSON as last line")
    run.add_argument("--cold", action="store_true", help=COLD_HELP)
    maintain = commands.add_parser(
        "maintain",
        help="compact the pipeline's tables, expire old snapshots, remove orphan files",
    )
    maintain.add_argument("--config", required=True, help="pipelines YAML file")
    maintain.add_argument("--pipeline", required=True, help="pipeline name")
    maintain.add_argument("--json", action="store_true", help="print the summary JSON as last line")
    maintain.add_argument(
        "--due",
        action="store_true",
        help="only the tables maintenance.triggers make due (compaction and snapshot expiry)",
    )
    maintain.add_argument("--cold", action="store_true", help=COLD_HELP)
    engine = commands.add_parser(
        "engine", help="start, inspect or stop the warm engine that runs batches (docs/engine.md)"
    )
    actions = engine.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="start an engine in the background, or find it")
    start.add_argument("--config", help="pipelines YAML file whose Spark settings it takes")
    start.add_argument(
        "--parallel", type=int, default=2, help="batches it runs at once (default 2)"
    )
    start.add_argument(
        "--master",
        help="Spark master (default: SPARK_MASTER, else local[*]); spark://... runs "
        "its executors on a standalone cluster",
    )
    serve = actions.add_parser(
        "serve", help="run an engine in the foreground (what start runs; for a service manager)"
    )
    serve.add_argument("--dir", help="its directory (default: CDC_INGEST_ENGINE_DIR)")
    serve.add_argument("--config")
    serve.add_argument("--parallel", type=int, default=2)
    serve.add_argument("--master")
    actions.add_parser("status", help="whether an engine runs, and what it has done")
    actions.add_parser("stop", help="stop the engine once its running batches are done")
    check = commands.add_parser("check", help="validate a pipelines file and list its pipelines")
    check.add_argument("--config", help="the pipelines file (else CDC_INGEST_CONFIG)")
    check.add_argument(
        "--schema", action="store_true", help="print the pipelines file's JSON Schema instead"
    )
    setup = commands.add_parser(
        "setup", help="put the job's JVM artifacts and class archive in place (after pip install)"
    )
    setup.add_argument(
        "--jars-dir", type=Path, help="copy the artifacts from this directory, not from Maven"
    )
    setup.add_argument(
        "--check", action="store_true", help="say what is missing (exit 1 if anything is)"
    )
    setup.add_argument(
        "--no-class-archive", action="store_true", help="do not write the driver's class archive"
    )
    return parser


def _setup(args: argparse.Namespace) -> int:
    """``cdc-ingest setup``: see :mod:`cdc_ingest.jvm_setup`."""
    from cdc_ingest.jars import EnvironmentProblem
    from cdc_ingest.jvm_setup import problems, setup

    if args.check:
        try:
            found = problems()
        except EnvironmentProblem as exc:
            return _fail(str(exc))
        for line in found or ["every JVM artifact and the class archive are in place"]:
            print(line)
        return 1 if found else EXIT_OK
    try:
        for line in setup(args.jars_dir, class_archive=not args.no_class_archive):
            print(line)
    except EnvironmentProblem as exc:
        return _fail(str(exc))
    return EXIT_OK


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
    if environ().get("CDC_INGEST_TRACEBACK"):
        traceback.print_exception(exc, file=sys.stderr)
    secrets = secret_values(config.catalog)
    return _fail(scrub(f"pipeline {pipeline_name}: catalog or engine failure: {line}", secrets))


def _failure_line(exc: BaseException) -> str | None:
    """The first line of a JVM-side failure (py4j, pyspark's captured exceptions), of a catalog
    database's (the namespace lock's SQLAlchemy connection), of pyiceberg's appends or of a
    connection failure, or a driver JVM that exited as it started (its own words are above it,
    where it wrote them); None for anything else (a bug, to be seen with its traceback)."""
    from py4j.protocol import Py4JError, Py4JJavaError
    from pyspark.errors import PySparkRuntimeError
    from pyspark.errors.exceptions.captured import CapturedException
    from sqlalchemy.exc import DBAPIError

    from cdc_ingest.state.warehouse_errors import WarehouseWriteError

    if isinstance(exc, Py4JJavaError):
        text = str(exc.java_exception.toString())
    elif isinstance(exc, DBAPIError):
        # The driver's own message, without SQLAlchemy's statement and background link.
        text = f"{type(exc.orig).__name__}: {exc.orig}"
    elif isinstance(exc, WarehouseWriteError):
        text = str(exc)
    elif isinstance(exc, (CapturedException, Py4JError, ConnectionError)):
        text = f"{type(exc).__name__}: {exc}"
    elif isinstance(exc, PySparkRuntimeError) and exc.getErrorClass() == "JAVA_GATEWAY_EXITED":
        text = "the Spark driver's JVM exited as it started (its own message is above)"
    else:
        return None
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def _fail(message: str) -> int:
    print(f"cdc-ingest: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code.

    ``run`` and ``maintain`` go to the warm engine where one answers (unless ``--cold`` or
    ``CDC_INGEST_ENGINE=off``), else run in this process.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    args = parser.parse_args(arguments)
    if args.command == "engine" and args.action == "serve":
        from cdc_ingest.engine.place import engine_place
        from cdc_ingest.engine.server import run_engine

        directory = args.dir or str(engine_place().directory)
        return run_engine(directory, args.parallel, args.config, args.master, execute_argv)
    if args.command == "check" and args.schema:
        from cdc_ingest.config import file_schema

        print(json.dumps(file_schema(), indent=2))
        return EXIT_OK
    if args.command == "setup":
        return _setup(args)
    if args.command == "engine":
        from cdc_ingest.engine.client import engine_command

        return engine_command(args)
    if args.command in ("run", "maintain") and not args.cold:
        from cdc_ingest.engine.client import run_on_engine

        status = run_on_engine(arguments)
        if status is not None:
            return status
    return execute(parser, args, cold_session)


def execute_argv(argv: list[str], cwd: str, sessions: SessionFactory) -> int:
    """Run ``cdc-ingest <argv>`` (``run`` or ``maintain``) in this process, relative paths from
    ``cwd``: what the warm engine does with each request."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, "config", None):
            args.config = os.path.join(cwd, args.config)
        return execute(parser, args, sessions)
    except SystemExit as exc:  # argparse's usage errors, as a cold run exits with them
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE


def execute(
    parser: argparse.ArgumentParser, args: argparse.Namespace, sessions: SessionFactory
) -> int:
    """Run the parsed command in this process, its Spark session from ``sessions``."""
    started = datetime.now(UTC)
    options = RunOptions()
    if args.command == "run":
        try:
            options = parsed_options(args)
        except OptionsError as exc:
            parser.error(str(exc))
    config_path = args.config or environ().get("CDC_INGEST_CONFIG", "")
    try:
        config = load_config(config_path)
        if args.command == "check":
            for p in config.pipelines:
                print(f"{p.name}: format={p.format} landing={p.landing} -> {p.namespace}.{p.table}")
            return EXIT_OK
        pipeline = config.pipeline(args.pipeline)
    except ConfigError as exc:
        return _fail(str(exc))
    from cdc_ingest.jars import EnvironmentProblem, spark_line

    try:
        spark_line()  # before anything imports pyspark: another line is refused, not half-run
    except EnvironmentProblem as exc:
        return _fail(f"pipeline {pipeline.name}: {exc}")

    if args.command == "maintain":
        return _maintain(config, pipeline.name, args.json, sessions, args.due)
    return _run(config, pipeline, options, sessions, started, args.json)


def _nothing_new(pipeline: PipelineConfig, options: RunOptions, started: datetime) -> RunSummary:
    """The summary of a run that found nothing to apply, made without starting Spark."""
    return RunSummary(
        pipeline=pipeline.name,
        dry_run=options.dry_run,
        only_tables=sorted(set(options.tables)),
        max_files=options.max_files,
        started_at=started.isoformat(),
        finished_at=datetime.now(UTC).isoformat(),
    )


def _run(
    config: Config,
    pipeline: PipelineConfig,
    options: RunOptions,
    sessions: SessionFactory,
    started: datetime,
    as_json: bool,
) -> int:
    """Apply the pipeline's pending files as one batch, under its locks; print its summary, or
    fail in one line."""
    from cdc_ingest.jars import EnvironmentProblem
    from cdc_ingest.landing.zones import list_landed
    from cdc_ingest.run.batch import DriverOutOfMemory, run_pipeline
    from cdc_ingest.run.options import RunRefused
    from cdc_ingest.run.pending import pending_bytes
    from cdc_ingest.run.replays import ReplayRefused
    from cdc_ingest.schema.evolution import SchemaChangeRefused
    from cdc_ingest.state.locks import (
        NamespaceLocked,
        PipelineLocked,
        namespace_lock,
        pipeline_lock,
    )

    runs = contextlib.ExitStack()
    try:
        # List before starting Spark so that a wrong landing zone fails in a second, not ten.
        listing = list_landed(pipeline.landing, file_format=pipeline.file_format)
        planned = pending_bytes(config, pipeline, options, listing)
        if planned == 0:
            return _print_summary(_nothing_new(pipeline, options, started), as_json)
        if not options.dry_run:
            # Taken before Spark starts: a run that must wait costs no JVM meanwhile.
            runs.enter_context(
                pipeline_lock(
                    config.catalog,
                    pipeline.namespace,
                    pipeline.name,
                    wait=pipeline.maintenance.lock_wait,
                )
            )
        spark = sessions(config.catalog, f"cdc-ingest-{pipeline.name}", config.lineage, planned)
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
    except (
        LandingError,
        EnvironmentProblem,
        RunRefused,
        ReplayRefused,
        NamespaceLocked,
        DriverOutOfMemory,
    ) as exc:
        return _fail(f"pipeline {pipeline.name}: {exc}")
    except SchemaChangeRefused as exc:
        return _fail(str(exc))
    except Exception as exc:
        return _engine_failure(config, pipeline.name, exc)
    finally:
        runs.close()
    return _print_summary(summary, as_json)


def _print_summary(summary: RunSummary | MaintenanceSummary, as_json: bool) -> int:
    print(summary.render(), flush=True)
    if as_json:
        print(summary.to_json(), flush=True)
    return EXIT_OK


def _maintain(
    config: Config, pipeline_name: str, as_json: bool, sessions: SessionFactory, due_only: bool
) -> int:
    from cdc_ingest.maintenance import maintain_pipeline
    from cdc_ingest.spark_session import EnvironmentProblem
    from cdc_ingest.state.locks import NamespaceLocked

    try:
        spark = sessions(config.catalog, f"cdc-ingest-maintain-{pipeline_name}", None, None)
        summary = maintain_pipeline(spark, config, pipeline_name, due_only=due_only)
    except (EnvironmentProblem, NamespaceLocked) as exc:
        return _fail(f"pipeline {pipeline_name}: {exc}")
    except Exception as exc:
        return _engine_failure(config, pipeline_name, exc)
    return _print_summary(summary, as_json)


if __name__ == "__main__":
    sys.exit(main())
