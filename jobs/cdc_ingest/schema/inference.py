"""Column types inferred as Spark's JSON reader infers them, for every table of a batch at once.

A column that neither the table nor the messages type is typed from a sample of its table's row
images. A batch with hundreds of new tables would pay a sample query and a schema inference per
table; instead the first request infers every table of the batch in one Spark job: each sampled
image is wrapped as ``{"g<n>": {"<table>": <image>}}`` (``n`` a hash of the table's name) so that
one JSON schema inference over all the samples types each table's columns in a struct of its own,
from that table's images only. Only a column that first appears past the sampled lines costs a
query of its own table.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_ingest import sql_text
from cdc_ingest.contract import JSON_MAX_STRING_LENGTH, ColumnType
from cdc_ingest.sql_text import literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.formats.base import Decoder

INFERENCE_SAMPLE = 10_000
SAMPLE_COLUMN = "_cdc_sample"


def inferred_type(data_type: T.DataType) -> ColumnType:
    """The column type for a type Spark's JSON inference found."""
    if isinstance(data_type, T.LongType | T.IntegerType):
        return ColumnType("bigint")
    if isinstance(data_type, T.DoubleType | T.FloatType):
        return ColumnType("double")
    if isinstance(data_type, T.BooleanType):
        return ColumnType("boolean")
    if isinstance(data_type, T.DecimalType):
        return ColumnType(f"decimal(38,{data_type.scale})")
    return ColumnType("string")


# The message text of the first lines of each file, kept with the cached batch for inference
# (SQL text). Inference needs the image as JSON (a map of strings no longer tells ``"1"`` from
# ``1``), and re-parsing the batch for it would cost another full decode. The image is cut out of
# the text only when types are inferred, and only for the lines inference takes.
IMAGE_SAMPLE = (
    f"CASE WHEN _cdc_error IS NULL AND _cdc_line <= {INFERENCE_SAMPLE} THEN value END"
    f" AS {SAMPLE_COLUMN}"
)


# NaN and Infinity tokens (JSON's non-numeric numbers, which Spark's JSON reader accepts) as a
# number that get_json_object, which refuses them, can read: inference only needs the type.
_NON_NUMERIC_TOKEN = r"([:\[,]\s*)(?:NaN|[+-]?Infinity|[+-]INF)(?=\s*[,}\]])"


_ARRAY_BRACKETS = literal(r"^\[|\]$")


def _with_image(frame: DataFrame, text: str, decoder: Decoder, keep: list[str]) -> DataFrame:
    """``keep`` and ``image``: the row image's JSON in the message text ``text`` (SQL text), or
    null.

    The image's paths are read in one parse of the message, as the text of the string fields of
    a struct (``_paths_struct``): Spark's JSON parser copies a field declared a string that holds
    an object as its JSON text, as ``get_json_object`` does. ``get_json_object`` parses the
    message once per path tried, and runs interpreted: a Debezium message without a ``payload``
    was parsed twice for its after image, four times for a delete's before image.
    """
    # The regular expression only for a text that can hold such a token: a substring test costs a
    # fraction of a regular expression's scan of every sampled message.
    tokens = " OR ".join(f"contains({text}, {literal(t)})" for t in ("NaN", "Inf", "INF"))
    rewritten = f"regexp_replace({text}, {literal(_NON_NUMERIC_TOKEN)}, '$10.0')"
    readable = f"CASE WHEN {tokens} THEN {rewritten} ELSE {text} END"
    read = _paths_struct(decoder.image_json_paths)
    if read is None:
        paths = [f"get_json_object({readable}, {literal(p)})" for p in decoder.image_json_paths]
        return sql_text.select(frame, [*keep, f"coalesce({', '.join(paths)}) AS image"])
    schema, accessors = read
    parsed = sql_text.select(
        frame, [*keep, f"from_json({readable}, {literal(schema)}, {LIMITS}) AS _paths"]
    )
    return sql_text.select(parsed, [*keep, f"coalesce({', '.join(accessors)}) AS image"])


LIMITS = f"map('maxStringLen', '{JSON_MAX_STRING_LENGTH}')"
_JSON_PATH = re.compile(r"\$((?:\.[A-Za-z_][A-Za-z0-9_]*)+)(\[0\])?")


def _paths_struct(paths: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """The ``from_json`` schema that reads each of ``paths`` (``$.a.b``, or ``$.a[0]`` for an
    array's first element) as JSON text, and each path's accessor on the parsed ``_paths``; None
    when a path is of another shape (``$`` itself) or one path leads into another."""
    tree: dict[str, Any] = {}
    accessors: list[str] = []
    for path in paths:
        matched = _JSON_PATH.fullmatch(path)
        if matched is None:
            return None
        names = matched.group(1)[1:].split(".")
        node = tree
        for name in names[:-1]:
            node = node.setdefault(name, {})
            if not isinstance(node, dict):
                return None
        leaf = "array<string>" if matched.group(2) else "string"
        if node.setdefault(names[-1], leaf) != leaf:
            return None
        accessors.append(
            "_paths."
            + ".".join(sql_text.name(n) for n in names)
            + ("[0]" if matched.group(2) else "")
        )

    def ddl(node: dict[str, Any]) -> str:
        fields = (
            f"{sql_text.name(k)}: {ddl(v) if isinstance(v, dict) else v}" for k, v in node.items()
        )
        return f"struct<{', '.join(fields)}>"

    return ddl(tree), accessors


def _json_schema(spark: SparkSession, lines: DataFrame) -> T.StructType:
    """The schema Spark's JSON reader infers over a one-column frame of JSON texts, in the JVM."""
    from cdc_ingest import spark_jvm

    return spark_jvm.json_schema(spark, lines, JSON_MAX_STRING_LENGTH)


def _types(schema: T.StructType, wanted: set[str]) -> dict[str, ColumnType]:
    """Inferred types of the wanted columns; a name not in the sampled JSON as such is looked up
    without case (with ``column_names: lowercase`` the JSON keeps the source's spelling)."""
    exact = {f.name: f.dataType for f in schema.fields}
    folded: dict[str, T.DataType] = {}
    for f in schema.fields:
        folded.setdefault(f.name.lower(), f.dataType)
    found = {w: exact.get(w, folded.get(w.lower())) for w in wanted}
    return {w: inferred_type(t) for w, t in found.items() if t is not None}


class TypeInference:
    """Types inferred for the columns of a batch's tables; the batch-wide job runs on first use.

    Args:
        spark: the session.
        batch: the cached batch, with ``IMAGE_SAMPLE``'s column.
        records: the decoded batch, re-parsed only for columns that first appear past the lines
            the cached sample covers.
        decoder: the batch's format.
        sampled: the images ``IMAGE_SAMPLE`` keeps, per table and file (counted by the batch's
            first pass, ``changes.inventory``).
    """

    def __init__(
        self,
        spark: SparkSession,
        batch: DataFrame,
        records: DataFrame,
        decoder: Decoder,
        sampled: dict[str, dict[int, int]],
    ) -> None:
        self.spark, self.batch, self.records, self.decoder = spark, batch, records, decoder
        self.sampled = sampled
        self._sampled: dict[str, T.StructType] | None = None

    def types(self, target: str, wanted: set[str]) -> dict[str, ColumnType]:
        """Inferred types of the ``wanted`` columns of ``target`` (those its images carry)."""
        if self._sampled is None:
            self._sampled = self._infer_all()
        types = _types(self._sampled.get(target, T.StructType()), wanted)
        missing = sorted(wanted - set(types))
        if missing:
            types |= self._late(target, missing)
        return types

    def _infer_all(self) -> dict[str, T.StructType]:
        """Each table's image schema, from its first sampled images (at least ``INFERENCE_SAMPLE``).

        A window numbering each table's images would sort every sampled line of the batch (up to
        ``INFERENCE_SAMPLE`` per file); instead the first pass's count per table and file picks,
        per table, the first files (in batch order) that hold enough of its images, and all of
        their sampled images are taken: the same deterministic choice for every run of the batch,
        at most one file's share more than the sample size, and no sort.
        """
        ok = f"_cdc_error IS NULL AND {SAMPLE_COLUMN} IS NOT NULL"
        candidates = self.batch.where(f"{ok} AND _cdc_target IS NOT NULL")
        per_table = self.sampled
        whole: list[str] = []  # tables with fewer sampled images than the sample size
        partial: list[str] = []
        for table, files in sorted(per_table.items()):
            taken = 0
            for file_idx, n in sorted(files.items()):
                taken += n
                if taken >= INFERENCE_SAMPLE:
                    partial.append(
                        f"(_cdc_target = {literal(table)} AND _cdc_file_idx <= {file_idx})"
                    )
                    break
            else:
                whole.append(table)
        if not per_table:
            return {}
        picked = " OR ".join(
            [
                f"_cdc_target IN ({', '.join(literal(t) for t in whole)})" if whole else "false",
                *partial,
            ]
        )
        sample = _with_image(candidates.where(picked), SAMPLE_COLUMN, self.decoder, ["_cdc_target"])
        # The table's name as a JSON string, quotes and backslashes escaped: ["name"] unwrapped.
        name = f"regexp_replace(to_json(array(_cdc_target)), {_ARRAY_BRACKETS}, '')"
        # Spark's inference merges each text's type into the types found so far, field by field:
        # with the tables at the top, every image paid a walk of every table's name, most of the
        # inference's cost over hundreds of tables. In about sqrt(tables) groups,
        # it walks the groups' names and its own group's tables.
        groups = math.isqrt(len(per_table)) or 1
        group = f"concat('\"g', pmod(hash(_cdc_target), {groups}), '\":')"
        # An image that is not an object becomes an empty one, which types nothing. Filtered out
        # instead, its test was pushed below this projection, so every image was cut out of its
        # message twice (get_json_object runs interpreted, most of the inference's cost).
        wrapped = sql_text.select(
            sample,
            [
                f"CASE WHEN startswith(image, '{{')"
                f" THEN concat('{{', {group}, '{{', {name}, ':', image, '}}}}')"
                " ELSE '{}' END AS value"
            ],
        )
        schema = _json_schema(self.spark, wrapped)
        return {
            table.name: table.dataType
            for grouped in schema.fields
            if isinstance(grouped.dataType, T.StructType)
            for table in grouped.dataType.fields
            if isinstance(table.dataType, T.StructType)
        }

    def _late(self, target: str, missing: list[str]) -> dict[str, ColumnType]:
        """Types of columns no sampled image of the table carries, from the images that do."""
        mine = (F.col("_cdc_target") == target) & F.col("_cdc_error").isNull()
        late = F.exists(F.map_keys("image"), lambda c: c.isin(*missing))
        if not self.batch.where(mine & late).limit(1).count():
            return {}
        texts = (
            _with_image(self.records.where(mine & late), "value", self.decoder, [])
            .where(F.col("image").isNotNull())
            .select(F.col("image").alias("value"))
            .limit(INFERENCE_SAMPLE)
        )
        return _types(_json_schema(self.spark, texts), set(missing))
