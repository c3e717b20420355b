"""DDL statements from the sources, parsed with sqlglot into schema changes of the mirror.

Sources send statements as their database ran them: MySQL (OceanBase MySQL mode, Canal, DataWorks)
and Oracle (OceanBase Oracle mode), with comments in front and several clauses in one ALTER. Each
statement becomes a :class:`ParsedDdl`: the table it names and the ordered :class:`SchemaChange`
list, or the reason it cannot be understood. Deciding what a change does to an Iceberg table (and
whether it widens or narrows a type) is the applier's job; this module only reads SQL. It imports
no pyspark.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from cdc_ingest.contract import ColumnType
from cdc_ingest.formats.oms_types import oms_column_type
from cdc_ingest.sql_text import literal

ADD_COLUMN = "add_column"
DROP_COLUMN = "drop_column"
RENAME_COLUMN = "rename_column"
MODIFY_COLUMN = "modify_column"
CREATE_TABLE = "create_table"
TRUNCATE_TABLE = "truncate_table"
RENAME_TABLE = "rename_table"
DROP_TABLE = "drop_table"
NO_CHANGE = "no_change"  # indexes, comments, defaults, character sets: nothing in Iceberg
DIALECTS = ("mysql", "oracle")


@dataclass(frozen=True)
class SchemaChange:
    """One change a statement makes, in statement order.

    Attributes:
        action: one of the module's action constants.
        column: the column added, dropped, renamed (old name) or modified.
        new_name: a renamed column's or table's new name.
        column_type: the type of an added or modified column.
        columns: a created table's columns, in order.
        keys: a created table's primary key.
        detail: what the clause was, for the DDL history (e.g. ``ADD INDEX``).
        default: an added column's constant DEFAULT as a Spark SQL literal (the value rows that
            exist already hold in the source), or None (no default, NULL, or an expression).
    """

    action: str
    column: str | None = None
    new_name: str | None = None
    column_type: ColumnType | None = None
    columns: dict[str, ColumnType] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    detail: str = ""
    default: str | None = None


@dataclass(frozen=True)
class ParsedDdl:
    """A statement, the table it names and its changes, or why it cannot be understood."""

    statement: str
    table: str | None = None
    changes: tuple[SchemaChange, ...] = ()
    error: str | None = None


def lowercase_columns(parsed: ParsedDdl) -> ParsedDdl:
    """``parsed`` with every column it names in lowercase (``column_names: lowercase``), so that
    a column a statement adds is the one the lowercased row images then fill."""
    changes = tuple(
        dataclasses.replace(
            c,
            column=c.column.lower() if c.column else c.column,
            new_name=(
                c.new_name.lower() if c.new_name and c.action == RENAME_COLUMN else c.new_name
            ),
            columns={name.lower(): t for name, t in c.columns.items()},
            keys=tuple(k.lower() for k in c.keys),
        )
        for c in parsed.changes
    )
    return dataclasses.replace(parsed, changes=changes)


def _sqlglot() -> Any:
    try:
        import sqlglot
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise ImportError("DDL parsing needs sqlglot: pip install cdc-ingest") from exc
    # sqlglot warns for each statement it keeps as an opaque command (RENAME TABLE, clause lists):
    # this module handles those itself, and the warnings would flood the task log.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    return sqlglot


def _type(data_type: Any, dialect: str) -> ColumnType:
    return oms_column_type(data_type.sql(dialect=dialect))


def _name(node: Any) -> str:
    return str(node.name)


def _column_def(node: Any, dialect: str) -> tuple[str, ColumnType | None]:
    kind = node.args.get("kind")
    return _name(node), (_type(kind, dialect) if kind is not None else None)


def _constant_default(column: Any) -> str | None:
    """A column definition's DEFAULT as a Spark SQL literal when it is a constant (a string, a
    number, possibly negative); None for none, NULL, or an expression (CURRENT_TIMESTAMP...),
    whose value when the column was added the statement does not say."""
    from sqlglot import exp

    for constraint in column.args.get("constraints") or []:
        kind = constraint.args.get("kind")
        if not isinstance(kind, exp.DefaultColumnConstraint):
            continue
        value, sign = kind.this, ""
        if isinstance(value, exp.Neg):
            value, sign = value.this, "-"
        if isinstance(value, exp.Literal) and value.is_string and not sign:
            return literal(str(value.this))
        if isinstance(value, exp.Literal) and not value.is_string:
            return f"{sign}{value.this}"
        return None
    return None


def _alter_action(action: Any, dialect: str) -> SchemaChange:
    from sqlglot import exp

    if isinstance(action, exp.ColumnDef):
        name, ctype = _column_def(action, dialect)
        return SchemaChange(
            ADD_COLUMN,
            column=name,
            column_type=ctype,
            detail="ADD COLUMN",
            default=_constant_default(action),
        )
    if isinstance(action, exp.Drop) and str(action.args.get("kind", "")).upper() == "COLUMN":
        [column] = action.args.get("tables") or [None]
        return SchemaChange(DROP_COLUMN, column=_name(column), detail="DROP COLUMN")
    if isinstance(action, exp.RenameColumn):
        old, new = _name(action.this), _name(action.args["to"])
        return SchemaChange(RENAME_COLUMN, column=old, new_name=new, detail="RENAME COLUMN")
    if isinstance(action, exp.ModifyColumn | exp.AlterColumn) and isinstance(
        action.this, exp.ColumnDef
    ):
        name, ctype = _column_def(action.this, dialect)
        renamed = action.args.get("rename_from")
        if renamed is not None and _name(renamed) != name:  # CHANGE COLUMN old new TYPE
            return SchemaChange(
                RENAME_COLUMN,
                column=_name(renamed),
                new_name=name,
                column_type=ctype,
                detail="CHANGE",
            )
        return SchemaChange(MODIFY_COLUMN, column=name, column_type=ctype, detail="MODIFY")
    if isinstance(action, exp.AlterColumn) and action.args.get("dtype") is not None:
        ctype = _type(action.args["dtype"], dialect)
        return SchemaChange(
            MODIFY_COLUMN, column=_name(action.this), column_type=ctype, detail="ALTER TYPE"
        )
    if isinstance(action, exp.AlterRename):
        return SchemaChange(RENAME_TABLE, new_name=_name(action.this), detail="RENAME TO")
    clause = action.sql(dialect=dialect).split(" (")[0][:60]
    return SchemaChange(NO_CHANGE, detail=clause or type(action).__name__)


def _create(node: Any, dialect: str) -> ParsedDdl | SchemaChange:
    from sqlglot import exp

    schema = node.this
    if not isinstance(schema, exp.Schema):
        return SchemaChange(NO_CHANGE, detail=f"CREATE {node.args.get('kind', '')}".strip())
    columns: dict[str, ColumnType] = {}
    keys: list[str] = []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            name, ctype = _column_def(item, dialect)
            columns[name] = ctype or ColumnType("string")
            constraints = item.args.get("constraints") or []
            if any(
                isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint) for c in constraints
            ):
                keys.append(name)
        elif isinstance(item, exp.PrimaryKey):
            keys += [_name(c) for c in item.expressions]
    return SchemaChange(CREATE_TABLE, columns=columns, keys=tuple(keys), detail="CREATE TABLE")


def _top_level_pieces(sql: str, tokens: list[Any]) -> list[str]:
    """``sql`` cut at the commas outside parentheses."""
    from sqlglot import TokenType

    pieces, depth, start = [], 0, tokens[0].start if tokens else 0
    for token in tokens:
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        elif token.token_type == TokenType.COMMA and depth == 0:
            pieces.append(sql[start : token.start])
            start = token.end + 1
    pieces.append(sql[start:])
    return [p.strip() for p in pieces if p.strip()]


# Clauses that change nothing an Iceberg table holds: indexes, keys, comments, defaults,
# character sets, storage and partitioning options.
NO_CHANGE_CLAUSES = (
    "ADD INDEX",
    "ADD KEY",
    "ADD UNIQUE",
    "ADD CONSTRAINT",
    "ADD FULLTEXT",
    "ADD SPATIAL",
    "ADD FOREIGN",
    "ADD PRIMARY",
    "DROP INDEX",
    "DROP KEY",
    "DROP FOREIGN",
    "DROP PRIMARY",
    "DROP CONSTRAINT",
    "RENAME INDEX",
    "RENAME KEY",
    "ALTER INDEX",
    "COMMENT",
    "CONVERT TO",
    "CHARACTER SET",
    "DEFAULT CHARACTER",
    "DEFAULT CHARSET",
    "CHARSET",
    "COLLATE",
    "ENGINE",
    "AUTO_INCREMENT",
    "ROW_FORMAT",
    "ALGORITHM",
    "LOCK",
    "ENABLE KEYS",
    "DISABLE KEYS",
    "FORCE",
    "ORDER BY",
    "ADD PARTITION",
    "DROP PARTITION",
    "PARTITION BY",
    "REMOVE PARTITIONING",
)


def _alter_clauses(statement: str, dialect: str) -> tuple[str, list[str]] | None:
    """``ALTER TABLE t`` and its clauses, one column per ADD clause.

    MySQL allows ``ADD COLUMN (a INT, b INT)`` (Oracle ``ADD (a NUMBER, …)``) and clause lists
    mixing ADD, MODIFY and DROP; sqlglot reads each clause on its own.
    """
    sqlglot = _sqlglot()
    tokens = sqlglot.tokenize(statement, read=dialect)
    if len(tokens) < 4 or [t.text.upper() for t in tokens[:2]] != ["ALTER", "TABLE"]:
        return None
    # The table name may be qualified (db.t) and quoted: it ends before the first clause word.
    end = 3
    while end < len(tokens) and tokens[end].text == ".":
        end += 2
    head = statement[tokens[0].start : tokens[end - 1].end + 1]
    body = statement[tokens[end].start :] if end < len(tokens) else ""
    clauses = []
    for clause in _top_level_pieces(body, sqlglot.tokenize(body, read=dialect)):
        words = clause.split()
        if words[0].upper() == "ADD" and not _is_no_change(clause):
            rest = clause[len(words[0]) :].strip()
            if rest.upper().startswith("COLUMN"):
                rest = rest[len("COLUMN") :].strip()
            if rest.startswith("("):
                inner = rest[1 : rest.rindex(")")]
                pieces = _top_level_pieces(inner, sqlglot.tokenize(inner, read=dialect))
                clauses += [f"ADD COLUMN {piece}" for piece in pieces]
                continue
            clauses.append(f"ADD COLUMN {rest}")
            continue
        clauses.append(clause)
    return head, clauses


def _is_no_change(clause: str) -> bool:
    text = " ".join(clause.upper().replace("=", " ").split())
    return any(text == c or text.startswith(c + " ") for c in NO_CHANGE_CLAUSES)


def _parse_alter(statement: str, dialect: str) -> ParsedDdl | None:
    split = _alter_clauses(statement, dialect)
    if split is None:
        return None
    head, clauses = split
    from sqlglot import exp

    table = _name(_sqlglot().parse_one(f"{head} ADD COLUMN x INT", read=dialect).this)
    changes: list[SchemaChange] = []
    for clause in clauses:
        if _is_no_change(clause):
            changes.append(SchemaChange(NO_CHANGE, detail=" ".join(clause.split())[:60]))
            continue
        node = _sqlglot().parse_one(f"{head} {clause}", read=dialect)
        if not isinstance(node, exp.Alter) or not node.args.get("actions"):
            return ParsedDdl(statement, table, (), f"cannot understand the clause {clause!r}")
        changes += [_alter_action(a, dialect) for a in node.args["actions"]]
    return ParsedDdl(statement, table, tuple(changes))


def _rename_tables(node: Any, statement: str, dialect: str) -> ParsedDdl | None:
    """``RENAME TABLE [db.]a TO [db.]b``, which sqlglot keeps as an opaque command."""
    if str(node.this).upper() != "RENAME" or node.expression is None:
        return None
    from sqlglot import TokenType

    tokens = _sqlglot().tokenize(str(node.expression.this), read=dialect)
    words = [t.text for t in tokens]
    # A quoted name is never a keyword.
    upper = [t.text.upper() if t.token_type != TokenType.IDENTIFIER else "" for t in tokens]
    if upper[:1] != ["TABLE"] or upper.count("TO") != 1 or "," in words:
        return None
    to = upper.index("TO")
    # A qualified name's last part is the table; a dot inside a quoted name is part of it.
    old, new = tokens[1:to], tokens[to + 1 :]
    if not old or not new or any(t.token_type == TokenType.DOT for t in new[-1:] + old[-1:]):
        return None
    change = SchemaChange(RENAME_TABLE, new_name=new[-1].text, detail="RENAME TABLE")
    return ParsedDdl(statement, old[-1].text, (change,))


def _parse_one(statement: str, dialect: str) -> ParsedDdl:
    sqlglot = _sqlglot()
    from sqlglot import exp

    altered = _parse_alter(statement, dialect)
    if altered is not None:
        return altered
    node = sqlglot.parse_one(statement, read=dialect)
    if isinstance(node, exp.Create):
        if str(node.args.get("kind", "")).upper() != "TABLE":
            return ParsedDdl(
                statement,
                None,
                (SchemaChange(NO_CHANGE, detail=f"CREATE {node.args.get('kind')}"),),
            )
        table = node.this.this if isinstance(node.this, exp.Schema) else node.this
        created = _create(node, dialect)
        assert isinstance(created, SchemaChange)
        return ParsedDdl(statement, _name(table), (created,))
    if isinstance(node, exp.TruncateTable):
        [table] = node.expressions[:1] or [None]
        return ParsedDdl(
            statement, _name(table), (SchemaChange(TRUNCATE_TABLE, detail="TRUNCATE"),)
        )
    if isinstance(node, exp.Drop):
        kind = str(node.args.get("kind", "")).upper()
        if kind == "TABLE":
            [table] = (node.args.get("tables") or [])[:1] or [node.this]
            change = SchemaChange(DROP_TABLE, detail="DROP TABLE")
            return ParsedDdl(statement, _name(table), (change,))
        return ParsedDdl(statement, None, (SchemaChange(NO_CHANGE, detail=f"DROP {kind}"),))
    if isinstance(node, exp.Command):
        renamed = _rename_tables(node, statement, dialect)
        if renamed is not None:
            return renamed
        return ParsedDdl(
            statement, None, (), f"not a statement cdc-ingest understands ({node.this})"
        )
    kind = type(node).__name__.upper()
    return ParsedDdl(statement, None, (SchemaChange(NO_CHANGE, detail=kind),))


def parse_ddl(statement: str, dialects: tuple[str, ...] = DIALECTS) -> ParsedDdl:
    """Parse one DDL statement; the first dialect that reads it wins.

    Returns:
        The parsed statement; ``error`` says why when no dialect reads it (never raises for bad
        SQL: a statement the parser cannot understand must be reported, not crash the batch).
    """
    errors: list[str] = []
    for dialect in dialects:
        try:
            parsed = _parse_one(statement.strip().rstrip(";"), dialect)
        except Exception as exc:  # sqlglot raises ParseError, TokenError and others
            errors.append(f"{dialect}: {str(exc).splitlines()[0]}")
            continue
        if parsed.error is None:
            return parsed
        errors.append(f"{dialect}: {parsed.error}")
    return ParsedDdl(statement, None, (), "cannot parse the statement (" + "; ".join(errors) + ")")
