"""The catalog section of the pipelines file and the properties Spark and pyiceberg open it with."""
