# cdc-ingest: `make demo` runs every pipeline's Airflow DAG on the embedded default;
# `make test` runs lint, types and the test suite. Both install what is missing first.
SHELL := /bin/bash
PYTHON ?= python3
# The Spark line of the environment (cdc_ingest.jars.SPARK_LINES): the default line in .venv,
# the other in its own virtualenv (`make test-lane`, `make bench SPARK_LINE=4.1`).
DEFAULT_LINE := 3.5
LINES := 3.5 4.1
SPARK_LINE ?= $(DEFAULT_LINE)
OTHER_LINE := $(filter-out $(SPARK_LINE),$(LINES))
VENV := $(if $(filter $(DEFAULT_LINE),$(SPARK_LINE)),.venv,.venv-spark$(SPARK_LINE))
BIN := $(VENV)/bin
# pytest-xdist workers, each with one Spark session shared by its tests; 0 runs in-process.
TEST_WORKERS ?= 2
STAMP := $(VENV)/.installed
# JVM artifacts by their Maven coordinates (`cdc-ingest setup`: jobs/cdc_ingest/jars.py; and
# tests/rest_catalog_server.py), resolved once into the environment; every later run is offline.
JARS_STAMP := $(VENV)/.jars
# The driver JVM's class-data-sharing archive (jobs/cdc_ingest/jvm_archive.py), built by
# `cdc-ingest setup` with one small pipeline run once the jars are in place.
ARCHIVE_STAMP := $(VENV)/.jvm-archive
CHROMIUM := /usr/bin/chromium
export JAVA_HOME ?= $(shell dirname $$(dirname $$(readlink -f $$(command -v java) 2>/dev/null)) 2>/dev/null)
export PYSPARK_PYTHON := $(CURDIR)/$(BIN)/python
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: install system-deps demo test test-lane lint bench clean

install: system-deps $(STAMP) $(JARS_STAMP) $(ARCHIVE_STAMP)

# The tested versions of every dependency of the line (pyproject.toml declares ranges).
CONSTRAINTS = constraints/py3.11-spark$(SPARK_LINE)-airflow3.3.txt
LINE_EXTRA = spark$(subst .,,$(SPARK_LINE))

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,$(LINE_EXTRA)]' -c $(CONSTRAINTS)
	@$(BIN)/python -c "import pyspark, sys; v = pyspark.__version__; print('pyspark', v); sys.exit(not v.startswith('$(SPARK_LINE).'))"
	touch $(STAMP)

$(JARS_STAMP): $(STAMP) jobs/cdc_ingest/jars.py tests/rest_catalog_server.py tests/debezium_lander.py tests/debezium_lander/Lander.java
	$(BIN)/cdc-ingest setup --no-class-archive
	$(BIN)/python tests/rest_catalog_server.py
	@# The real-producer tests' Debezium connectors and embedded engine, and the lander built on it.
	$(BIN)/python tests/debezium_lander.py
	touch $(JARS_STAMP)

$(ARCHIVE_STAMP): $(JARS_STAMP) jobs/cdc_ingest/jvm_archive.py jobs/cdc_ingest/archive_workload.py
	$(BIN)/cdc-ingest setup
	touch $(ARCHIVE_STAMP)

system-deps:
	@command -v java >/dev/null || { \
	  echo "Java not found: installing openjdk-17-jre-headless"; \
	  apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless; }
	@java -version 2>&1 | head -1
	@command -v mvn >/dev/null || { \
	  echo "Maven not found: installing maven"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null; }
	@# The PostgreSQL catalog tests start a real server.
	@compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || { \
	  echo "PostgreSQL server not found: installing postgresql"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    postgresql >/dev/null; }
	@# The real-producer tests run MariaDB (and PostgreSQL, above) on loopback.
	@test -x /usr/sbin/mariadbd || { \
	  echo "MariaDB server not found: installing mariadb-server"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    mariadb-server >/dev/null; }
	@# The status page test reads the Airflow plugin's page with Debian's headless chromium.
	@test -x $(CHROMIUM) || { \
	  echo "chromium not found: installing chromium"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@test -x $(CHROMIUM) || { echo "missing $(CHROMIUM): apt-get install chromium"; exit 1; }

demo: install
	$(BIN)/python -m scripts.demo

# Tests and scripts: strict mypy minus the rules that demand annotations, so an import of a name
# another test module no longer has fails here rather than when CI collects the tests.
# --config-file '' skips pyproject's [tool.mypy] (strict on jobs, plugins, dags); jobs and plugins
# are on the path so calls into them are checked; its own cache, as the per-module options differ
# from the strict run's.
MYPY_TESTS := MYPYPATH=jobs:plugins $(BIN)/mypy --config-file '' --python-version 3.11 \
	--strict --allow-untyped-defs --allow-incomplete-defs --allow-untyped-calls \
	--allow-untyped-decorators --allow-any-generics --no-warn-return-any \
	--ignore-missing-imports --cache-dir .mypy_cache/tests

lint: install
	$(BIN)/ruff check jobs plugins dags tests scripts
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(MYPY_TESTS) tests scripts

# The whole suite on this line, then the lane of the other line.
test: lint
	$(BIN)/pytest -q -n $(TEST_WORKERS) --durations=0 --durations-min=8 tests
	$(MAKE) --no-print-directory test-lane SPARK_LINE=$(OTHER_LINE)

# What must hold on either line: every format's scenarios over every catalog kind, the DAGs
# under Airflow, a Spark cluster, the wheel in a fresh virtualenv.
LANE_TESTS := $(addprefix tests/,test_scenarios.py test_catalog_kinds.py test_spark_lines.py \
	test_airflow_dags_test.py test_dags.py test_spark_cluster.py test_wheel.py)

test-lane: install
	$(BIN)/pytest -q -n $(TEST_WORKERS) --durations=0 --durations-min=8 $(LANE_TESTS)

# QUICK=1: every scenario at a tenth of its size, for a quick check.
BENCH_RESULTS = bench-data/results-spark$(SPARK_LINE).jsonl

bench: install
	rm -f $(BENCH_RESULTS)
	$(BIN)/python -m scripts.benchmarks.bench --results $(BENCH_RESULTS) $(if $(QUICK),--messages 100000 --workdir bench-data/quick)
	$(BIN)/python -m scripts.benchmarks.bench_shapes --results $(BENCH_RESULTS) $(if $(QUICK),--quick)
	$(BIN)/python -m scripts.benchmarks.bench_wide --results $(BENCH_RESULTS) $(if $(QUICK),--quick)
	$(BIN)/python -m scripts.benchmarks.bench_steady --results $(BENCH_RESULTS) $(if $(QUICK),--quick)
	$(BIN)/python -m scripts.benchmarks.bench_airflow --results $(BENCH_RESULTS) --workdir bench-data/airflow $(if $(QUICK),--quick)
	$(BIN)/python -m scripts.benchmarks.bench_fleet --results $(BENCH_RESULTS)
	$(BIN)/python -m scripts.benchmarks.bench_table $(BENCH_RESULTS)

clean:
	rm -rf demo bench-data .pytest_cache .mypy_cache .ruff_cache
