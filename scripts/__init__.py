"""The repository's own programs: the benchmarks (`make bench`) and the demo (`make demo`), run
from the repository's root as modules (`python -m scripts.benchmarks.bench_shapes`)."""
