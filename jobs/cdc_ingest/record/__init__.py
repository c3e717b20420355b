"""What a batch records besides table changes: dead letters, DDL history, the batch row."""
