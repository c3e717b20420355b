"""`make bench`: every stream shape against a reference measured in the same run
(docs/performance.md)."""
