"""Which pipeline a mirror belongs to: the one that created it decides its design, and only a
format whose ordering values compare with its format's may change its rows.

Two pipelines may write one table (a source moved from one landing zone to another). Stored
orders are lists of the format's own fields, so a Canal order ``[es, ...]`` and a Debezium order
``[snapshot, ts_ms, ...]`` never compare: a table is refused to a format of another order
family. And two pipelines' ``table_options`` for one table would turn its design back and forth
on every run: the table follows the options of the pipeline that created it while that pipeline
is in the pipelines file; otherwise the pipeline that writes it takes it over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cdc_ingest.formats import order_family
from cdc_ingest.table_options import PipelineTableOptions, TableDesignError, TableOptions

PIPELINE_PROPERTY = "cdc.pipeline"
FORMAT_PROPERTY = "cdc.format"


class OrdersDoNotCompare(TableDesignError):
    """A table holds rows of a format whose ordering values do not compare with this one's."""


@dataclass(frozen=True)
class TableOwner:
    """The pipeline writing a batch's tables, and the ``table_options`` of every pipeline of its
    pipelines file that shares its namespace (by pipeline name)."""

    pipeline: str
    format: str
    designs: Mapping[str, PipelineTableOptions] = field(default_factory=dict)

    def created_properties(self) -> dict[str, str]:
        """What a table this pipeline creates records of it."""
        return {PIPELINE_PROPERTY: self.pipeline, FORMAT_PROPERTY: self.format}

    def check(self, name: str, properties: Mapping[str, str]) -> None:
        """Refuse a table whose rows another order family wrote.

        Raises:
            OrdersDoNotCompare: naming the pipeline and format that wrote it.
        """
        stored = properties.get(FORMAT_PROPERTY)
        if stored is None or order_family(stored) == order_family(self.format):
            return
        owner = properties.get(PIPELINE_PROPERTY, "?")
        raise OrdersDoNotCompare(
            f"holds rows of pipeline {owner} (format {stored}), whose ordering values do not "
            f"compare with format {self.format}'s: mirror this source into another table, or "
            "rebuild the table from this pipeline's files (docs/semantics.md, one table, two "
            "pipelines)"
        )

    def owner(self, properties: Mapping[str, str]) -> str | None:
        """The other pipeline of the file whose design the table follows, or None."""
        owner = properties.get(PIPELINE_PROPERTY)
        return owner if owner != self.pipeline and owner in self.designs else None

    def options(self, name: str, properties: Mapping[str, str], own: TableOptions) -> TableOptions:
        """The options the table is shaped by: its owner's when that is another pipeline."""
        owner = self.owner(properties)
        return own if owner is None else self.designs[owner].for_table(name)

    def claim(self, properties: Mapping[str, str]) -> dict[str, str]:
        """What to record on a table this pipeline writes and no pipeline of the file owns (one
        created before tables recorded it, or whose pipeline left the file); else nothing."""
        if properties.get(PIPELINE_PROPERTY) in self.designs:
            return {}
        return self.created_properties()
