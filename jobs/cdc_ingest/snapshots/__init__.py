"""Snapshots the job makes through pyiceberg, and the catalog they go through.

Small tables' creates, appends and whole rewrites, a group's tables created with their first rows
or rewritten in one catalog transaction: each a snapshot producer beside the others, as pyiceberg
keeps its own (``pyiceberg/table/update/snapshot.py``). This is the one package that uses
pyiceberg's private API (its snapshot producers' and catalogs' underscored names, the manifest
writers' attributes) and the only writer of the SQL catalog's table rows besides pyiceberg
itself; ``tests/test_pyiceberg_internals.py`` fails when the pinned pyiceberg changes a name or
a signature this package relies on.
"""
