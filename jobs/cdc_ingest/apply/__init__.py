"""Applying a batch's changes to each target table: keyed MERGE, segmented around DDL,
append-only.
"""
