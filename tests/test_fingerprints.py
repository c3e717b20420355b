"""Landed files' fingerprints: hashed several at a time, in order, never far ahead of the plan."""

from __future__ import annotations

from pathlib import Path

from cdc_ingest.landing.zones import LandedFile, fingerprinted

# FIPS 180-2's SHA-256 test vector for "abc", and SHA-256 of no bytes.
ABC = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
EMPTY = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def _landed(path: Path, content: bytes | None) -> LandedFile:
    if content is not None:
        path.write_bytes(content)
    return LandedFile(path.as_uri(), len(content or b""))


def test_files_are_fingerprinted_in_order_with_unreadable_ones_in_place(tmp_path: Path) -> None:
    files = [
        _landed(tmp_path / "a.jsonl", b"abc"),
        _landed(tmp_path / "gone.jsonl", None),
        _landed(tmp_path / "empty.jsonl", b""),
        LandedFile("s3://bucket/t.jsonl", 3, "etag:900150983cd24fb0d6963f7d28e17f72"),
    ]
    results = list(fingerprinted(files, at_once=2))
    assert [landed.uri for landed, _ in results] == [f.uri for f in files]
    assert [landed.fingerprint for landed, _ in results] == [
        ABC,
        None,
        EMPTY,
        "etag:900150983cd24fb0d6963f7d28e17f72",
    ]
    errors = [error for _, error in results]
    assert isinstance(errors[1], FileNotFoundError)
    assert errors[0] is None and errors[2] is None and errors[3] is None


def test_a_file_is_hashed_only_once_the_plan_is_two_files_from_it(tmp_path: Path) -> None:
    files = [_landed(tmp_path / f"{i}.jsonl", b"abc") for i in range(4)]
    results = fingerprinted(files, at_once=2)
    first, error = next(results)
    assert (first.fingerprint, error) == (ABC, None)
    # Files 0 and 1 were taken; file 2 is read only now, after it was removed.
    (tmp_path / "2.jsonl").unlink()
    rest = list(results)
    assert [landed.fingerprint for landed, _ in rest] == [ABC, None, ABC]
    assert isinstance(rest[1][1], FileNotFoundError)

