"""Checks of a batch's planned files before and after they are read: a file deleted or changed
since it was planned is left out of the batch with its reason (``FileCheck``), and planned again
by the next batch."""

from __future__ import annotations

from dataclasses import dataclass

from cdc_ingest.landing.zones import (
    LandedFile,
    S3Access,
    hash_local,
    local_path,
    s3_client,
    s3_head,
)

MISSING, CHANGED = "missing", "changed"


@dataclass(frozen=True)
class FileCheck:
    """Why a planned file is left out of its batch: ``missing`` or ``changed``, and the detail."""

    status: str
    reason: str


def check_planned(
    files: list[LandedFile], rehash: bool, s3: S3Access | None = None
) -> tuple[dict[int, FileCheck], list[LandedFile]]:
    """The planned files (by index) that are gone or no longer hold what was planned, and the
    planned files with the modification time seen now (for :func:`changed_while_read`).

    A local file is compared by size, then by content fingerprint when its modification time
    differs from the listing's or ``rehash`` is set (a resumed plan, listed by an earlier run);
    an S3 object by size and ETag (``rehash``: a resumed plan; a fresh plan's objects are read
    with ``If-Match`` on the listed ETag instead).
    """
    found: dict[int, FileCheck] = {}
    seen = list(files)
    remote = [(i, f) for i, f in enumerate(files) if f.uri.startswith("s3://")]
    for i, landed in enumerate(files):
        if landed.uri.startswith("s3://"):
            continue
        path = local_path(landed.uri)
        try:
            stat = path.stat()
        except FileNotFoundError:
            found[i] = FileCheck(MISSING, "deleted after it was planned")
            continue
        if stat.st_size != landed.size:
            found[i] = FileCheck(
                CHANGED, f"{landed.size} bytes when planned, {stat.st_size} bytes when read"
            )
        elif landed.fingerprint is not None and (rehash or stat.st_mtime != landed.modified):
            now = hash_local(path)
            if now != landed.fingerprint:
                found[i] = FileCheck(CHANGED, "same size, other content than when planned")
        seen[i] = LandedFile(landed.uri, landed.size, landed.fingerprint, stat.st_mtime)
    if remote and rehash:
        from concurrent.futures import ThreadPoolExecutor

        client = s3_client(s3)
        with ThreadPoolExecutor(max_workers=16) as pool:
            heads = list(pool.map(lambda f: s3_head(f[1].uri, client), remote))
        for (i, landed), head in zip(remote, heads, strict=True):
            if head is None:
                found[i] = FileCheck(MISSING, "deleted after it was planned")
            elif head[0] != landed.size or (landed.fingerprint not in (None, head[1])):
                found[i] = FileCheck(
                    CHANGED,
                    f"{landed.size} bytes ({landed.fingerprint}) when planned, "
                    f"{head[0]} bytes ({head[1]}) when read",
                )
    return found, seen


def changed_while_read(files: list[LandedFile], read: list[int]) -> list[str]:
    """Local files among ``read`` whose size or modification time moved since they were listed."""
    changed: list[str] = []
    for i in read:
        landed = files[i]
        if landed.uri.startswith("s3://") or landed.modified is None:
            continue
        try:
            stat = local_path(landed.uri).stat()
        except FileNotFoundError:
            changed.append(landed.uri)
            continue
        if stat.st_size != landed.size or stat.st_mtime != landed.modified:
            changed.append(landed.uri)
    return changed
