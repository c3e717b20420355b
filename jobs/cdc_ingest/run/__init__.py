"""The run of one batch: its options, its mode (full, dry run, tables-only, replay, rebuild) and
its stages.
"""
