"""pyspark's private handles are touched in one module of the job, ``cdc_ingest.spark_jvm``: a
Spark line that renames one is met there (docs/development.md, "Two Spark lines")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWNER = ROOT / "jobs" / "cdc_ingest" / "spark_jvm.py"
# pyspark's private attributes and methods that reach the JVM or its wire format.
PRIVATE = {
    "_jvm",
    "_jdf",
    "_jsparkSession",
    "_jsc",
    "_jconf",
    "_jcol",
    "_jwrite",
    "_jreader",
    "_jseq",
    "_gateway",
    "_sc",
    "_serialize_to_jvm",
    "_collect_as_arrow",
    "_parse_datatype_json_string",
    "_active_spark_context",
}


def private_uses(source: str) -> list[tuple[int, str]]:
    """Each ``x.<private>`` and ``getattr(x, "<private>")`` of ``source``, with its line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
            found.append((node.lineno, node.attr))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in PRIVATE
        ):
            found.append((node.lineno, node.args[1].value))
    return found


def test_only_spark_jvm_touches_pysparks_private_handles():
    sources = [p for d in ("jobs", "plugins", "dags") for p in (ROOT / d).rglob("*.py")]
    assert OWNER in sources
    outside = {
        f"{path.relative_to(ROOT)}:{line} {name}"
        for path in sources
        if path != OWNER
        for line, name in private_uses(path.read_text())
    }
    assert outside == set()
    assert {name for _, name in private_uses(OWNER.read_text())} >= {"_jvm", "_jdf", "_gateway"}


def test_the_check_finds_attributes_and_getattr_by_name():
    source = "a = spark.sparkContext._jvm\nb = getattr(ctx, '_gateway', None)\nc = frame.columns\n"
    assert private_uses(source) == [(1, "_jvm"), (2, "_gateway")]
