"""The batch's Iceberg writes behind one interface (``protocol.TableWriter``): Spark's, and
pyiceberg's for what it writes as Spark would, without a Spark job. ``table_writer`` opens the
one a run uses; ``apply/write_policy`` chooses what each table's changes take."""
