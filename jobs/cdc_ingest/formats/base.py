"""What a vendor decoder is: it adds the columns of :mod:`cdc_ingest.contract` to landed records."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from cdc_ingest.contract import TypeHint

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Decoder(ABC):
    """One vendor format."""

    name: ClassVar[str]
    #: JSON paths of the row image inside a message, tried in order, for inferring column types
    #: from sample messages when the message declares none.
    image_json_paths: ClassVar[tuple[str, ...]] = ()
    #: Whether a delete may name no table (an Aerospike delete carries no set): such a delete
    #: (``src_table`` null) then applies to every table of the namespace keyed like it.
    deletes_without_table: ClassVar[bool] = False
    #: Whether a table whose messages name no key (and whose key the pipeline does not configure)
    #: is kept append-only instead of dead-lettering its changes.
    keyless_tables_append_only: ClassVar[bool] = False
    #: Values that stand for "not sent, unchanged" (Debezium's TOAST placeholder, as text and as
    #: Base64 bytes): such a column keeps its stored value instead of taking the placeholder.
    unavailable_values: ClassVar[tuple[str, ...]] = ()
    #: Ops of a message that is the before half of an update sent as two messages sharing the
    #: first ordering value (DataHub's UPDATE_BEFOR, then UPDATE_AFTER). Such a message changes no
    #: row; its image is the row before, so that a pair whose key differs moves the row.
    before_half_ops: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        """Keep the pipeline's format options (see :mod:`cdc_ingest.formats.options`)."""
        self.options: dict[str, Any] = dict(options or {})

    @abstractmethod
    def decode(self, records: DataFrame) -> DataFrame:
        """Add the ``CHANGE_COLUMNS`` to landed records.

        Args:
            records: one row per Kafka record with at least ``key`` and ``value`` (JSON text, or
                the string itself for a JSON string, or null).

        Returns:
            ``records`` with every column of ``CHANGE_COLUMNS`` added.
        """

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        """Column types declared by one distinct ``schema_hint`` value, or None to infer them."""
        return None
