"""What every stage of one run reads (the pipeline, the session, the lake's state), and
:func:`open_run`, which finds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdc_ingest.apply.write_policy import WritePolicy
from cdc_ingest.formats import load_decoder
from cdc_ingest.landing.zones import list_landed
from cdc_ingest.schema.routes import routed_columns
from cdc_ingest.spark_session import configure_catalog
from cdc_ingest.state.checkpoints import CheckpointStore
from cdc_ingest.state.lake import CheckpointState
from cdc_ingest.state.order_migration import migrate_system_tables
from cdc_ingest.state.tables import CHECKPOINTS, ensure_system_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.config import Config, PipelineConfig
    from cdc_ingest.formats.base import Decoder
    from cdc_ingest.landing.zones import LandedFile
    from cdc_ingest.run.options import RunOptions
    from cdc_ingest.writers.protocol import TableWriter


@dataclass
class RunContext:
    """One run of one pipeline, as its first step found things.

    Attributes:
        spark: the session.
        config: the pipelines file.
        pipeline: the pipeline being run.
        decoder: the pipeline's format.
        options: what the run was asked to do.
        listing: the landing zone's files when the run started, in landing order.
        existing: the namespace's tables; stages add the tables they create.
        store: the pipeline's checkpoint rows.
        state: what the checkpoint held when the run started.
        writer: what writes the run's tables (``writers``); open for the run.
        not_files: entries named like landed files that are no files, with what each is.
        writes: what chooses each table's write route (``apply/write_policy``).
    """

    spark: SparkSession
    config: Config
    pipeline: PipelineConfig
    decoder: Decoder
    options: RunOptions
    listing: list[LandedFile]
    existing: set[str]
    store: CheckpointStore
    state: CheckpointState
    writer: TableWriter
    not_files: dict[str, str] = field(default_factory=dict)
    writes: WritePolicy = field(default_factory=WritePolicy)

    @property
    def catalog(self) -> str:
        """The catalog's name in the session."""
        return self.config.catalog.name

    @property
    def namespace(self) -> str:
        """The pipeline's namespace."""
        return self.pipeline.namespace


def open_run(
    spark: SparkSession,
    config: Config,
    pipeline_name: str,
    options: RunOptions,
    writer: TableWriter,
    writes: WritePolicy | None = None,
) -> RunContext:
    """The pipeline, its landing zone, its namespace's tables and its checkpoint state.

    A run that writes makes sure the namespace's system tables exist; a dry run only looks.
    """
    pipeline = config.pipeline(pipeline_name)
    decoder = load_decoder(
        pipeline.format,
        pipeline.options,
        pipeline.bound_table,
        lowercase_columns=pipeline.column_names == "lowercase",
        routed_columns=routed_columns(pipeline.routes),
    )
    not_files: dict[str, str] = {}
    listing = list_landed(pipeline.landing, file_format=pipeline.file_format, not_files=not_files)
    catalog = config.catalog.name
    configure_catalog(spark, config.catalog)
    if options.dry_run:
        existing = writer.table_names(pipeline.namespace)
    else:
        existing = ensure_system_tables(writer, catalog, pipeline.namespace)
        migrate_system_tables(spark, catalog, pipeline.namespace, existing, writer)
    store = CheckpointStore(spark, catalog, pipeline.namespace, pipeline.name, writer)
    state = store.load() if CHECKPOINTS in existing else CheckpointState()
    return RunContext(
        spark,
        config,
        pipeline,
        decoder,
        options,
        listing,
        existing,
        store,
        state,
        writer,
        not_files,
        writes or WritePolicy(),
    )
