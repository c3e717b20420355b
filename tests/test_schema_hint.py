"""The Debezium envelope's ``schema`` as the type hint a table is created from.

``schema_hint`` skips its whitespace regex for the shapes Spark's JSON reader produces (objects come
out compact); these cases pin it to what stripping the whitespace first yields.
"""

from __future__ import annotations

from typing import Any

import pytest
from cdc_ingest.formats import load_decoder

PAYLOAD = '"payload":{"op":"c","after":{"id":1},"source":{"table":"t"}}'
CASES = [
    ('{"schema":{},' + PAYLOAD + "}", None),
    ('{"schema":null,' + PAYLOAD + "}", None),
    ('{"schema":"null",' + PAYLOAD + "}", None),
    ('{"schema":" { \\n } ",' + PAYLOAD + "}", None),
    ('{"schema": {  } ,' + PAYLOAD + "}", None),
    ("{" + PAYLOAD + "}", None),
    ('{"schema":{"type":"struct","fields":[]},' + PAYLOAD + "}", '{"type":"struct","fields":[]}'),
    ('{"schema": { "type" : "struct" },' + PAYLOAD + "}", '{"type":"struct"}'),
    ('{"schema":" {\\"type\\":\\"struct\\"}",' + PAYLOAD + "}", ' {"type":"struct"}'),
]


@pytest.mark.parametrize("fmt", ["debezium-json", "lindorm"])
def test_empty_schemas_give_no_hint_and_others_their_text(spark: Any, fmt: str) -> None:
    records = spark.createDataFrame(
        [(i, None, m) for i, (m, _) in enumerate(CASES)], "i int, key string, value string"
    )
    decoded = load_decoder(fmt).decode(records)
    hints = {r["i"]: r["schema_hint"] for r in decoded.select("i", "schema_hint").collect()}
    assert [hints[i] for i in range(len(CASES))] == [hint for _, hint in CASES]
