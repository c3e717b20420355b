"""The workload that writes the driver's class archive (``cdc_ingest.jvm_archive``): a small
pipeline's two batches in a JVM that dumps its classes at exit.

It runs the whole job (``run.batch``), so it lives here beside the other entries that do, and
the archive's low module, which every driver's options read, imports nothing of the job.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cdc_ingest.jvm_archive import ARCHIVE_VARIABLE, CLASS_LOG, archive_path


def _workload(root: Path) -> None:
    """A small pipeline's two batches on a session of the job's own settings."""
    import yaml

    from cdc_ingest.config import load_config
    from cdc_ingest.run.batch import run_pipeline
    from cdc_ingest.spark_session import build_session

    landing = root / "landing"
    landing.mkdir()
    config = root / "pipelines.yaml"
    catalog = {"name": "archive", "uri": f"sqlite:///{root / 'catalog.db'}"}
    catalog["warehouse"] = (root / "warehouse").as_uri()
    pipeline = {"name": "shop", "format": "canal-json", "landing": landing.as_uri()}
    doc = {"catalog": catalog, "pipelines": [{**pipeline, "namespace": "ods"}]}
    config.write_text(yaml.safe_dump(doc))
    loaded = load_config(config)
    spark = build_session(loaded.catalog, app_name="cdc-ingest-jvm-archive")
    for number, lines in enumerate(_batches(), start=1):
        (landing / f"{number:03d}.json").write_text("".join(line + "\n" for line in lines))
        run_pipeline(spark, loaded, "shop")
    _link_loaded(spark, root / CLASS_LOG)
    spark.stop()


def _link_loaded(spark: Any, log: Path) -> None:
    """Link each class the workload's JVM loaded from a jar (``log``: its class loading).

    A dynamic archive takes only linked classes. About 1,100 of the Iceberg runtime's were loaded
    but never linked (the verifier loads the classes a method names to check it), so a cold run
    read them from the jar again; linked here, nearly all of them come from the archive.
    Reflecting on a class's methods links it without running
    its static initializer."""
    from cdc_ingest import spark_jvm

    loaded = (line.split("] ", 1)[-1].split(" source: ") for line in log.read_text().splitlines())
    spark_jvm.link_classes(
        spark,
        (f[0] for f in loaded if len(f) == 2 and f[1].startswith(("file:", "jar:"))),
    )


def _batches() -> list[list[str]]:
    """Canal lines of two batches: a created table; an update, a delete, an ALTER, a bad line."""

    def message(kind: str, es: int, key: int = 0, value: str = "", sql: str = "") -> str:
        row = {"id": str(key), "v": value}
        return json.dumps(
            {
                "data": None if sql else [row],
                "database": "shop",
                "table": "items",
                "pkNames": None if sql else ["id"],
                "isDdl": bool(sql),
                "type": kind,
                "es": es,
                "ts": es,
                "sql": sql,
                "mysqlType": None if sql else {"id": "int", "v": "varchar(20)"},
                "old": None,
            }
        )

    first = [message("INSERT", 1, 1, "a"), message("INSERT", 2, 2, "b")]
    alter = message("ALTER", 5, sql="ALTER TABLE items ADD COLUMN n INT")
    second = [message("UPDATE", 3, 1, "a2"), message("DELETE", 4, 2, "b"), alter, "not json"]
    return [first, second]


def build_archive(path: Path | None = None) -> Path:
    """Write the archive: the workload runs in a child process whose JVM dumps its classes at
    exit; this process reaps every descendant (a child subreaper), so the file is complete when
    it is moved into place."""
    path = path or archive_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    # Linux: orphans of the workload (its JVM outlives the Python that started it) come here.
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    with tempfile.TemporaryDirectory(prefix="cdc-ingest-jvm-archive-") as root:
        dump = f"-XX:ArchiveClassesAtExit={partial}"
        logged = f"-Xlog:class+load=info:file={Path(root) / CLASS_LOG}"
        env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{options} {dump} {logged}"}
        env.pop(ARCHIVE_VARIABLE, None)
        command = [sys.executable, "-m", __name__, "--workload", root]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        while True:
            try:
                os.wait()
            except ChildProcessError:
                break
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the JVM archive was not written:\n{done.stderr[-3000:]}")
    partial.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--workload"]:
        _workload(Path(args[1]))
        return 0
    path = archive_path()
    path.unlink(missing_ok=True)  # the workload's JVM must not map an archive it replaces
    print(f"JVM class archive: {build_archive(path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
