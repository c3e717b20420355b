"""What every stage of one run reads: the pipeline, the session, the lake's state, the mode."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.config import Config, PipelineConfig
    from cdc_ingest.formats.base import Decoder
    from cdc_ingest.landing.zones import LandedFile
    from cdc_ingest.run.options import RunOptions
    from cdc_ingest.state.arrow_catalog import ArrowCatalog
    from cdc_ingest.state.checkpoints import CheckpointStore
    from cdc_ingest.state.lake import CheckpointState


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
        arrow: pyiceberg's view of the catalog, for the small writes it makes without a Spark
            job (``state/arrow_catalog``); open for the run.
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
    arrow: ArrowCatalog

    @property
    def catalog(self) -> str:
        """The catalog's name in the session."""
        return self.config.catalog.name

    @property
    def namespace(self) -> str:
        """The pipeline's namespace."""
        return self.pipeline.namespace
