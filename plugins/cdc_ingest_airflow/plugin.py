"""The Airflow plugin: the cdc-ingest status page in the API server and in the UI's navigation.

Registered through the ``airflow.plugins`` entry point (pyproject.toml), so an installed
cdc-ingest is picked up by ``airflow api-server`` without copying files to the plugins folder.
The page lives at ``<base_url>/cdc-ingest/`` and appears under Browse → "CDC ingest" (embedded
at ``<base_url>/plugin/cdc-ingest``).

Importing this module imports FastAPI but neither pyiceberg nor pyspark: schedulers and DAG
processors load plugins too.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from cdc_ingest_airflow.status_page import status_app

URL_PREFIX = "/cdc-ingest"
URL_ROUTE = "cdc-ingest"


class CdcIngestStatusPlugin(AirflowPlugin):
    """Mounts the status app and links it from the UI."""

    name = "cdc_ingest"
    fastapi_apps: list[Any] = [
        {"app": status_app, "url_prefix": URL_PREFIX, "name": "cdc-ingest status"}
    ]
    external_views: list[Any] = [
        {
            "name": "CDC ingest",
            # Relative to the UI's <base href>, so that a base_url with a path works.
            "href": URL_PREFIX.lstrip("/") + "/",
            "url_route": URL_ROUTE,
            "destination": "nav",
            "category": "browse",
        }
    ]
