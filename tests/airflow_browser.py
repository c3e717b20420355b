"""A real ``airflow api-server`` on a loopback port and Debian's headless chromium, for UI tests.

The server gets its own AIRFLOW_HOME (SQLite metadata database from ``airflow db migrate``) and
the SimpleAuthManager in all-admins mode, so that a browser without a login reaches every page.
Readiness is polled on the health endpoint with a deadline; the server is stopped by its pid.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

VENV_BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"
SIMPLE_AUTH_MANAGER = (
    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
)
START_DEADLINE_S = 180.0


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ApiServer:
    """A running API server."""

    url: str
    home: Path
    log: Path

    def get(self, path: str, headers: dict[str, str] | None = None, json_body: Any = None) -> Reply:
        """One request (POST when ``json_body`` is given), redirects not followed."""

        class _NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any, **kwargs: Any) -> None:
                return None

        data = None if json_body is None else json.dumps(json_body).encode()
        request = urllib.request.Request(self.url + path, data=data, headers=headers or {})
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.build_opener(_NoRedirect).open(request, timeout=60) as response:
                return Reply(response.status, response.read().decode(), dict(response.headers))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, exc.read().decode(), dict(exc.headers))


@dataclass
class Reply:
    """An HTTP response."""

    status: int
    text: str
    headers: dict[str, str]


def airflow_env(home: Path, all_admins: bool, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": str(all_admins),
        "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),
        **extra,
    }
    for inherited in ("PYSPARK_SUBMIT_ARGS", "SPARK_ENV_LOADED", "SPARK_HOME"):
        env.pop(inherited, None)
    return env


@contextmanager
def api_server(home: Path, all_admins: bool = True, **extra_env: str) -> Iterator[ApiServer]:
    """Migrate a fresh metadata database, start the API server, yield once it answers.

    Args:
        home: the AIRFLOW_HOME to create.
        all_admins: SimpleAuthManager's all-admins mode (every request is an admin's).
        extra_env: more environment variables for Airflow.
    """
    home.mkdir(parents=True, exist_ok=True)
    env = airflow_env(home, all_admins, **extra_env)
    migrate = subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]
    port = free_loopback_port()
    log = home / "api-server.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [
                str(VENV_BIN / "airflow"),
                "api-server",
                "-H",
                "127.0.0.1",
                "-p",
                str(port),
                "-w",
                "1",
            ],
            env=env,
            cwd=home,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    server = ApiServer(f"http://127.0.0.1:{port}", home, log)
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            assert process.poll() is None, "api-server exited:\n" + log.read_text()[-5000:]
            try:
                if server.get("/api/v2/monitor/health").status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "api-server not up:\n" + log.read_text()[-5000:]
            time.sleep(0.25)  # between polls: a refused connection returns at once
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def chromium_unavailable() -> str | None:
    if not shutil.which(CHROMIUM):
        return f"{CHROMIUM} missing: apt-get install chromium (make install does)"
    return None


def dump_dom(url: str, virtual_time_ms: int | None = None) -> str:
    """The DOM of a page after it loaded, as Debian's headless chromium serialises it."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        args = [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
        ]
        if virtual_time_ms:
            # Lets a script-driven page (Airflow's React UI) finish its requests before the dump.
            args.append(f"--virtual-time-budget={virtual_time_ms}")
        result = subprocess.run(
            [*args, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False
        )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


class Elements(HTMLParser):
    """Text of elements by attribute, per enclosing ``data-pipeline`` section.

    ``fields[(pipeline, name)]``: text of the ``data-field=name`` element; ``rows[(pipeline,
    kind)]``: the cell texts of each ``<tr data-<kind>>`` row; ``tags``: every start tag seen.
    """

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.fields: dict[tuple[str, str], str] = {}
        self.rows: dict[tuple[str, str], list[list[str]]] = {}
        self.problems: dict[str, list[str]] = {}
        self.tags: list[str] = []
        # charts[(pipeline, name)]: the attributes of the ``<svg data-chart=name>`` element.
        self.charts: dict[tuple[str, str], dict[str, str | None]] = {}
        self._pipeline = ""
        self._open: list[tuple[str, str, list[str]]] = []  # (tag, what, text parts)
        self._row: tuple[str, list[str]] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        if "data-pipeline" in found:
            self._pipeline = found["data-pipeline"] or ""
        if "data-chart" in found:
            self.charts[(self._pipeline, found["data-chart"] or "")] = found
        if tag == "tr":
            kinds = [k[5:] for k in found if k.startswith("data-") and k != "data-field"]
            self._row = (kinds[0], []) if kinds else None
        if tag == "td" and self._row is not None:
            self._open.append((tag, "cell", []))
        elif "data-field" in found:
            self._open.append((tag, "field:" + (found["data-field"] or ""), []))
        elif "data-problem" in found:
            self._open.append((tag, "problem", []))

    def handle_data(self, data: str) -> None:
        for _, _, parts in self._open:
            parts.append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1][0] == tag:
            _, what, parts = self._open.pop()
            text = "".join(parts).strip()
            if what == "cell" and self._row is not None:
                self._row[1].append(text)
            elif what.startswith("field:"):
                self.fields[(self._pipeline, what[6:])] = text
            elif what == "problem":
                self.problems.setdefault(self._pipeline, []).append(text)
        if tag == "tr" and self._row is not None:
            self.rows.setdefault((self._pipeline, self._row[0]), []).append(self._row[1])
            self._row = None
        if tag == "section":
            self._pipeline = ""
