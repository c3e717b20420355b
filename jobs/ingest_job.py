"""spark-submit application: ``spark-submit jobs/ingest_job.py run --config F --pipeline P``."""

import sys

from cdc_ingest.cli import main

if __name__ == "__main__":
    sys.exit(main())
