"""Whether a run has anything to do, told without Spark: the checkpoint read with pyiceberg.

A run with nothing new to apply then answers in a second instead of starting a JVM (what
``check_landing`` does for the DAGs). Whenever this cannot tell for sure (the catalog cannot be
read this way, an applied file changed size, a replay or rebuild is asked for), the run goes on and
Spark decides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc_ingest.state.lake import (
    CatalogMissing,
    checkpoint_state,
    open_catalog,
    pending_work,
    pipeline_rows,
)
from cdc_ingest.state.tables import CHECKPOINTS

if TYPE_CHECKING:
    from cdc_ingest.config import Config, PipelineConfig
    from cdc_ingest.landing.zones import LandedFile
    from cdc_ingest.run.options import RunOptions


def nothing_to_do(
    config: Config, pipeline: PipelineConfig, options: RunOptions, listing: list[LandedFile]
) -> bool:
    """True only when the checkpoint says every landed file is applied and no batch is pending."""
    return pending_bytes(config, pipeline, options, listing) == 0


def pending_bytes(
    config: Config, pipeline: PipelineConfig, options: RunOptions, listing: list[LandedFile]
) -> int | None:
    """The bytes of the landed files the checkpoint says no batch applied: 0 when there is
    nothing to do, None when this cannot tell (a replay, a rebuild, a batch to resume, an
    unreadable catalog, an applied file that changed): the run goes on and Spark decides."""
    if options.landed is not None or options.rebuild_tables:
        return None
    try:
        catalog = open_catalog(config.catalog)
        rows = pipeline_rows(
            catalog,
            pipeline.namespace,
            CHECKPOINTS,
            pipeline.name,
            ("batch_id", "status", "file", "size"),
        )
    except CatalogMissing:
        return sum(max(1, f.size) for f in listing)
    except Exception:
        return None
    state = checkpoint_state(rows or [])
    # Growth of an applied file is reported by a run: let Spark see it.
    for landed in listing:
        applied = state.applied.get(landed.uri)
        if applied is not None and applied[2] not in (None, landed.size):
            return None
    work = pending_work([f.uri for f in listing], state)
    if work.resumes_batch is not None:
        return None
    waiting = set(work.files)
    # An empty landed file is still work (the run records it): never 0 while any waits.
    return sum(max(1, f.size) for f in listing if f.uri in waiting)
