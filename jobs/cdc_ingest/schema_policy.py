"""What each kind of schema change does to a mirror: the ``schema_changes`` policy.

A pipeline (and any table, in ``table_options``) says per kind of change, from a DDL statement
or inferred from the messages (a column the table lacks, a wider declared type, a table the
mirror lacks), one action:

- ``apply``: the mirror changes (what ``evolve`` does for every kind);
- ``ignore``: the mirror keeps its schema; a statement's clauses of that kind are left out, the
  values of a column not added are not applied (and counted), a table not created receives
  nothing (its changes are counted as skipped);
- ``dead-letter``: the table's changes of the batch wait in the dead letters with the reason,
  and its statements change nothing;
- ``fail``: the batch stops before any change.

The string forms stay: ``evolve`` applies every kind but narrowing, which Iceberg cannot do (the
statement is rejected whole, as one the parser cannot read); ``ignore`` and ``fail`` do so for
every kind but ``create_table``, which they apply (a table the mirror lacks changes no schema it
has). This module imports no pyspark: Airflow loads configs at DAG parse time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ADD_COLUMN, DROP_COLUMN, RENAME_COLUMN = "add_column", "drop_column", "rename_column"
WIDEN_TYPE, NARROW_TYPE = "widen_type", "narrow_type"
CREATE_TABLE, DROP_TABLE, TRUNCATE, RENAME_TABLE = (
    "create_table",
    "drop_table",
    "truncate",
    "rename_table",
)
KINDS = (
    ADD_COLUMN,
    DROP_COLUMN,
    RENAME_COLUMN,
    WIDEN_TYPE,
    NARROW_TYPE,
    CREATE_TABLE,
    DROP_TABLE,
    TRUNCATE,
    RENAME_TABLE,
)
APPLY, IGNORE, DEAD_LETTER, FAIL = "apply", "ignore", "dead-letter", "fail"
ACTIONS = (APPLY, IGNORE, DEAD_LETTER, FAIL)
# narrow_type's default, not a value a file gives: the statement is rejected whole.
REJECT = "reject"
STRING_FORMS = ("evolve", "ignore", "fail")
_FORMS = {
    "evolve": {**{k: APPLY for k in KINDS}, NARROW_TYPE: REJECT},
    "ignore": {**{k: IGNORE for k in KINDS}, CREATE_TABLE: APPLY},
    "fail": {**{k: FAIL for k in KINDS}, CREATE_TABLE: APPLY},
}
# Strictest first: what a statement the parser cannot read gets (it may be of any kind).
_STRICTNESS = (FAIL, DEAD_LETTER, APPLY, REJECT, IGNORE)


class SchemaPolicyError(ValueError):
    """A ``schema_changes`` value that is not a string form or a mapping of kinds to actions."""


@dataclass(frozen=True)
class SchemaPolicy:
    """Each kind's action, the defaults (``evolve``) filled in."""

    given: tuple[tuple[str, str], ...] = ()

    def __getitem__(self, kind: str) -> str:
        return dict(self.given).get(kind, _FORMS["evolve"][kind])

    @property
    def holds_back(self) -> bool:
        """Whether some kind of change is ignored, dead-lettered or refused: only then is a
        batch checked against the policy before it applies (``evolution.check_policy``)."""
        return any(self[kind] in (IGNORE, DEAD_LETTER, FAIL) for kind in KINDS)

    @property
    def adds_columns(self) -> bool:
        """Whether columns the messages carry and the table lacks are added."""
        return self[ADD_COLUMN] == APPLY

    @property
    def widens_columns(self) -> bool:
        """Whether a wider type the messages declare widens the column."""
        return self[WIDEN_TYPE] == APPLY

    @property
    def for_unreadable(self) -> str:
        """What a statement the parser cannot read gets: the strictest action of any kind (it
        may be of that kind), ``reject`` if some kind applies, ``ignore`` if all are ignored."""
        actions = {self[kind] for kind in KINDS}
        strictest = next(a for a in _STRICTNESS if a in actions)
        return REJECT if strictest == APPLY else strictest

    def says(self, kind: str) -> str:
        """How the policy's line for ``kind`` reads in a reason: ``schema_changes add_column:
        ignore``."""
        return f"schema_changes {kind}: {self[kind]}"


def parse_schema_changes(value: Any) -> dict[str, str]:
    """A ``schema_changes`` value (a string form, or kinds mapped to actions) as the kinds it
    sets; a string form sets every kind.

    Raises:
        SchemaPolicyError: with the key and what it may be.
    """
    if isinstance(value, str):
        if value not in _FORMS:
            raise SchemaPolicyError(
                f"{value!r} must be one of {', '.join(STRING_FORMS)}, or a "
                f"mapping of {', '.join(KINDS)} to {' | '.join(ACTIONS)}"
            )
        return dict(_FORMS[value])
    if not isinstance(value, dict) or not value:
        raise SchemaPolicyError(
            f"expected one of {', '.join(STRING_FORMS)} or a mapping of kinds "
            f"of change ({', '.join(KINDS)}) to {' | '.join(ACTIONS)}"
        )
    actions: dict[str, str] = {}
    for kind, action in value.items():
        if kind not in KINDS:
            raise SchemaPolicyError(f"unknown kind of change {kind!r} (kinds: {', '.join(KINDS)})")
        if action not in ACTIONS:
            raise SchemaPolicyError(f"{kind}: {action!r} must be one of {', '.join(ACTIONS)}")
        if kind == NARROW_TYPE and action == APPLY:
            raise SchemaPolicyError(
                "narrow_type: Iceberg cannot narrow a column's type: give "
                "ignore (keep the wider type), dead-letter or fail"
            )
        actions[str(kind)] = str(action)
    return actions


def schema_policy(actions: dict[str, str]) -> SchemaPolicy:
    """The policy of the kinds ``actions`` sets, the others as ``evolve`` has them."""
    return SchemaPolicy(tuple(sorted(actions.items())))
