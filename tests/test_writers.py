"""The batch's tables are written through one interface (``writers.protocol.TableWriter``): its
two writers answer every call of it alike, and no module outside ``writers/`` and
``snapshots/`` knows pyiceberg's catalog view is there (docs/development.md, "Adding a
writer")."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from cdc_ingest.writers.protocol import TableWriter
from cdc_ingest.writers.pyiceberg_writer import PyicebergWriter
from cdc_ingest.writers.spark_writer import SparkWriter

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "jobs" / "cdc_ingest"
# Where pyiceberg's catalog view lives, and the writer that holds it.
ROOMS = (JOB / "snapshots", JOB / "writers")


def _members(cls: type) -> dict[str, inspect.Signature | None]:
    """The public methods (with their signatures) and properties a class defines."""
    found: dict[str, inspect.Signature | None] = {}
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property) or not callable(value):
            found[name] = None
        else:
            found[name] = inspect.signature(value)
    return found


@pytest.mark.parametrize("writer", [SparkWriter, PyicebergWriter])
def test_each_writer_answers_every_call_of_the_protocol_as_it_is_declared(writer):
    declared = _members(TableWriter)
    assert {"appends_collected", "rewrites_small", "create_keyed", "replace_rows"} <= set(declared)
    given = _members(writer)
    assert set(declared) <= set(given)
    for name, signature in declared.items():
        answer = given[name]
        if signature is None or answer is None:
            assert signature is answer is None, name  # a flag on both, or a method on both
            continue
        assert list(answer.parameters) == list(signature.parameters), name
        defaults = {p.name: p.default for p in signature.parameters.values()}
        assert {p.name: p.default for p in answer.parameters.values()} == defaults, name


def _names_arrow_catalog(path: Path) -> list[int]:
    """The lines of ``path`` that name ``ArrowCatalog`` or ``arrow_catalog`` (imports included)."""
    names = ("ArrowCatalog", "arrow_catalog")
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name) and node.id in names:
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom):
            imported = [(node.module or "").rsplit(".", 1)[-1], *(a.name for a in node.names)]
            if set(imported) & set(names):
                lines.append(node.lineno)
    return lines


def test_no_module_outside_the_writers_knows_pyicebergs_catalog_view():
    sources = [p for d in ("jobs", "plugins", "dags") for p in (ROOT / d).rglob("*.py")]
    outside = {
        f"{path.relative_to(ROOT)}:{line}"
        for path in sources
        if not any(room in path.parents for room in ROOMS)
        for line in _names_arrow_catalog(path)
    }
    assert outside == set()
    assert _names_arrow_catalog(JOB / "writers" / "routing.py")
