"""`make demo`: every format's DAG through Airflow, a downstream DAG, then a summary."""
