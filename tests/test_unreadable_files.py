"""A landed file that cannot be read is left out with its reason and the rest of the batch flows;
entries named like landed files that are no files are named in the summary (issue 51, defect
11: planning stopped with a traceback, every run, until the file was fixed)."""

from __future__ import annotations

import json
import os

CUSTOMER = {
    "before": None,
    "after": {"id": 1, "name": "a"},
    "source": {"db": "shop", "table": "customers", "ts_ms": 1},
    "op": "c",
    "ts_ms": 1,
}


def _unreadable(path):
    """A file this process cannot read: as root (who reads any mode), a link to another
    process's memory, which the kernel refuses to open; otherwise mode 000."""
    if os.geteuid() == 0:
        os.symlink("/proc/1/mem", path)
    else:
        path.write_text(json.dumps(CUSTOMER) + "\n")
        path.chmod(0)


def test_an_unreadable_file_is_left_out_and_planned_again(lake):
    landing = lake.add_pipeline("shop", "debezium-json", keys={"customers": ["id"]})
    lake.land("shop", "001.json", [CUSTOMER])
    _unreadable(landing / "002.json")
    (landing / "003.json").mkdir()
    os.mkfifo(landing / "004.json")
    os.symlink(landing / "gone.json", landing / "005.json")

    summary = lake.run("shop")

    assert lake.rows("customers") == [{"id": 1, "name": "a"}]
    assert summary.files == [(landing / "001.json").as_uri()]
    [(uri, why)] = summary.unreadable_files.items()
    assert uri == (landing / "002.json").as_uri() and why.startswith("cannot be read: ")
    assert summary.not_files == {
        (landing / "003.json").as_uri(): "a directory",
        (landing / "004.json").as_uri(): "a FIFO",
        (landing / "005.json").as_uri(): "a link to nothing",
    }
    text = summary.render()
    assert "1 files left out, unreadable (planned again next run):" in text
    assert "3 files named like landed files are no files (not read):" in text

    # Fixed, the file is planned and applied by the next batch.
    (landing / "002.json").unlink()
    second = {**CUSTOMER, "after": {"id": 2, "name": "b"}}
    lake.land("shop", "002.json", [second])
    summary = lake.run("shop")
    assert summary.files == [(landing / "002.json").as_uri()]
    assert lake.rows("customers") == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
