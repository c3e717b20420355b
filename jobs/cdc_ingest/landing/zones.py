"""Landing zones: where connectors drop topic dumps, on a shared filesystem or S3.

Listing and fingerprinting run on the driver; reading file bytes also runs inside Spark's Python
workers (see ``reader``), so everything here is plain Python with boto3 imported lazily.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISDIR, S_ISFIFO, S_ISREG, S_ISSOCK
from typing import Any
from urllib.parse import unquote, urlparse

from cdc_ingest.run_environment import environ as run_environ

LANDED_SUFFIXES = (".json", ".jsonl", ".txt")
# A landing zone's file format (the pipeline's ``file_format``) -> the names of its files.
FILE_SUFFIXES = {"json": LANDED_SUFFIXES, "avro": (".avro",), "parquet": (".parquet",)}
# Confluent's S3 sink writes a record's key and headers, when asked to (``store.kafka.keys``,
# ``store.kafka.headers``), into companion files named after the values' file:
# ``t+0+42.keys.avro`` and ``t+0+42.headers.avro`` beside ``t+0+42.avro``, record for record.
COMPANION_VIEWS = (".keys", ".headers")
HASH_CHUNK = 8 * 1024 * 1024
# Landed files at least this large are hashed on threads of their own, at most this many at once
# (each holds a chunk): a smaller file costs less to hash than to hand to a thread.
HASHED_APART = 1_000_000
HASHING_THREADS = 8


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
        return LandedFile(self.uri, self.size, hash_local(local_path(self.uri)), self.modified)


def fingerprinted(
    files: Sequence[LandedFile], at_once: int | None = None
) -> Iterator[tuple[LandedFile, OSError | None]]:
    """Each file with its fingerprint (``with_fingerprint``), in order, or unchanged with the
    error that kept it from being read.

    Files of ``HASHED_APART`` bytes or more are hashed up to ``at_once`` at a time (default: the
    machine's cores, at most ``HASHING_THREADS``), since hashlib releases the GIL; smaller ones in
    the caller's thread, where they cost less than the hand-off. Nothing is read more than
    ``at_once`` files ahead of the caller, who may stop early.
    """
    workers = max(1, min(at_once or min(os.cpu_count() or 1, HASHING_THREADS), len(files)))
    if workers == 1 or all(f.fingerprint or f.size < HASHED_APART for f in files):
        for landed in files:
            yield _fingerprint(landed)
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="fingerprint") as pool:
        ahead: deque[tuple[LandedFile, Future[tuple[LandedFile, OSError | None]] | None]]
        ahead = deque()
        rest = iter(files)
        try:
            while True:
                while len(ahead) < workers and (upcoming := next(rest, None)) is not None:
                    apart = upcoming.fingerprint is None and upcoming.size >= HASHED_APART
                    ahead.append((upcoming, pool.submit(_fingerprint, upcoming) if apart else None))
                if not ahead:
                    return
                landed, hashing = ahead.popleft()
                yield hashing.result() if hashing is not None else _fingerprint(landed)
        finally:
            for _, waiting in ahead:
                if waiting is not None:
                    waiting.cancel()


def _fingerprint(landed: LandedFile) -> tuple[LandedFile, OSError | None]:
    try:
        return landed.with_fingerprint(), None
    except OSError as exc:
        return landed, exc


def is_landed_name(name: str, file_format: str = "json") -> bool:
    """Whether a file name is a topic dump: .json, .jsonl or .txt, optionally gzipped (``json``),
    .avro (``avro``) or .parquet (``parquet``); hidden files and a sink's key and header
    companions never are."""
    lowered = name.lower()
    if lowered.endswith(".gz") and file_format == "json":
        lowered = lowered[:-3]
    suffixes = FILE_SUFFIXES[file_format]
    if file_format != "json" and companion_view(lowered) is not None:
        return False
    return lowered.endswith(suffixes) and not os.path.basename(lowered).startswith(".")


def companion_view(name: str) -> str | None:
    """``.keys`` or ``.headers`` for a companion file of a sink's values file, else None."""
    stem = name.rsplit(".", 1)[0]
    return next((view for view in COMPANION_VIEWS if stem.lower().endswith(view)), None)


def companion_uri(uri: str, view: str) -> str:
    """The ``view`` companion of a values file: ``t+0+42.avro`` → ``t+0+42.keys.avro``."""
    stem, extension = uri.rsplit(".", 1)
    return f"{stem}{view}.{extension}"


# Where the job's S3 settings came from, for error messages; set by the Airflow task that resolved
# an Airflow AWS connection into the standard variables of spark-submit's environment.
S3_SOURCE_ENV = "CDC_INGEST_S3_SOURCE"
ADDRESSING_STYLE_ENV = "CDC_INGEST_S3_ADDRESSING_STYLE"
ADDRESSING_STYLES = ("auto", "path", "virtual")


@dataclass(frozen=True)
class S3Access:
    """How to reach an S3 landing zone: endpoint, region and credentials.

    Unset fields fall back to boto3's own chain (profile, instance role). The whole value travels
    with each file to Spark's Python workers, which may not share the driver's environment.
    """

    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    addressing_style: str | None = None
    source: str = "the standard AWS environment variables"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> S3Access:
        """From the standard AWS variables (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...)."""
        env = run_environ() if environ is None else environ
        return cls(
            endpoint=env.get("AWS_ENDPOINT_URL") or None,
            region=env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or None,
            access_key_id=env.get("AWS_ACCESS_KEY_ID") or None,
            secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
            session_token=env.get("AWS_SESSION_TOKEN") or None,
            addressing_style=env.get(ADDRESSING_STYLE_ENV) or None,
            source=env.get(S3_SOURCE_ENV) or cls.source,
        )

    def to_env(self) -> dict[str, str]:
        """These settings as the standard variables (plus ours), for a child process."""
        values = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_SESSION_TOKEN": self.session_token,
            ADDRESSING_STYLE_ENV: self.addressing_style,
            S3_SOURCE_ENV: self.source,
        }
        return {k: v for k, v in values.items() if v}

    def __repr__(self) -> str:
        # Never print the secret (tracebacks, Spark plans and logs show reprs).
        return f"S3Access(endpoint={self.endpoint!r}, region={self.region!r}, from {self.source})"


def s3_client(access: S3Access | None = None) -> Any:
    """A boto3 S3 client for ``access`` (default: the standard AWS environment variables)."""
    try:
        import boto3
        from botocore.config import Config as BotoConfig
    except ImportError as exc:  # pragma: no cover - boto3 is a declared dependency
        raise LandingError("s3:// landing zones need boto3: pip install boto3") from exc
    access = access or S3Access.from_env()
    # MinIO usually needs path-style requests, Aliyun OSS virtual-hosted ones.
    s3_options: Any = {"addressing_style": access.addressing_style}
    config = BotoConfig(s3=s3_options) if access.addressing_style else None
    return boto3.client(
        "s3",
        endpoint_url=access.endpoint,
        region_name=access.region,
        aws_access_key_id=access.access_key_id,
        aws_secret_access_key=access.secret_access_key,
        aws_session_token=access.session_token,
        config=config,
    )


def local_path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def list_landed(
    landing: str,
    s3: S3Access | None = None,
    file_format: str = "json",
    not_files: dict[str, str] | None = None,
) -> list[LandedFile]:
    """Every landed file under a landing URI, in path order.

    Args:
        landing: ``file:///abs/dir`` or ``s3://bucket/prefix``.
        s3: how to reach S3 (default: the standard AWS environment variables).
        file_format: the zone's files (see ``FILE_SUFFIXES``).
        not_files: receives the entries named like landed files that are no regular files
            (directories, FIFOs, links to nothing...), with what each is: never read, named.

    Raises:
        LandingError: when the zone does not exist or cannot be listed.
    """
    if landing.startswith("s3://"):
        return _list_s3(landing, s3 or S3Access.from_env(), file_format)
    root = local_path(landing)
    if not root.is_dir():
        raise LandingError(f"landing zone {landing} is not a readable directory")
    files: list[LandedFile] = []
    odd = {} if not_files is None else not_files
    try:
        named = sorted(p for p in root.rglob("*") if is_landed_name(p.name, file_format))
    except OSError as exc:
        raise LandingError(f"landing zone {landing}: {exc}") from exc
    for path in named:
        try:
            stat = path.stat()
        except OSError as exc:
            gone = path.is_symlink()
            odd[path.as_uri()] = "a link to nothing" if gone else f"not readable ({exc.strerror})"
            continue
        if not S_ISREG(stat.st_mode):
            odd[path.as_uri()] = _entry_kind(stat.st_mode)
            continue
        files.append(LandedFile(path.as_uri(), stat.st_size, modified=stat.st_mtime))
    return files


def _entry_kind(mode: int) -> str:
    kinds = {S_ISDIR: "a directory", S_ISFIFO: "a FIFO", S_ISSOCK: "a socket"}
    return next((k for test, k in kinds.items() if test(mode)), "a device or other special file")


def hash_local(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _list_s3(landing: str, access: S3Access, file_format: str = "json") -> list[LandedFile]:
    parsed = urlparse(landing)
    bucket, prefix = parsed.netloc, parsed.path.lstrip("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    client = s3_client(access)
    files: list[LandedFile] = []
    try:
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                if is_landed_name(obj["Key"], file_format):
                    # The ETag is the object's MD5 for single-part uploads: a content fingerprint
                    # that costs no download.
                    etag = str(obj.get("ETag", "")).strip('"')
                    uri, modified = f"s3://{bucket}/{obj['Key']}", obj["LastModified"].timestamp()
                    files.append(LandedFile(uri, int(obj["Size"]), f"etag:{etag}", modified))
    except Exception as exc:
        where = f" at {access.endpoint}" if access.endpoint else ""
        raise LandingError(
            f"landing zone {landing} cannot be listed{where} with the credentials of "
            f"{access.source}: {exc}"
        ) from exc
    return sorted(files, key=lambda f: f.uri)


def s3_etag(fingerprint: str | None) -> str | None:
    """The ETag an S3 object was listed with (its fingerprint), quoted as S3 compares it."""
    if fingerprint is None or not fingerprint.startswith("etag:"):
        return None
    return '"' + fingerprint.removeprefix("etag:") + '"'


def read_bytes(
    uri: str,
    s3: S3Access | None = None,
    etag: str | None = None,
    byte_range: str | None = None,
) -> bytes:
    """The decompressed content of one landed file.

    Args:
        uri: the file.
        s3: how to reach S3 (default: the environment).
        etag: an S3 object is read only if it still has this ETag.
        byte_range: only these bytes, as HTTP spells a range: ``bytes=0-65535`` (the first 64 KiB),
            ``bytes=-8`` (the last 8); never decompressed.

    Raises:
        LandingError: the file cannot be read, or the object no longer has ``etag``.
        EOFError, gzip.BadGzipFile, zlib.error: a ``.gz`` file is truncated or corrupt.
    """
    if uri.startswith("s3://"):
        parsed = urlparse(uri)
        access = s3 or S3Access.from_env()
        conditions = {"IfMatch": etag} if etag else {}
        if byte_range:
            conditions["Range"] = byte_range
        try:
            body = s3_client(access).get_object(
                Bucket=parsed.netloc, Key=parsed.path.lstrip("/"), **conditions
            )["Body"]
            data: bytes = body.read()
        except Exception as exc:
            status = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if status == "PreconditionFailed":
                raise LandingError(
                    f"landed file {uri} changed after it was listed: rerun, and the batch leaves "
                    "it out (the next batch applies its new content)"
                ) from exc
            raise LandingError(
                f"landed file {uri} cannot be read with the credentials of {access.source}: {exc}"
            ) from exc
    elif byte_range:
        return _local_range(local_path(uri), byte_range)
    else:
        data = local_path(uri).read_bytes()
    if uri.lower().endswith(".gz") and not byte_range:
        data = gzip.decompress(data)
    return data


def _local_range(path: Path, byte_range: str) -> bytes:
    first, _, last = byte_range.removeprefix("bytes=").partition("-")
    with path.open("rb") as handle:
        if not first:  # the last ``last`` bytes
            handle.seek(max(0, path.stat().st_size - int(last)))
            return handle.read()
        handle.seek(int(first))
        return handle.read(int(last) - int(first) + 1 if last else -1)


def iter_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Non-blank lines of a dump with their 1-based line numbers (blank lines are not records)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for number, line in enumerate(data.split(b"\n"), start=1):
        line = line.rstrip(b"\r")
        if line.strip():
            yield number, line


def s3_head(uri: str, client: Any) -> tuple[int, str] | None:
    """(size, ``etag:`` fingerprint) of an S3 object, or None when it no longer exists."""
    parsed = urlparse(uri)
    try:
        head = client.head_object(Bucket=parsed.netloc, Key=parsed.path.lstrip("/"))
    except Exception as exc:
        status = getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 404:
            return None
        raise LandingError(f"landed file {uri} cannot be checked: {exc}") from exc
    return int(head["ContentLength"]), "etag:" + str(head.get("ETag", "")).strip('"')
