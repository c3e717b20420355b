"""The status page (Airflow plugin) in a real ``airflow api-server``, read by headless chromium.

Real ingest runs on the shared Spark session fill a catalog: pipeline ``shop`` (Canal JSON) runs
two batches with an ALTER TABLE, dead letters (one of them an HTML tag) and an update and a delete,
then gets a third file that stays pending; ``crm`` shares the namespace and never ran; ``ghost``
has neither landing zone nor namespace. The API server loads the plugin from the package's
``airflow.plugins`` entry point and the page is read by Debian's chromium.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from airflow_browser import (
    ApiServer,
    Elements,
    airflow_env,
    api_server,
    chromium_unavailable,
    dump_dom,
)
from conftest import FIXTURES, REPO, Lake

pytestmark = pytest.mark.slow

ALTER = (
    "/* app migration 42 */ ALTER TABLE orders ADD COLUMN qty INT NOT NULL DEFAULT 0 "
    "AFTER item, ADD INDEX idx_item (item)"
)
MYSQL_TYPES = {"id": "int(11)", "item": "varchar(32)", "qty": "int(11)"}


def canal(op: str, row: dict[str, str], es: int) -> dict[str, Any]:
    return {
        "data": [row],
        "database": "shop",
        "es": es,
        "id": es,
        "isDdl": False,
        "mysqlType": MYSQL_TYPES,
        "old": None,
        "pkNames": ["id"],
        "sql": "",
        "table": "orders",
        "ts": es + 5,
        "type": op,
    }


@pytest.fixture(scope="module")
def filled_lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """Two applied batches of ``shop``, one pending file, and two pipelines that never ran."""
    lake = Lake(root=tmp_path_factory.mktemp("status-lake"), spark=spark, catalog="status_lake")
    # Maintenance due after two commits of small or delete files (the batches make four).
    landing = lake.add_pipeline("shop", "canal-json", maintenance={"triggers": {"commits": 2}})
    shutil.copy(FIXTURES / "canal-json" / "schema-change.jsonl", landing / "shop-0001.jsonl")
    lake.land("shop", "shop-0002.jsonl", ['{"broken'])
    first = lake.run("shop")
    assert (first.batch_id, first.dead_lettered) == (1, 1)
    lake.land(
        "shop",
        "shop-0003.jsonl",
        [
            canal("UPDATE", {"id": "2", "item": "pear", "qty": "5"}, 1700000010000),
            canal("DELETE", {"id": "3", "item": "plum", "qty": "7"}, 1700000020000),
            canal("INSERT", {"id": "5", "item": "fig", "qty": "lots"}, 1700000030000),
            canal("INSERT", {"id": "4", "item": "kiwi", "qty": "1"}, 1700000100000),
            "<script>alert(1)</script>",
        ],
    )
    # The second batch merged by Spark (not rewritten whole): it leaves position-delete files.
    lake.route_at(rewritten_rows=0)
    second = lake.run("shop")
    assert second.batch_id == 2
    lake.land("shop", "shop-0004.jsonl", [canal("INSERT", {"id": "6"}, 1700000200000)])
    lake.add_pipeline("crm", "lindorm", keys={"customers": ["id"]})
    lake.pipelines.append(
        {
            "name": "ghost",
            "format": "lindorm",
            "landing": (lake.root / "no-such-landing").as_uri(),
            "namespace": "ghost_ns",
        }
    )
    lake.write_config()
    return lake


@pytest.fixture(scope="module")
def server(filled_lake: Lake, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    if reason := chromium_unavailable():
        pytest.skip(reason)
    home = tmp_path_factory.mktemp("airflow-status")
    with api_server(home, CDC_INGEST_CONFIG=str(filled_lake.config_path)) as running:
        yield running


def _count(lake: Lake, metadata: str) -> int:
    """Rows of one of an ``ods`` table's Iceberg metadata tables (``orders.delete_files``)."""
    lake.table("orders")  # the session knows the lake's catalog
    return lake.spark.sql(f"SELECT * FROM {lake.catalog}.ods.{metadata}").count()


def shop_page(server: ApiServer) -> Elements:
    return Elements(dump_dom(server.url + "/cdc-ingest/"))


def test_the_overview_lists_the_worst_pipeline_first(server: ApiServer, filled_lake: Lake) -> None:
    page = shop_page(server)
    overview = page.rows[("", "overview")]
    assert [(row[0], row[1]) for row in overview] == [
        ("ghost", "failing"),
        ("shop", "lagging"),
        ("crm", "ok"),
    ]
    ghost, shop, crm = overview
    missing = (filled_lake.root / "no-such-landing").as_uri()
    assert ghost[2] == (
        f"landing zone unreadable: LandingError: landing zone {missing} is not a readable directory"
    )
    # shop: its newest applied event is from 2023 and one file waits; batches 1 and 2
    # dead-lettered 1 and 2 lines.
    lag, reasons = shop[3], shop[2].split("; ")
    assert reasons == [
        f"lag {lag} over 01:00:00, 1 files pending",
        "3 dead letters in the last 2 batches",
    ]
    assert shop[4:] == ["1", "2", shop[6], "3"] and shop[6].endswith(" UTC")
    assert crm[2:] == ["no batch yet", "—", "0", "—", "—", "0"]
    # Per pipeline, charts of its last batches: one bar per batch.
    charts = {name: attrs for (pipeline, name), attrs in page.charts.items() if pipeline == "shop"}
    assert sorted(charts) == ["dead-letters", "duration", "lag", "rows"]
    assert {attrs["data-points"] for attrs in charts.values()} == {"2"}
    assert charts["dead-letters"]["data-max"] == "2"
    assert not [name for (pipeline, name) in page.charts if pipeline == "crm"]


def test_page_shows_each_pipeline_in_a_browser(server: ApiServer, filled_lake: Lake) -> None:
    page = shop_page(server)
    shop = {name: text for (pipeline, name), text in page.fields.items() if pipeline == "shop"}
    assert (shop["format"], shop["namespace"], shop["dag"]) == ("canal-json", "ods", "ingest_shop")
    assert shop["landing"] == filled_lake.landing("shop").as_uri()
    # orders: 3 live rows (1, 2, 4); batch 2 inserted id 4, updated 2, deleted 3, dead-lettered 5.
    # Its files as Iceberg's own metadata tables list them: the merge's position deletes on the
    # data files. (No history kept: its cell is empty.)
    deletes, data = (
        _count(filled_lake, f"orders.{kind}") for kind in ("delete_files", "data_files")
    )
    assert deletes >= 1
    # Batch 1's append of ids 1 and 2, its fill of the added column's default into them, its
    # merge of the changes after the DDL; batch 2's merge: four commits with small or delete files.
    due = "4 commits of small or delete files since its last maintenance (trigger: 2)"
    files = f"{deletes} on {data} data files; maintenance due: {due}"
    assert page.rows[("shop", "table")] == [["orders", "3", "2", "1", "1", "1", "1", files, "", ""]]
    assert filled_lake.table("orders").count() == 3
    # Checkpoints: batches 1 and 2 applied three files; shop-0004.jsonl landed afterwards.
    assert (shop["last-committed-batch"], shop["files-applied"]) == ("2", "3")
    assert shop["pending-files"] == "1"
    assert shop["pending-list"] == filled_lake.landing("shop").joinpath("shop-0004.jsonl").as_uri()
    assert shop["freshness"] == "2023-11-14 22:15:00 UTC"  # es 1700000100000, the newest applied
    days = int(shop["freshness-lag"].split("d ")[0])
    assert days > 1000, shop["freshness-lag"]
    last_batch = [shop[f"batch-{k}"] for k in ("id", "files", "lines", "messages")]
    assert last_batch == ["2", "1", "5", "3"]
    counts = [shop[f"batch-{k}"] for k in ("inserted", "updated", "deleted", "dead-lettered")]
    assert counts == ["1", "1", "1", "2"]
    assert shop["dead-letters-total"] == "3"
    letters = [
        (row[0], row[1].rsplit("/", 1)[1], row[2], row[4])
        for row in page.rows[("shop", "dead-letter")]
    ]
    assert letters == [
        ("2", "shop-0003.jsonl", "3", "column 'qty': value 'lots' is not a valid bigint"),
        ("2", "shop-0003.jsonl", "5", "line is not valid JSON"),
        ("1", "shop-0002.jsonl", "1", "line is not valid JSON"),
    ]
    # The raw line is shown as text, truncated, and never becomes markup.
    raws = [row[5] for row in page.rows[("shop", "dead-letter")]]
    assert raws[1] == "<script>alert(1)</script>" and "script" not in page.tags
    assert raws[0].startswith('{"data": [{"id": "5"') and raws[0].endswith("…")
    assert len(raws[0]) == 201
    assert page.rows[("shop", "ddl")] == [
        [
            "1",
            "orders",
            "2023-11-14 22:13:23 UTC",
            ALTER,
            "applied",
            "added qty bigint; existing rows set to its default 0",
        ]
    ]

    crm = {name: text for (pipeline, name), text in page.fields.items() if pipeline == "crm"}
    assert page.problems["crm"] == ["no tables yet: no batch of crm wrote a table"]
    assert (crm["namespace"], crm["pending-files"], crm["last-committed-batch"]) == (
        "ods",
        "0",
        "—",
    )
    assert ("crm", "table") not in page.rows

    ghost = {name: text for (pipeline, name), text in page.fields.items() if pipeline == "ghost"}
    missing = (filled_lake.root / "no-such-landing").as_uri()
    assert page.problems["ghost"] == [
        f"landing zone unreadable: LandingError: landing zone {missing} is not a readable "
        "directory",
        "namespace ghost_ns does not exist yet: no batch has run",
    ]
    assert ghost["pending-files"] == "—"


def test_json_endpoint_serves_the_same_data(server: ApiServer, filled_lake: Lake) -> None:
    reply = server.get("/cdc-ingest/status.json")
    assert reply.status == 200, reply.text
    data = json.loads(reply.text)
    assert data["error"] is None
    assert [p["name"] for p in data["pipelines"]] == ["shop", "crm", "ghost"]
    shop = data["pipelines"][0]
    assert shop["pending_count"] == 1 and shop["checkpoint"]["last_batch_id"] == 2
    assert shop["tables"] == [
        {
            "name": "orders",
            "exists": True,
            "rows": 3,
            "batch_id": 2,
            "inserted": 1,
            "updated": 1,
            "deleted": 1,
            "dead_lettered": 1,
            "history": None,
            "history_rows": None,
            "data_files": _count(filled_lake, "orders.data_files"),
            "delete_files": _count(filled_lake, "orders.delete_files"),
            "maintenance_due": (
                "4 commits of small or delete files since its last maintenance (trigger: 2)"
            ),
            "expectations": {},
        }
    ]
    assert shop["freshness"] == "2023-11-14T22:15:00+00:00"
    assert [d["reason"] for d in shop["dead_letters"]] == [
        "column 'qty': value 'lots' is not a valid bigint",
        "line is not valid JSON",
        "line is not valid JSON",
    ]
    assert [(d["statement"], d["status"]) for d in shop["ddl_history"]] == [(ALTER, "applied")]
    assert data["pipelines"][2]["pending_count"] is None


def test_airflow_ui_links_and_embeds_the_page(server: ApiServer) -> None:
    reply = server.get("/api/v2/plugins")
    assert reply.status == 200, reply.text
    [plugin] = [p for p in json.loads(reply.text)["plugins"] if p["name"] == "cdc_ingest"]
    assert "airflow.plugins" in plugin["source"]  # loaded from the package's entry point
    [view] = plugin["external_views"]
    assert (view["href"], view["url_route"], view["category"]) == (
        "cdc-ingest/",
        "cdc-ingest",
        "browse",
    )
    # Airflow's React UI, run by the browser, frames the page at /plugin/<url_route>.
    ui = dump_dom(server.url + "/plugin/cdc-ingest", virtual_time_ms=20000)
    frames = re.findall(r"<iframe[^>]*>", ui)
    assert (
        len(frames) == 1 and 'src="cdc-ingest/"' in frames[0] and 'title="CDC ingest"' in frames[0]
    )


def test_unreadable_catalog_and_bad_config_are_shown_not_raised(
    server: ApiServer, filled_lake: Lake
) -> None:
    config = filled_lake.config_path
    original = config.read_text()
    try:
        # A catalog "database" that is not one: the pipelines file itself.
        config.write_text(
            original.replace(f"sqlite:///{filled_lake.root / 'catalog.db'}", f"sqlite:///{config}")
        )
        assert server.get("/cdc-ingest/").status == 200
        page = shop_page(server)
        for pipeline in ("shop", "crm"):
            [problem] = page.problems[pipeline]
            assert problem.startswith("catalog unreadable: DatabaseError: "), problem
        # Without the checkpoints the pending files are unknown, not "every landed file".
        assert page.fields[("shop", "pending-files")] == "—"
        assert page.fields[("shop", "landing")] == filled_lake.landing("shop").as_uri()

        config.write_text("pipelines: [")
        page = shop_page(server)
        assert page.fields[("", "error")].startswith(f"ConfigError: {config}"), page.fields
        assert not page.problems
    finally:
        config.write_text(original)


def test_page_needs_an_airflow_login(filled_lake: Lake, tmp_path: Path) -> None:
    """Without all-admins: no token, no data; a viewer's token reads every pipeline."""
    home = tmp_path / "airflow-login"
    home.mkdir()
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({"viewer": "viewer-password"}))
    with api_server(
        home,
        all_admins=False,
        CDC_INGEST_CONFIG=str(filled_lake.config_path),
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="viewer:viewer",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(passwords),
    ) as server:
        anonymous = server.get("/cdc-ingest/status.json")
        assert (anonymous.status, json.loads(anonymous.text)) == (
            401,
            {"detail": "Not authenticated"},
        )
        page = server.get("/cdc-ingest/")
        assert page.status == 307 and "shop" not in page.text
        login = urlsplit(page.headers["location"])
        assert login.path == "/auth/login"
        assert parse_qs(login.query)["next"] == [server.url + "/cdc-ingest/"]

        token = server.get(
            "/auth/token", json_body={"username": "viewer", "password": "viewer-password"}
        )
        assert token.status == 201, token.text
        bearer = {"Authorization": "Bearer " + json.loads(token.text)["access_token"]}
        viewer = server.get("/cdc-ingest/status.json", headers=bearer)
        assert viewer.status == 200, viewer.text
        shop = json.loads(viewer.text)["pipelines"][0]
        assert (shop["name"], shop["pending_count"]) == ("shop", 1)


def test_plugin_loads_once_and_cheaply_with_the_repo_plugins_folder(tmp_path: Path) -> None:
    """Entry point only (plugins/.airflowignore); loading imports neither pyiceberg nor pyspark."""
    probe = (
        "import json, sys\n"
        "from airflow import plugins_manager\n"
        "plugins, errors = plugins_manager._get_plugins()\n"
        "print(json.dumps({'plugins': [[p.name, str(p.source)] for p in plugins],\n"
        "  'errors': errors, 'heavy': sorted({'pyiceberg', 'pyspark'} & set(sys.modules))}))\n"
    )
    env = airflow_env(
        tmp_path, all_admins=True, AIRFLOW__CORE__PLUGINS_FOLDER=str(REPO / "plugins")
    )
    # Not from the repository root: `python -c` would also find pip's cdc_ingest.egg-info there.
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    # The OpenLineage provider registers a plugin of its own.
    [source] = [source for name, source in loaded["plugins"] if name == "cdc_ingest"]
    assert "cdc_ingest_airflow.plugin:CdcIngestStatusPlugin" in source
    assert loaded["errors"] == {} and loaded["heavy"] == []
