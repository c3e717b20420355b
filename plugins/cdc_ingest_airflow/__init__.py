"""Airflow glue for cdc-ingest: DAGs that spark-submit the ingestion job.

See :func:`cdc_ingest_airflow.dag_factory.build_dags`. Importing this package imports neither
Airflow nor pyspark; only the ``dag_factory`` module needs Airflow.
"""
