"""The lake's bookkeeping: system tables, checkpoints, the run summary, the pipeline lock."""
