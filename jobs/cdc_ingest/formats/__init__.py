"""The format registry: one decoder module per vendor format.

Adding a format is one module with a :class:`~cdc_ingest.formats.base.Decoder` subclass, one line in
``FORMATS`` and one fixture folder under ``tests/fixtures/``. Modules are imported lazily so that
reading a config (as Airflow does at DAG parse time) never imports pyspark.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cdc_ingest.formats.base import Decoder

FORMATS: dict[str, str] = {
    "lindorm": "cdc_ingest.formats.lindorm:LindormDecoder",
    "arcion": "cdc_ingest.formats.arcion:ArcionDecoder",
    "debezium-json": "cdc_ingest.formats.debezium_json:DebeziumJsonDecoder",
    "oms-default": "cdc_ingest.formats.oms_default:OmsDefaultDecoder",
    "oms-default-extend": "cdc_ingest.formats.oms_default:OmsDefaultExtendDecoder",
    "oms-canal": "cdc_ingest.formats.canal:OmsCanalDecoder",
    "canal-json": "cdc_ingest.formats.canal:CanalDecoder",
    "oms-dataworks": "cdc_ingest.formats.oms_dataworks:OmsDataWorksDecoder",
    "oms-shareplex": "cdc_ingest.formats.oms_shareplex:OmsSharePlexDecoder",
    "datahub-tuple": "cdc_ingest.formats.datahub_tuple:DataHubTupleDecoder",
    "datahub-blob": "cdc_ingest.formats.datahub_blob:DataHubBlobDecoder",
    "aerospike": "cdc_ingest.formats.aerospike:AerospikeDecoder",
    "maxwell-json": "cdc_ingest.formats.maxwell:MaxwellDecoder",
    "ogg-json": "cdc_ingest.formats.ogg:OggDecoder",
}


# Formats whose ordering values are the same fields, so that one's rows and the other's compare.
_ORDER_FAMILIES = {"oms-canal": "canal-json", "oms-default-extend": "oms-default"}


def order_family(name: str) -> str:
    """The format whose ordering values ``name``'s are (itself, unless another shares them)."""
    return _ORDER_FAMILIES.get(name, name)


def format_names() -> tuple[str, ...]:
    """Names a pipeline's ``format`` may take."""
    return tuple(FORMATS)


def load_decoder(
    name: str,
    options: dict[str, Any] | None = None,
    bound_table: str | None = None,
    lowercase_columns: bool = False,
    routed_columns: frozenset[str] = frozenset(),
) -> Decoder:
    """An instance of the decoder registered under ``name``.

    Args:
        name: a registered format.
        options: the pipeline's format options, as :mod:`cdc_ingest.formats.options` parsed them.
        bound_table: the pipeline's one target table, if its ``table:`` names one (see Decoder).
        lowercase_columns: column names as their lowercase (``column_names: lowercase``).
        routed_columns: the columns the pipeline's routes add to rows (schema/routes).

    Raises:
        KeyError: for an unregistered name, listing the registered ones.
    """
    try:
        target = FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r} (known: {', '.join(FORMATS)})") from None
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(
            f"format {name!r} needs pyspark: install the package with its dependencies "
            f"(pip install cdc-ingest) ({exc})"
        ) from exc
    decoder: Decoder = getattr(module, class_name)(options or {}, bound_table)
    decoder.lowercase_columns = lowercase_columns
    decoder.routed_columns = routed_columns
    return decoder
