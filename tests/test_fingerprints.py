"""Landed files' fingerprints: large files hashed several at a time, in order, never far ahead
of the plan; small ones where the plan reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
from cdc_ingest.landing.zones import HASHED_APART, LandedFile, fingerprinted

# FIPS 180-2's SHA-256 test vectors: "abc", and one million times "a"; and SHA-256 of no bytes.
ABC = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
MILLION_A = "sha256:cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
EMPTY = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
LARGE = b"a" * 1_000_000


def _landed(path: Path, content: bytes | None, size: int | None = None) -> LandedFile:
    if content is not None:
        path.write_bytes(content)
    return LandedFile(path.as_uri(), len(content or b"") if size is None else size)


def test_files_are_fingerprinted_in_order_with_unreadable_ones_in_place(tmp_path: Path) -> None:
    assert len(LARGE) >= HASHED_APART
    files = [
        _landed(tmp_path / "large.jsonl", LARGE),
        _landed(tmp_path / "gone.jsonl", None, size=len(LARGE)),
        _landed(tmp_path / "abc.jsonl", b"abc"),
        _landed(tmp_path / "large-too.jsonl", LARGE),
        _landed(tmp_path / "empty.jsonl", b""),
        LandedFile("s3://bucket/t.jsonl", 3, "etag:900150983cd24fb0d6963f7d28e17f72"),
    ]
    results = list(fingerprinted(files, at_once=2))
    assert [landed.uri for landed, _ in results] == [f.uri for f in files]
    assert [landed.fingerprint for landed, _ in results] == [
        MILLION_A,
        None,
        ABC,
        MILLION_A,
        EMPTY,
        "etag:900150983cd24fb0d6963f7d28e17f72",
    ]
    errors = [error for _, error in results]
    assert isinstance(errors[1], FileNotFoundError)
    assert [e for i, e in enumerate(errors) if i != 1] == [None] * 5


@pytest.mark.parametrize("content", [LARGE, b"abc"], ids=["large files", "small files"])
def test_a_file_is_hashed_only_once_the_plan_is_two_files_from_it(
    tmp_path: Path, content: bytes
) -> None:
    files = [_landed(tmp_path / f"{i}.jsonl", content) for i in range(4)]
    expected = MILLION_A if content == LARGE else ABC
    results = fingerprinted(files, at_once=2)
    first, error = next(results)
    assert (first.fingerprint, error) == (expected, None)
    # Files 0 and 1 were taken; file 2 is read only now, after it was removed.
    (tmp_path / "2.jsonl").unlink()
    rest = list(results)
    assert [landed.fingerprint for landed, _ in rest] == [expected, None, expected]
    assert isinstance(rest[1][1], FileNotFoundError)
