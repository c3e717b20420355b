"""``cdc-ingest setup``: the JVM side of an installation, the one command after ``pip install``.

It puts the job's JVM artifacts (:mod:`cdc_ingest.jars`) into the environment, resolved by their
Maven coordinates or copied from a directory (``--jars-dir``, for an image built without
network), then writes the driver's class archive (:mod:`cdc_ingest.jvm_archive`). It is safe to
rerun: artifacts in place are kept, and the archive is written again only when it is missing or
older than a jar. ``--check`` changes nothing and says what is missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from cdc_ingest.archive_workload import build_archive
from cdc_ingest.jars import (
    Artifact,
    EnvironmentProblem,
    jars_dir,
    job_artifacts,
    optional_artifacts,
    resolve,
)
from cdc_ingest.jvm_archive import archive_path


def artifacts() -> tuple[Artifact, ...]:
    """The installed Spark line's artifacts, the optional ones included."""
    return (*job_artifacts(), *optional_artifacts())


def missing_artifacts(directory: Path | None = None) -> list[Artifact]:
    """The artifacts not in ``directory`` (the environment's jars by default)."""
    directory = directory or jars_dir()
    return [a for a in artifacts() if not (directory / a.file_name).is_file()]


def copy_artifacts(source: Path, directory: Path) -> list[Artifact]:
    """Copy the artifacts missing from ``directory`` out of ``source``; returns those copied.

    Raises:
        EnvironmentProblem: naming the artifacts ``source`` lacks too; nothing was copied.
    """
    wanted = missing_artifacts(directory)
    absent = [a.file_name for a in wanted if not (source / a.file_name).is_file()]
    if absent:
        raise EnvironmentProblem(f"--jars-dir {source} lacks {', '.join(absent)}")
    directory.mkdir(parents=True, exist_ok=True)
    for artifact in wanted:
        shutil.copy2(source / artifact.file_name, directory / artifact.file_name)
    return wanted


def archive_is_current(directory: Path | None = None) -> bool:
    """Whether the class archive exists and is newer than every job jar."""
    archive = archive_path()
    if not archive.is_file():
        return False
    directory = directory or jars_dir()
    newest = max((directory / a.file_name).stat().st_mtime for a in job_artifacts())
    return archive.stat().st_mtime >= newest


def problems() -> list[str]:
    """What the installation lacks, one line each (``cdc-ingest setup --check``).

    Raises:
        EnvironmentProblem: a Spark line the job does not support.
    """
    found = [f"missing JVM artifact {a.coordinates}" for a in missing_artifacts()]
    if not found and not archive_is_current():
        found.append(f"the driver's class archive {archive_path()} is missing or out of date")
    return found


def setup(jars_from: Path | None = None, class_archive: bool = True) -> list[str]:
    """Put what is missing in place; returns what was done, one line each.

    Raises:
        EnvironmentProblem: an artifact cannot be had (Maven failed, or ``jars_from`` lacks it),
            or the class archive could not be written.
    """
    directory = jars_dir()
    done: list[str] = []
    if jars_from is not None:
        done += [f"copied {a.coordinates}" for a in copy_artifacts(jars_from, directory)]
    else:
        wanted = missing_artifacts(directory)
        resolve(artifacts(), directory)
        done += [f"resolved {a.coordinates}" for a in wanted]
    if class_archive and not archive_is_current(directory):
        try:
            done.append(f"wrote the driver's class archive {build_archive(archive_path())}")
        except RuntimeError as exc:
            last = str(exc).strip().splitlines()[-1:] or [""]
            raise EnvironmentProblem(f"the class archive was not written: {last[0]}") from None
    return done or [f"nothing to do: every JVM artifact is in {directory}"]
