"""A warm engine: one long-lived Spark driver that runs the batches of every ``cdc-ingest run``,
DAG task and maintenance run sent to it, so that a batch costs its data, not a JVM's start.

- :mod:`~cdc_ingest.engine.place`: where an engine lives (its socket, lock and log).
- :mod:`~cdc_ingest.engine.protocol`: the messages between a caller and the engine.
- :mod:`~cdc_ingest.engine.server`: the driver (``cdc-ingest engine start`` runs it).
- :mod:`~cdc_ingest.engine.client`: what a caller does (send a run, start, status, stop).

The route (a classic PySpark driver of our own rather than Spark Connect) and its numbers are in
docs/performance.md, "A warm engine".
"""
