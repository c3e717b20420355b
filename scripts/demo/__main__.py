"""`python -m scripts.demo`: the demo (``scripts/demo/run.py``)."""

import sys

from scripts.demo.run import main

sys.exit(main())
