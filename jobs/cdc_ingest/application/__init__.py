"""The spark-submit application (``ingest_job.py``), in a package of its own: spark-submit puts
the application's directory first on ``sys.path``, where no module of the job may shadow another
package's."""
