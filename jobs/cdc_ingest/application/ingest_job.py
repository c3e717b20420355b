"""spark-submit application: ``spark-submit <this file> run --config F --pipeline P``.

Installed with the package (``cdc_ingest_airflow.spark_job.application_path`` finds it), so a
wheel runs DAG tasks with nothing of the source tree.
"""

import sys

from cdc_ingest.cli import main

if __name__ == "__main__":
    sys.exit(main())
