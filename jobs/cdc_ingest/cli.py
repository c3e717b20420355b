"""``cdc-ingest``: run a pipeline's micro-batch from a shell, spark-submit or Airflow."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from cdc_ingest.config import ConfigError, load_config
from cdc_ingest.landing import LandingError

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
    check = commands.add_parser("check", help="validate a pipelines file and list its pipelines")
    check.add_argument("--config", required=True)
    return parser


def _fail(message: str) -> int:
    print(f"cdc-ingest: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = _parser().parse_args(argv)
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

    from cdc_ingest.job import run_pipeline
    from cdc_ingest.landing import list_landed
    from cdc_ingest.schema_evolution import SchemaChangeRefused
    from cdc_ingest.spark_session import EnvironmentProblem, build_session

    try:
        # List before starting Spark so that a wrong landing zone fails in a second, not ten.
        list_landed(pipeline.landing)
        spark = build_session(config.catalog, app_name=f"cdc-ingest-{pipeline.name}")
        summary = run_pipeline(spark, config, pipeline.name)
    except (LandingError, EnvironmentProblem) as exc:
        return _fail(f"pipeline {pipeline.name}: {exc}")
    except SchemaChangeRefused as exc:
        return _fail(str(exc))
    print(summary.render(), flush=True)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
