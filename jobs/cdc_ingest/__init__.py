"""cdc_ingest."""
