"""How source names become Iceberg names: identifier parts and the pipeline's table template.

Shared by the rows of a batch (Spark expressions) and by names that come from the driver (the table
a DDL statement names), so that both always agree.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from cdc_ingest import sql_text
from cdc_ingest.schema.routes import Route, routed_target

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# Letters and digits of any script are kept (Iceberg and Spark take them in quoted names); every
# other character (dots, slashes, quotes, spaces, punctuation) becomes "_". Names are lower-cased:
# Spark's catalogs compare names without case.
_NOT_NAME = r"[^\p{L}\p{N}_]"


def identifier_part(column: str) -> str:
    """A source name (SQL text) as an Iceberg identifier part: lower case, letters, digits and
    "_" only."""
    return f"lower(regexp_replace(coalesce({column}, ''), {sql_text.literal(_NOT_NAME)}, '_'))"


# Names the job keeps for itself: its tables (``_cdc_checkpoints``...) and the columns it adds to
# every mirror (``_cdc_order``...). A source table or column named so is never written.
RESERVED_PREFIX = "_cdc_"
RESERVED_RULE = f"names beginning with {RESERVED_PREFIX} are the job's own"


def is_reserved(name: str) -> bool:
    """Whether a table or column name is one the job keeps for itself (compared without case)."""
    return name.lower().startswith(RESERVED_PREFIX)


# A table's name is a directory of its location: one path segment, at most 255 bytes on common
# filesystems (and the JDBC catalog's name column holds 255 characters).
MAX_TABLE_NAME_BYTES = 255

# Template fields named after another source's terms: Aerospike's namespace and set.
FIELD_ALIASES = {"namespace": "db", "set": "table"}


def target_name(template: str) -> str:
    """The template ``{db}_{table}``-style rendered per row from the source names (SQL text)."""
    parts: list[str] = []
    for text, placeholder in re.findall(r"([^{]*)(?:{([^}]*)})?", template):
        if text:
            # Sanitized here once; every placeholder is already an identifier part.
            parts.append(sql_text.literal(re.sub(r"[^a-z0-9_]", "_", text.lower())))
        if placeholder:
            field = FIELD_ALIASES.get(placeholder, placeholder)
            parts.append(identifier_part(sql_text.name(f"src_{field}")))
    return f"concat({', '.join(parts)})" if parts else "''"


def render_targets(
    spark: SparkSession,
    template: str,
    sources: list[tuple[str | None, str | None, str | None]],
    routes: tuple[Route, ...] = (),
) -> list[tuple[str, int | None]]:
    """The target table of (db, schema, table) triples, by the same Spark expression as rows get
    it (the first matching route's, else :func:`target_name`), and which route took it.

    For names that come from the driver (the table a DDL statement names): one tiny query keeps
    them exactly the names the batch's rows get.
    """
    if not sources:
        return []
    frame = spark.createDataFrame(sources, "src_db string, src_schema string, src_table string")
    cases = " ".join(f"WHEN {r.matched} THEN {i}" for i, r in enumerate(routes))
    route = f"CASE {cases} END" if routes else "CAST(NULL AS INT)"
    rows = sql_text.select(frame, [routed_target(target_name(template), routes), route]).collect()
    return [(r[0], r[1]) for r in rows]
