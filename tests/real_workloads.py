"""Seeded random workloads for the real-producer tests: statements a database runs, round by
round, and the model of each table's columns the comparison needs.

Every common type of each database is a column; each round inserts, updates (values, TOAST-sized
text left alone, keys), deletes, sometimes truncates, and MariaDB's rounds alter the schema
(ADD, DROP, RENAME and MODIFY COLUMN, CREATE, RENAME and DROP TABLE) between changes.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

# How the comparison reads a column: its values normalized by kind (real_compare.py).
POSTGRES_COLUMNS = {
    "small": ("smallint", "int"),
    "big": ("bigint", "int"),
    "price": ("numeric(12,2)", "dec"),
    "amount": ("numeric", "dec"),
    "ratio": ("double precision", "float"),
    "name": ("varchar(40)", "text"),
    "note": ("text", "text"),
    "flag": ("boolean", "bool"),
    "born": ("date", "date"),
    "seen": ("timestamp(6)", "ts"),
    "at": ("timestamptz", "tstz"),
    "slot": ("time(6)", "time"),
    "data": ("bytea", "bytes"),
    "uid": ("uuid", "text"),
    "doc": ("jsonb", "json"),
    "body": ("text", "text"),  # TOAST-sized, left alone by most updates
}
MARIADB_COLUMNS = {
    "small": ("smallint", "int"),
    "big": ("bigint", "int"),
    "ubig": ("bigint unsigned", "int"),
    "price": ("decimal(12,2)", "dec"),
    "ratio": ("double", "float"),
    "name": ("varchar(40)", "text"),
    "note": ("text", "text"),
    "flag": ("tinyint(1)", "int"),
    "born": ("date", "date"),
    "seen": ("datetime(6)", "ts"),
    "at": ("timestamp(6) NULL", "tstz"),
    "slot": ("time(6)", "time"),
    "data": ("varbinary(16)", "bytes"),
    "kind": ("enum('a','b','c')", "text"),
}


# Text literals, one with a tab and quotes (SQL's doubled quote), one beyond ASCII.
TEXTS = ["''", "'plain'", "'tab\tand ''quoted'''", "'\u00fcn\u00efcode'", "'" + "x" * 30 + "'"]


@dataclass
class Table:
    """A table as the workload knows it: key columns and the kind of each column."""

    name: str
    keys: tuple[str, ...]
    kinds: dict[str, str]
    rows: set[tuple[object, ...]] = field(default_factory=set)


class Workload:
    """Statements for one database, seeded."""

    def __init__(self, dialect: str, seed: int) -> None:
        self.dialect = dialect
        self.random = random.Random(seed)
        columns = POSTGRES_COLUMNS if dialect == "postgres" else MARIADB_COLUMNS
        self.types = {name: sql for name, (sql, _) in columns.items()}
        self.tables = {
            "items": Table(
                "items", ("id",), {"id": "int", **{n: k for n, (_, k) in columns.items()}}
            ),
            "accounts": Table(
                "accounts", ("code", "n"), {"code": "text", "n": "int", "balance": "dec"}
            ),
            "marker": Table("marker", ("round",), {"round": "int"}),
        }
        self.next_id = 1
        self.round = 0
        # The accounts table's name: RENAME TABLE changes it.
        self.accounts_table = "accounts"

    def create(self) -> list[str]:
        """The tables, before the connector starts (its snapshot reads them)."""
        items = ", ".join(f"{quote(n, self.dialect)} {t}" for n, t in self.types.items())
        return [
            f"CREATE TABLE items (id int PRIMARY KEY, {items})",
            "CREATE TABLE accounts (code varchar(10), n int, balance decimal(14,4),"
            " PRIMARY KEY (code, n))",
            "CREATE TABLE marker (round int PRIMARY KEY)",
            *self.inserts(6),
            *self.accounts(4),
        ]

    def value(self, kind: str, column: str) -> str:
        """A random literal of a column's kind (SQL text), sometimes NULL."""
        r = self.random
        if r.random() < 0.1 and column not in ("id", "code", "n"):
            return "NULL"
        sql_type = self.types.get(column, "")
        pg = self.dialect == "postgres"
        if kind == "int":
            if "unsigned" in sql_type:
                return str(r.choice([0, 2**63 - 1, 2**63, 2**64 - 1, r.randrange(2**64)]))
            if sql_type == "tinyint(1)":
                return str(r.randrange(2))
            bound = 2**15 if sql_type == "smallint" else 2**63 if sql_type == "bigint" else 2**31
            return str(r.randrange(-bound, bound))
        if kind == "dec":
            if sql_type == "numeric":
                scale = r.randrange(0, 8)
                return f"{r.randrange(-(10**15), 10**15)}e-{scale}"
            return f"{r.randrange(-(10**9), 10**9)}.{r.randrange(100):02d}"
        if kind == "float":
            return repr(r.choice([0.0, -1.5, 1e300, 3.141592653589793, r.uniform(-1e6, 1e6)]))
        if kind == "bool":
            return r.choice(["true", "false"])
        if kind == "date":
            return f"'{r.randrange(1900, 2100)}-{r.randrange(1, 13):02d}-{r.randrange(1, 29):02d}'"
        if kind in ("ts", "tstz"):
            year = r.randrange(1971, 2037)
            text = (
                f"{year}-{r.randrange(1, 13):02d}-{r.randrange(1, 29):02d} "
                f"{r.randrange(24):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}"
                f".{r.randrange(10**6):06d}"
            )
            return f"'{text}+02'" if kind == "tstz" and pg else f"'{text}'"
        if kind == "time":
            hours = r.randrange(24) if pg else r.randrange(-838, 839)
            sign = "-" if hours < 0 else ""
            return (
                f"'{sign}{abs(hours):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}"
                f".{r.choice([0, r.randrange(10**6)]):06d}'"
            )
        if kind == "bytes":
            data = bytes(r.randrange(256) for _ in range(r.randrange(1, 16)))
            return f"'\\x{data.hex()}'::bytea" if pg else f"X'{data.hex()}'"
        if kind == "json":
            return f'\'{{"n": {r.randrange(100)}, "s": "v{r.randrange(9)}"}}\''
        if column == "uid":
            return f"'{uuid.UUID(int=r.getrandbits(128))}'"
        if column == "body":
            return "'" + r.choice("abcdef") * r.randrange(2500, 6000) + "'"
        if column == "kind":
            return r.choice(["'a'", "'b'", "'c'"])
        return r.choice(TEXTS)

    def inserts(self, count: int) -> list[str]:
        items = self.tables["items"]
        names = list(items.kinds)
        statements = []
        for _ in range(count):
            row_id = self.next_id
            self.next_id += 1
            values = [str(row_id)] + [self.value(items.kinds[n], n) for n in names[1:]]
            columns = ", ".join(quote(n, self.dialect) for n in names)
            statements.append(f"INSERT INTO items ({columns}) VALUES ({', '.join(values)})")
            items.rows.add((row_id,))
        return statements

    def accounts(self, count: int) -> list[str]:
        accounts = self.tables[self.accounts_table]
        statements = []
        for _ in range(count):
            key = (self.random.choice(["eu", "us", "apac"]), self.random.randrange(10**6))
            if key in accounts.rows:
                continue
            accounts.rows.add(key)
            balance = f"{self.random.randrange(-(10**9), 10**9)}.{self.random.randrange(10**4):04d}"
            statements.append(
                f"INSERT INTO {accounts.name} VALUES ('{key[0]}', {key[1]}, {balance})"
            )
        return statements

    def changes(self) -> list[str]:
        """One round's inserts, updates (values and keys) and deletes."""
        r = self.random
        items = self.tables["items"]
        statements = self.inserts(r.randrange(2, 6)) + self.accounts(2)
        plain = [n for n in items.kinds if n not in ("id", "body")]
        for (row_id,) in r.sample(sorted(items.rows), min(3, len(items.rows))):
            changed = r.sample(plain, min(len(plain), r.randrange(1, 4)))
            sets = ", ".join(
                f"{quote(n, self.dialect)} = {self.value(items.kinds[n], n)}" for n in changed
            )
            statements.append(f"UPDATE items SET {sets} WHERE id = {row_id}")
        if items.rows:
            (gone,) = r.choice(sorted(items.rows))
            items.rows.discard((gone,))
            statements.append(f"DELETE FROM items WHERE id = {gone}")
        accounts = self.tables[self.accounts_table]
        if accounts.rows:
            code, n = r.choice(sorted(accounts.rows))
            accounts.rows.discard((code, n))
            moved = int(str(n)) + 10**6 + r.randrange(10**6)
            accounts.rows.add((code, moved))
            statements.append(
                f"UPDATE {accounts.name} SET n = {moved} WHERE code = '{code}' AND n = {n}"
            )
        return statements

    def marker(self) -> str:
        self.round += 1
        return f"INSERT INTO marker VALUES ({self.round})"


def quote(name: str, dialect: str) -> str:
    return f'"{name}"' if dialect == "postgres" else f"`{name}`"


def schema_round(workload: Workload, step: int) -> list[str]:
    """A round that changes schemas between changes: the statements, the model kept in step."""
    w = workload
    items = w.tables["items"]
    mariadb = w.dialect == "mariadb"
    if step == 0:
        before = w.changes()
        w.types["extra"] = "varchar(40)"
        items.kinds["extra"] = "text"
        # PostgreSQL sends no schema changes: a default there reaches no existing row.
        default = " DEFAULT 'fresh'" if mariadb else ""
        return [*before, f"ALTER TABLE items ADD COLUMN extra varchar(40){default}", *w.changes()]
    if step == 1 and mariadb:
        statements = [*w.changes(), "ALTER TABLE items DROP COLUMN note"]
        del w.types["note"], items.kinds["note"]
        statements += [*w.changes(), "ALTER TABLE items CHANGE name title varchar(40)"]
        w.types["title"], items.kinds["title"] = w.types.pop("name"), items.kinds.pop("name")
        statements += [*w.changes(), "ALTER TABLE items MODIFY price decimal(16,2)"]
        w.types["price"] = "decimal(16,2)"
        return [*statements, *w.changes()]
    if step == 2 and mariadb:
        statements = [*w.changes(), "RENAME TABLE accounts TO ledger"]
        w.tables["ledger"] = w.tables.pop("accounts")
        w.tables["ledger"].name = w.accounts_table = "ledger"
        statements += [
            "INSERT INTO ledger VALUES ('eu', 7, 1.5)",
            "CREATE TABLE notes (id int PRIMARY KEY, v varchar(10))",
            "INSERT INTO notes VALUES (1, 'one'), (2, 'two')",
            "CREATE TABLE scratch (id int PRIMARY KEY)",
            "INSERT INTO scratch VALUES (1)",
            "DROP TABLE scratch",
        ]
        w.tables["ledger"].rows.add(("eu", 7))
        w.tables["notes"] = Table("notes", ("id",), {"id": "int", "v": "text"})
        return [*statements, *w.changes()]
    # TRUNCATE between changes.
    before = w.changes()
    items.rows.clear()
    return [*before, "TRUNCATE TABLE items", *w.changes()]
