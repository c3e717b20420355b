"""Airflow DAG file: ``ingest_<pipeline>`` and ``maintain_<pipeline>`` per pipeline of
``$CDC_INGEST_CONFIG``.

Kept thin on purpose: all DAG construction lives in the installed package
(:mod:`cdc_ingest_airflow.dag_factory`), which imports no pyspark, so parsing this file costs the
DAG processor only the config read. A deployment's DAG file can be the two lines the README shows;
this one also tells, in the log, that the variable is unset.

If ``CDC_INGEST_CONFIG`` is unset the file defines no DAGs and logs a warning. If it points at a
missing or invalid file, the ``ConfigError`` propagates and Airflow lists it as an import error of
this file, with the config path and the reason.
"""

from __future__ import annotations

import logging
import os

from cdc_ingest_airflow.dag_factory import build_dags

CONFIG_ENV = "CDC_INGEST_CONFIG"

_config_path = os.environ.get(CONFIG_ENV, "")
if _config_path:
    globals().update(build_dags(_config_path))
else:
    logging.getLogger(__name__).warning(
        "%s is not set: no cdc-ingest DAGs defined (point it at a pipelines YAML file)", CONFIG_ENV
    )
