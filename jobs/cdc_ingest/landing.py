"""Landing zones: where connectors drop topic dumps, on a shared filesystem or S3.

Listing and fingerprinting run on the driver; reading file bytes also runs inside Spark's Python
workers (see ``reader``), so everything here is plain Python with boto3 imported lazily.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

LANDED_SUFFIXES = (".json", ".jsonl", ".txt")
HASH_CHUNK = 8 * 1024 * 1024


class LandingError(RuntimeError):
    """The landing zone cannot be listed or a landed file cannot be read."""


@dataclass(frozen=True)
class LandedFile:
    """One landed dump file: its URI, size, a content fingerprint and its object time.

    ``modified`` (epoch seconds: file mtime, S3 LastModified) is when the file landed; it is not
    part of the file's identity.
    """

    uri: str
    size: int
    fingerprint: str | None = None
    modified: float | None = field(default=None, compare=False)

    def with_fingerprint(self) -> LandedFile:
        """This file with its content fingerprint computed (local files are hashed on demand)."""
        if self.fingerprint is not None:
            return self
        return LandedFile(self.uri, self.size, _hash_local(_local_path(self.uri)), self.modified)


def is_landed_name(name: str) -> bool:
    """Whether a file name is a topic dump: .json, .jsonl or .txt, optionally gzipped."""
    lowered = name.lower()
    if lowered.endswith(".gz"):
        lowered = lowered[:-3]
    return lowered.endswith(LANDED_SUFFIXES) and not os.path.basename(lowered).startswith(".")


def s3_endpoint() -> str | None:
    """The S3 endpoint override (AWS_ENDPOINT_URL), e.g. MinIO or a loopback test server."""
    return os.environ.get("AWS_ENDPOINT_URL") or None


def s3_client(endpoint: str | None = None) -> Any:
    """A boto3 S3 client for ``endpoint`` (default: AWS_ENDPOINT_URL, else AWS)."""
    try:
        import boto3
    except ImportError as exc:  # pragma: no cover - boto3 is a declared dependency
        raise LandingError("s3:// landing zones need boto3: pip install boto3") from exc
    return boto3.client("s3", endpoint_url=endpoint or s3_endpoint())


def _local_path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def list_landed(landing: str) -> list[LandedFile]:
    """Every landed file under a landing URI, in path order.

    Args:
        landing: ``file:///abs/dir`` or ``s3://bucket/prefix``.

    Raises:
        LandingError: when the zone does not exist or cannot be listed.
    """
    if landing.startswith("s3://"):
        return _list_s3(landing)
    root = _local_path(landing)
    if not root.is_dir():
        raise LandingError(f"landing zone {landing} is not a readable directory")
    files: list[LandedFile] = []
    try:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and is_landed_name(p.name)):
            stat = path.stat()
            files.append(LandedFile(path.as_uri(), stat.st_size, modified=stat.st_mtime))
    except OSError as exc:
        raise LandingError(f"landing zone {landing}: {exc}") from exc
    return files


def _hash_local(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _list_s3(landing: str) -> list[LandedFile]:
    parsed = urlparse(landing)
    bucket, prefix = parsed.netloc, parsed.path.lstrip("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    client = s3_client()
    files: list[LandedFile] = []
    try:
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                if is_landed_name(obj["Key"]):
                    # The ETag is the object's MD5 for single-part uploads: a content fingerprint
                    # that costs no download.
                    etag = str(obj.get("ETag", "")).strip('"')
                    uri, modified = f"s3://{bucket}/{obj['Key']}", obj["LastModified"].timestamp()
                    files.append(LandedFile(uri, int(obj["Size"]), f"etag:{etag}", modified))
    except Exception as exc:
        raise LandingError(f"landing zone {landing} cannot be listed: {exc}") from exc
    return sorted(files, key=lambda f: f.uri)


def read_bytes(uri: str, endpoint: str | None = None) -> bytes:
    """The decompressed content of one landed file (``endpoint``: S3 endpoint override)."""
    if uri.startswith("s3://"):
        parsed = urlparse(uri)
        body = s3_client(endpoint).get_object(Bucket=parsed.netloc, Key=parsed.path.lstrip("/"))[
            "Body"
        ]
        data: bytes = body.read()
    else:
        data = _local_path(uri).read_bytes()
    if uri.lower().endswith(".gz"):
        data = gzip.decompress(data)
    return data


def iter_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Non-blank lines of a dump with their 1-based line numbers (blank lines are not records)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for number, line in enumerate(data.split(b"\n"), start=1):
        line = line.rstrip(b"\r")
        if line.strip():
            yield number, line
