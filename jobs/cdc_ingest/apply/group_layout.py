"""Where each table's columns sit in the rows of its group: slots that tables' columns share.

A group types, collapses and classifies many tables' changes in one plan (``fresh_tables``). Were
its rows to hold every table's columns by name, the tables of one database, which share few column
names, would make every row carry the other tables' columns as nulls through every step: 300 tables
of a key and two columns of their own, about 60 columns a row in groups of 64. Here a column takes a
slot of its type that its table does not use yet, so that a group's rows are as wide as its widest
table: a name takes the slot that name holds already (a shared key keeps its name and slot), and a
slot holding several tables' names is named ``_cdc_slot_N``. A slot that not every table keeps under
one name is read, per change, by the name its table gives it (``name_column``), so that no table's
values are read by another's column. Each table's rows get their own names back when they are
written (``slot_of``).
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cdc_ingest.contract import ColumnType
    from cdc_ingest.schema.target import TargetTable

SLOT_PREFIX = "_cdc_slot_"
NAME_PREFIX = "_cdc_name_"


@dataclass
class _Slot:
    ctype: ColumnType
    names: dict[str, str] = field(default_factory=dict)  # table -> its column here


@dataclass
class GroupLayout:
    """The slots of a group's rows, in order, and which column of each table each holds."""

    _slots: list[_Slot] = field(default_factory=list)
    _columns: dict[str, list[str]] = field(default_factory=dict)  # each table's, in its order

    def placed(self, target: TargetTable, most: int | None = None) -> GroupLayout | None:
        """This layout with ``target``'s columns placed (keys first), or None when it would need
        more than ``most`` slots."""
        slots = [_Slot(s.ctype, dict(s.names)) for s in self._slots]
        ordered = [*target.keys, *(c for c in target.columns if c not in target.keys)]
        # Slot indices, in order: of each name and type held alone, and of each type.
        alone: dict[tuple[str, ColumnType], list[int]] = {}
        of_type: dict[ColumnType, list[int]] = {}
        for i, s in enumerate(slots):
            names = set(s.names.values())
            if len(names) == 1:
                alone.setdefault((next(iter(names)), s.ctype), []).append(i)
            of_type.setdefault(s.ctype, []).append(i)
        taken: set[int] = set()
        left: list[str] = []
        for column in ordered:  # the slot holding this name only, if there is one
            same = alone.get((column, target.columns[column]))
            if same:
                index = same.pop(0)
                taken.add(index)
                slots[index].names[target.name] = column
            else:
                left.append(column)
        free = {ctype: deque(i for i in held if i not in taken) for ctype, held in of_type.items()}
        for column in left:  # else the first free slot of its type, else a new one
            ctype = target.columns[column]
            kind = free.get(ctype)
            if kind:
                index = kind.popleft()
            else:
                slots.append(_Slot(ctype))
                index = len(slots) - 1
            slots[index].names[target.name] = column
        if most is not None and len(slots) > most:
            return None
        return GroupLayout(slots, {**self._columns, target.name: list(target.columns)})

    @cached_property
    def _slot_names(self) -> list[str]:
        """Each slot's column name: its tables' one name, unless several hold it or another slot
        has that name too (then ``_cdc_slot_N``, as any slot of several names)."""
        single = [
            next(iter(set(s.names.values()))) if len(set(s.names.values())) == 1 else None
            for s in self._slots
        ]
        counted = Counter(single)
        return [
            name if name is not None and counted[name] == 1 else f"{SLOT_PREFIX}{i}"
            for i, name in enumerate(single)
        ]

    @property
    def slots(self) -> dict[str, ColumnType]:
        """Each slot's column name in the group's rows and its type."""
        return {n: s.ctype for n, s in zip(self._slot_names, self._slots, strict=True)}

    def sources(self, slot: str) -> dict[str, str]:
        """The column each table keeps in ``slot``."""
        return dict(self._slots[self._slot_names.index(slot)].names)

    def _shared(self, index: int) -> bool:
        """Whether every table of the group keeps its column of one name in slot ``index``."""
        names = self._slots[index].names
        return len(names) == len(self._columns) and len(set(names.values())) == 1

    def name_column(self, slot: str) -> str | None:
        """The column naming, per change, the image value ``slot`` holds (``names_rows``: null
        for a table without a column there, whose image may still carry a value of that name, a
        column the table lacks); None where every table keeps one name there."""
        index = self._slot_names.index(slot)
        return None if self._shared(index) else f"{NAME_PREFIX}{index}"

    def names_rows(self, tables: list[str]) -> tuple[list[str], list[tuple[str | None, ...]]]:
        """The names the tables give the slots not ``_shared``: the columns (the table first)
        and one row per table, to join with the changes."""
        named = [i for i in range(len(self._slots)) if not self._shared(i)]
        columns = ["_cdc_target", *(f"{NAME_PREFIX}{i}" for i in named)]
        rows = [(t, *(self._slots[i].names.get(t) for i in named)) for t in tables]
        return columns, rows

    def slot_of(self, table: str) -> dict[str, str]:
        """Each of ``table``'s columns (in its order) and the slot holding it."""
        slots = {
            s.names[table]: slot
            for slot, s in zip(self._slot_names, self._slots, strict=True)
            if table in s.names
        }
        return {column: slots[column] for column in self._columns[table]}


def group_layout(tables: list[TargetTable], most: int | None = None) -> GroupLayout | None:
    """The layout of a group of ``tables`` (in order), or None when it needs more than ``most``
    slots."""
    layout: GroupLayout | None = GroupLayout()
    for target in tables:
        if layout is None:
            return None
        layout = layout.placed(target, most)
    return layout
