"""Column types, typed values, target schemas, DDL parsing and schema evolution."""
