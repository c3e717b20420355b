"""The status page's web layer: a FastAPI app that the Airflow plugin mounts in the API server.

- ``GET /`` (under the plugin's ``/cdc-ingest`` prefix): the page, server-rendered HTML.
- ``GET /status.json``: the same data as JSON, for on-call scripts.

Both read ``$CDC_INGEST_CONFIG`` and the catalog on every request (in a worker thread: pyiceberg
blocks), so a changed pipelines file shows at once. Airflow does not protect plugin apps: each
request is authenticated like Airflow's own API (``Authorization: Bearer`` or the UI's session
cookie) and shows only the pipelines whose DAG the user may read. Without a session the page
redirects to Airflow's login and the JSON endpoint answers 401.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI, HTTPException, Request, status
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from cdc_ingest_airflow.pipeline_status import gather
from cdc_ingest_airflow.status_html import render
from cdc_ingest_airflow.status_model import Overview

CONFIG_ENV = "CDC_INGEST_CONFIG"

status_app = FastAPI(
    title="cdc-ingest status",
    description="Pipelines, checkpoints, pending files, freshness, dead letters, DDL history.",
)


async def _user(request: Request) -> Any | None:
    """The authenticated Airflow user, or None without a valid token."""
    # Imported per request: the plugin module is also loaded by schedulers and DAG processors.
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    credentials = await bearer_scheme(request)
    try:
        return await get_user(request, None, credentials)
    except HTTPException as exc:
        if exc.status_code in (status.HTTP_401_UNAUTHORIZED, status.HTTP_403_FORBIDDEN):
            return None
        raise


def _visible(overview: Overview, user: Any) -> Overview:
    """The overview without the pipelines whose DAG the user may not read."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    manager = get_auth_manager()
    overview.pipelines = [
        p
        for p in overview.pipelines
        if manager.is_authorized_dag(method="GET", details=DagDetails(id=p.dag_id), user=user)
    ]
    return overview


async def _overview(user: Any) -> Overview:
    # pyiceberg and the auth manager block: keep them off the event loop.
    return await run_in_threadpool(lambda: _visible(gather(os.environ.get(CONFIG_ENV)), user))


@status_app.get("/", response_class=HTMLResponse)
async def status_page(request: Request) -> Response:
    """The page; without a session, a redirect to Airflow's login that comes back here."""
    user = await _user(request)
    if user is None:
        from airflow.api_fastapi.app import get_auth_manager

        login = get_auth_manager().get_url_login(next_url=str(request.url))
        return RedirectResponse(login, status_code=status.HTTP_307_TEMPORARY_REDIRECT)
    return HTMLResponse(render(await _overview(user)))


@status_app.get("/status.json")
async def status_json(request: Request) -> Response:
    """The page's data as JSON (times in ISO 8601, UTC)."""
    user = await _user(request)
    if user is None:
        return JSONResponse({"detail": "Not authenticated"}, status.HTTP_401_UNAUTHORIZED)
    return JSONResponse((await _overview(user)).to_json())
