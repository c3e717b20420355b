"""Landing zones: listing and checking landed files, reading their lines, their landing time."""
