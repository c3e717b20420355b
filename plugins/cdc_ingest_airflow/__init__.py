"""Airflow glue."""
