"""Extract the sample messages of the vendor seed documents, verbatim, as JSON values."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SEEDS = Path(__file__).resolve().parent / "fixtures" / "seeds"
LINDORM_SEED = "000_46118e23b85e2eb1.txt"
ARCION_SEED = "003_48bb2d7831d2e70f.txt"


def json_blocks(text: str) -> list[Any]:
    """Top-level JSON objects/strings of a document: blocks that start and end at column 0."""
    pattern = re.compile(r'^\{\n.*?^\}$|^"default"$', re.S | re.M)
    return [json.loads(m.group(0)) for m in pattern.finditer(text)]


def seed_blocks(name: str) -> list[Any]:
    """The JSON samples of one seed document, in document order."""
    return json_blocks((SEEDS / name).read_text(encoding="utf-8"))


OMS_SEED = "001_2bb5df6066235caf.txt"
AEROSPIKE_SEED = "004_ab181bb61e89a860.txt"


def decoded_objects(name: str) -> list[Any]:
    """Every JSON object that starts at column 0 of a seed, decoded as far as it reaches.

    For documents whose nested objects also close at column 0, where ``json_blocks`` would stop
    at the first closing brace.
    """
    text = (SEEDS / name).read_text(encoding="utf-8")
    decoder = json.JSONDecoder()
    objects = []
    for match in re.finditer(r"^\{", text, re.M):
        try:
            obj, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        objects.append(obj)
    return objects


def fenced_samples(name: str, strip_comments: bool = False) -> list[str]:
    """The text of every fenced ```json block of a seed, one line each.

    Whitespace around each line is dropped and nothing else changes: invalid samples stay invalid
    and long numbers keep every digit. ``strip_comments`` removes ``// …`` explanations, which
    turns the documented DataWorks heartbeat into a message.
    """
    text = (SEEDS / name).read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    samples = []
    for block in blocks:
        lines = block.splitlines()
        if strip_comments:
            lines = [re.sub(r"\s*//.*$", "", line) for line in lines]
        samples.append("".join(line.strip() for line in lines))
    return samples


DATAHUB_SEED = "002_d284069e5de46625.txt"


def json_object_samples(name: str) -> list[Any]:
    """The complete JSON objects of a seed whose samples are not fenced, in document order.

    Seed 002 opens with an outline (``"schema": { ... }``) laid out like a sample; blocks that do
    not parse as JSON are such outlines and are skipped.
    """
    text = (SEEDS / name).read_text(encoding="utf-8")
    samples = []
    for block in re.finditer(r"^\{\n.*?^\}$", text, re.S | re.M):
        try:
            samples.append(json.loads(block.group(0)))
        except ValueError:
            continue
    return samples
