"""Reading an S3 landing zone: the job's boto3 reader against Spark's own ``s3a://`` (hadoop-aws).

    .venv/bin/python scripts/bench_s3_landing.py [--messages N] [--files F] [--repeat R]

Lands the bench's Lindorm files (scripts/bench.py's generator) on moto's S3 server on loopback,
then in one Spark session times, 1 + ``--repeat`` times each, the read of every line of them:

- ``boto3``: ``cdc_ingest.landing.reader.read_lines``, as the job reads ``s3://`` today
  (Arrow-batched Python workers, one task per object);
- ``s3a``: the job's Spark text-source reader over ``s3a://`` paths, with Hadoop's S3A
  filesystem (``org.apache.hadoop:hadoop-aws`` matched to Spark's Hadoop 3.3.4, and the AWS SDK
  bundle it was built with), resolved by Maven for this script only.

Both must count the same lines. The best repeat of each is compared. moto serves S3 from Python:
both readers wait on the same server, so the ratio says more than the absolute times.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "jobs"))

from cdc_ingest.jars import Artifact, jars_dir, job_jars, resolve  # noqa: E402

from scripts.benchmarks.bench_data import DEFAULT_SEED, prepare_data  # noqa: E402
from scripts.benchmarks.bench_phases import tree_cpu_seconds  # noqa: E402

HADOOP_AWS = (
    Artifact("org.apache.hadoop", "hadoop-aws", "3.3.4"),
    Artifact("com.amazonaws", "aws-java-sdk-bundle", "1.12.262"),
)
BUCKET = "landing"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=Path("bench-data"))
    args = parser.parse_args(argv)
    workdir: Path = args.workdir.resolve()
    expected, _ = prepare_data(workdir, args.messages, args.files, DEFAULT_SEED)
    files = sorted((workdir / "landing").glob("*.jsonl"))
    hadoop_jars = resolve(HADOOP_AWS, jars_dir().parent / "bench-s3a")

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    for path in files:
        s3.upload_file(str(path), BUCKET, f"bench/{path.name}")
    uris = [f"s3://{BUCKET}/bench/{p.name}" for p in files]

    from cdc_ingest.landing import reader
    from cdc_ingest.spark_session import session_conf
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F

    builder = SparkSession.builder.master("local[2]").appName("bench-s3-landing")
    for key, value in {
        **session_conf(),
        "spark.jars": ",".join([*job_jars(), *hadoop_jars]),
        "spark.driver.memory": "6g",
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.access.key": "bench",
        "spark.hadoop.fs.s3a.secret.key": "bench",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
    }.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    def materialized(lines: DataFrame) -> tuple[int, int]:
        # Every line's text is produced and measured, not only counted.
        row = lines.agg(F.count("*"), F.sum(F.length("raw"))).first()
        assert row is not None
        return int(row[0]), int(row[1])

    def boto3_read() -> tuple[int, int]:
        return materialized(reader.read_lines(spark, uris))

    def s3a_read() -> tuple[int, int]:
        s3a = [(i, "s3a" + uri[2:]) for i, uri in enumerate(uris)]
        return materialized(reader._read_hadoop(spark, s3a))

    best: dict[str, float] = {}
    totals: set[tuple[int, int]] = set()
    try:
        for name, read in (("boto3", boto3_read), ("s3a", s3a_read)):
            for i in range(1 + args.repeat):
                start, cpu = time.perf_counter(), tree_cpu_seconds()
                lines, chars = read()
                wall = time.perf_counter() - start
                cpu = tree_cpu_seconds() - cpu
                print(
                    f"{name} run {i}: {wall:.2f} s, CPU {cpu:.1f} s, {lines:,} lines, "
                    f"{chars:,} characters",
                    flush=True,
                )
                totals.add((lines, chars))
                if lines != expected.messages or len(totals) != 1:
                    print(f"{name}: {lines} lines, {chars} characters: mismatch", file=sys.stderr)
                    return 1
                if i:
                    best[name] = min(best.get(name, wall), wall)
    finally:
        spark.stop()
        server.stop()
    print(
        f"best of runs 1-{args.repeat}: boto3 {best['boto3']:.2f} s, s3a {best['s3a']:.2f} s "
        f"(s3a/boto3 {best['s3a'] / best['boto3']:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
