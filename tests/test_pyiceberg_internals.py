"""pyiceberg's private names that ``cdc_ingest.snapshots`` relies on, as the pinned pyiceberg has
them: this fails first when an upgrade renames one or changes its parameters, before any table
is written wrong. The expected parameters are pyiceberg 0.12's, read from its source."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pyiceberg
import pytest
from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.io import pyarrow as pyiceberg_pyarrow
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import ManifestListWriterV2, ManifestWriterV2
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table import Table, Transaction
from pyiceberg.table.update import snapshot

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "jobs" / "cdc_ingest" / "snapshots"

# Each private callable the package calls or overrides, with its parameters.
CALLABLES = {
    "Transaction._append_snapshot_producer": (
        Transaction,
        "_append_snapshot_producer",
        ["self", "snapshot_properties", "branch"],
    ),
    "_MergeAppendFiles.__init__": (
        snapshot,
        "_MergeAppendFiles",
        ["self", "operation", "transaction", "io", "branch", "commit_uuid", "snapshot_properties"],
    ),
    "MetastoreCatalog._create_staged_table": (
        MetastoreCatalog,
        "_create_staged_table",
        ["self", "identifier", "schema", "location", "partition_spec", "sort_order", "properties"],
    ),
    "MetastoreCatalog._update_and_stage_table": (
        MetastoreCatalog,
        "_update_and_stage_table",
        ["self", "current_table", "table_identifier", "requirements", "updates"],
    ),
    "MetastoreCatalog._write_metadata": (
        MetastoreCatalog,
        "_write_metadata",
        ["metadata", "io", "metadata_path"],
    ),
    "SqlCatalog._create_table_row": (
        SqlCatalog,
        "_create_table_row",
        ["self", "namespace", "table_name", "metadata_location"],
    ),
    "Table._do_commit": (Table, "_do_commit", ["self", "updates", "requirements"]),
    "_dataframe_to_data_files": (
        pyiceberg_pyarrow,
        "_dataframe_to_data_files",
        ["table_metadata", "df", "io", "write_uuid", "counter"],
    ),
    "_get_parquet_writer_kwargs": (
        pyiceberg_pyarrow,
        "_get_parquet_writer_kwargs",
        ["table_properties"],
    ),
    "AvroOutputFile._write_header": (AvroOutputFile, "_write_header", ["self"]),
}


def test_the_pinned_pyiceberg_is_the_one_these_names_were_read_from():
    assert pyiceberg.__version__.startswith("0.12."), (
        "pyiceberg changed: check every name in this module against its source, then pin it"
    )


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_each_private_callable_has_the_parameters_the_package_passes(name):
    owner, attribute, parameters = CALLABLES[name]
    found = getattr(owner, attribute)
    if inspect.isclass(found):
        found = found.__init__
    assert list(inspect.signature(found).parameters) == parameters


def test_the_table_metadata_a_transaction_computes_is_a_property():
    """``copy_on_write.transaction_of`` overrides it to compute it once per change."""
    assert isinstance(Transaction.__dict__["table_metadata"], property)


def test_the_sql_catalogs_table_rows_have_the_columns_the_package_writes():
    columns = [c.name for c in IcebergTables.__table__.columns]
    assert columns == [
        "catalog_name",
        "table_namespace",
        "table_name",
        "metadata_location",
        "previous_metadata_location",
        "iceberg_type",
    ]


def test_the_manifest_writers_keep_the_attributes_the_package_reads(tmp_path):
    """``manifest_writers`` builds pyiceberg's Avro writers from their private attributes."""
    io = PyArrowFileIO()
    output = io.new_output(str(tmp_path / "m.avro"))
    manifest = ManifestWriterV2(UNPARTITIONED_PARTITION_SPEC, Schema(), output, 1, "deflate")
    assert manifest._output_file is output and isinstance(manifest._meta, dict)
    listing = ManifestListWriterV2(output, 1, None, 1, "deflate")
    assert listing._output_file is output and isinstance(listing._meta, dict)
    with listing:
        assert isinstance(listing._writer, AvroOutputFile)
        written = vars(listing._writer)
    assert {"output_file", "file_schema", "schema_name", "sync_bytes", "writer", "metadata"} <= set(
        written
    )


def private_names(source: str) -> set[str]:
    """The underscored attributes and imported names of ``source`` that are not its own."""
    tree = ast.parse(source)
    own = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    own |= {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyiceberg"):
            found |= {a.name for a in node.names if a.name.startswith("_")}
        elif (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            found.add(node.attr)
    return found - own


def test_no_module_outside_the_package_uses_pyicebergs_private_api():
    """pyiceberg's private names (those above) appear only in ``cdc_ingest.snapshots``."""
    private = {attribute for _, attribute, _ in CALLABLES.values()} | {"_FastAppendFiles"}
    outside = {
        f"{path.relative_to(ROOT)}: {name}"
        for directory in ("jobs", "plugins", "dags")
        for path in (ROOT / directory).rglob("*.py")
        if PACKAGE not in path.parents
        for name in private_names(path.read_text()) & private
    }
    assert outside == set()
    inside = set().union(*(private_names(p.read_text()) for p in PACKAGE.glob("*.py")))
    assert {"_do_commit", "_create_staged_table", "_dataframe_to_data_files"} <= inside
