"""The benchmark's phase table names functions that exist: a refactor cannot break the bench."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from bench_phases import PHASES, REMAINDER


@pytest.mark.parametrize(("module", "attribute", "label", "parent"), PHASES)
def test_every_timed_phase_resolves(
    module: str, attribute: str, label: str, parent: str | None
) -> None:
    owner = importlib.import_module(module)
    for part in attribute.split("."):
        assert hasattr(owner, part), f"{module}.{attribute} ({label!r}) no longer exists"
        owner = getattr(owner, part)
    assert callable(owner)


def test_every_parent_is_a_phase() -> None:
    labels = {label for _, _, label, _ in PHASES}
    assert {parent for *_, parent in PHASES} - {None} <= labels
    assert set(REMAINDER) <= labels
