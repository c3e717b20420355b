"""Spark's JVM as the job reaches it: the one module that touches pyspark's private handles.

PySpark's public API has no call for a few things the job needs: a schema inferred over a frame
of JSON texts, an Arrow table handed over without pandas, a projection of many expressions in a
few round trips, Iceberg's own catalog and commit metadata, a thread's local properties. They go
through py4j here and only here, so that a Spark line that renames a handle (``_jvm``, ``_jdf``,
``_jsparkSession``, ``_jsc``, ``_gateway``) or a private method is met in this one module
(``tests/test_spark_jvm.py`` fails when another module of the job uses one).

Lookups of JVM classes and static methods are kept per gateway (one per JVM): each is a py4j
round trip of its own, and a batch may create or commit to hundreds of tables.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def _jvm(spark: SparkSession) -> Any:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return jvm


def _frame(spark: SparkSession, jdf: Any) -> DataFrame:
    from pyspark.sql import DataFrame

    return DataFrame(jdf, spark)


# --- frames and plans -------------------------------------------------------------------------


def json_schema(spark: SparkSession, lines: DataFrame, max_string_length: str) -> StructType:
    """The schema Spark's JSON reader infers over a one-column frame of JSON texts."""
    from pyspark.sql import types as T

    jvm = _jvm(spark)
    texts = getattr(lines._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING())
    reader = spark._jsparkSession.read().option("maxStringLen", max_string_length)
    return T.StructType.fromJson(json.loads(reader.json(texts).schema().json()))


# Per gateway: the separator's compiled pattern and ``PythonUtils.toSeq``.
_splitters: dict[Any, tuple[Any, Any]] = {}


def select_split(frame: DataFrame, text: str, separator: str) -> DataFrame:
    """``frame.selectExpr`` of the expressions ``text`` holds between ``separator``s, split on
    the JVM side: pyspark would hand a list over element by element."""
    spark = frame.sparkSession
    gateway = spark.sparkContext._gateway
    if gateway not in _splitters:
        jvm = _jvm(spark)
        pattern = jvm.java.util.regex.Pattern.compile(separator)
        _splitters[gateway] = (pattern, jvm.PythonUtils.toSeq)
    pattern, to_seq = _splitters[gateway]
    # Expressions are never empty, so a split stream (which drops trailing empty strings) keeps
    # every one.
    columns = to_seq(pattern.splitAsStream(text).toList())
    return _frame(spark, frame._jdf.selectExpr(columns))


def sql_over_view(spark: SparkSession, query: str, view: str) -> DataFrame:
    """The frame of ``query`` over the temporary ``view``, which is dropped once Spark has
    analyzed the query (as pyspark's ``spark.sql`` does with the frames it is given)."""
    session = spark._jsparkSession
    try:
        return _frame(spark, session.sql(query))
    finally:
        session.catalog().dropTempView(view)


def unestimated(frame: DataFrame) -> DataFrame:
    """``frame``'s rows under a plan of their own, which Spark estimates at its default size
    instead of from the plan that computed them."""
    spark = frame.sparkSession
    rows = frame._jdf.queryExecution().toRdd()
    jdf = spark._jsparkSession.internalCreateDataFrame(rows, frame._jdf.schema(), False)
    return _frame(spark, jdf)


def release_checkpoint(frame: DataFrame) -> None:
    """Free the blocks of a local checkpoint now instead of when the JVM collects its RDD."""
    plan = frame._jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)


def collect_arrow_batches(frame: DataFrame) -> list[pa.RecordBatch]:
    """The frame's rows in the driver as Arrow record batches: one Spark job, no row objects."""
    batches: list[pa.RecordBatch] = frame._collect_as_arrow()
    return batches


def arrow_frame(spark: SparkSession, batches: list[pa.RecordBatch], schema_json: str) -> DataFrame:
    """Arrow record batches streamed to the JVM as a frame of the Spark schema ``schema_json``,
    as ``createDataFrame`` streams a pandas frame's (PySpark 3.5 takes no Arrow table)."""
    from pyspark.sql.pandas.serializers import ArrowStreamSerializer

    jvm = _jvm(spark)

    def reader(path: str) -> Any:
        return jvm.PythonSQLUtils.readArrowStreamFromFile(path)

    def server() -> Any:
        return jvm.ArrowIteratorServer()

    stream = spark.sparkContext._serialize_to_jvm(batches, ArrowStreamSerializer(), reader, server)
    return _frame(spark, jvm.PythonSQLUtils.toDataFrame(stream, schema_json, spark._jsparkSession))


def ddl_schema_json(spark: SparkSession, ddl: str) -> str:
    """A Spark schema written as DDL (``a INT, b STRING``) in Spark's JSON form."""
    return str(_jvm(spark).org.apache.spark.sql.types.StructType.fromDDL(ddl).json())


# --- files --------------------------------------------------------------------------------------


def hadoop_uri(spark: SparkSession, uri: str, local_path: str | None = None) -> str:
    """A file's URI as Hadoop encodes it (what a scan's ``_metadata.file_path`` says):
    ``local_path`` for a local file, else ``uri`` itself."""
    jvm = _jvm(spark)
    located = jvm.java.io.File(local_path).toURI() if local_path is not None else uri
    return str(jvm.org.apache.hadoop.fs.Path(located).toUri().toString())


def avro_sql_type(spark: SparkSession, avro_schema: str) -> StructType:
    """The Spark schema Spark's Avro source reads records of the Avro schema (JSON) as."""
    from pyspark.sql import types as T

    jvm = _jvm(spark)
    parsed = jvm.org.apache.avro.Schema.Parser().parse(avro_schema)
    sql_type = jvm.org.apache.spark.sql.avro.SchemaConverters.toSqlType(parsed).dataType()
    return T.StructType.fromJson(json.loads(sql_type.json()))


# --- sessions, threads, the driver -------------------------------------------------------------


def activate(session: SparkSession) -> None:
    """Make ``session`` the active one of this thread: a direct JVM call (Iceberg's
    ``Spark3Util``, a catalog manager) reads the settings of the thread's active session."""
    _jvm(session).SparkSession.setActiveSession(session._jsparkSession)


def session_identity(spark: SparkSession) -> int:
    """The JVM session's identity (two pyspark objects may wrap one session)."""
    return int(spark._jsparkSession.hashCode())


def set_application_default(spark: SparkSession, name: str, value: str) -> bool:
    """Set ``name`` in the application's own SparkConf unless it holds it; True when set."""
    conf = spark.sparkContext._jsc.sc().conf()
    if conf.contains(name):
        return False
    conf.set(name, value)
    return True


def loaded_class_count(spark: SparkSession) -> int:
    """How many classes the driver JVM has loaded."""
    management = _jvm(spark).java.lang.management.ManagementFactory
    return int(management.getClassLoadingMXBean().getLoadedClassCount())


def link_classes(spark: SparkSession, names: Iterable[str]) -> None:
    """Link each named class without running its static initializer (reflecting on its methods
    does); one that cannot link (an optional dependency absent) is left out."""
    from py4j.protocol import Py4JError

    jvm = _jvm(spark)
    loader = jvm.Thread.currentThread().getContextClassLoader()
    for name in names:
        try:
            jvm.java.lang.Class.forName(name, False, loader).getDeclaredMethods()
        except Py4JError:
            continue


def driver_process(spark: SparkSession) -> subprocess.Popen[bytes] | None:
    """The driver JVM's process when this Python started it (None under spark-submit, where the
    JVM started this Python)."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    return getattr(gateway, "proc", None)


class LocalProperties:
    """The calling thread's local properties (job group, description…), handed to other threads
    as copies of their own: pyspark's ``inheritable_thread_target`` hands every thread the same
    object, so that one thread's scheduler pool would be every thread's."""

    def __init__(self, spark: SparkSession) -> None:
        self._context = spark.sparkContext._jsc.sc()
        self._inherited = self._context.getLocalProperties().clone()

    def install(self, extra: dict[str, str]) -> None:
        """Give this thread a copy of the inherited properties with ``extra`` set."""
        properties = self._inherited.clone()
        for key, value in extra.items():
            properties.setProperty(key, value)
        self._context.setLocalProperties(properties)


# --- Iceberg through the JVM -------------------------------------------------------------------

COMMIT_METADATA = "org.apache.iceberg.spark.CommitMetadata"

# Per gateway (kept alive here, so that a new JVM never finds an old one): the commit metadata
# holder's thread-local map, or None where this Iceberg has none.
_commit_maps: dict[Any, Any] = {}


def _commit_map(spark: SparkSession) -> Any | None:
    gateway = spark.sparkContext._gateway
    if gateway not in _commit_maps:
        jvm = _jvm(spark)
        try:
            loader = jvm.Thread.currentThread().getContextClassLoader()
            holder = jvm.java.lang.Class.forName(COMMIT_METADATA, True, loader)
            field = holder.getDeclaredField("COMMIT_PROPERTIES")
            field.setAccessible(True)
            _commit_maps[gateway] = field.get(None)
        except Exception:  # another Iceberg: no properties on commits, and nothing breaks
            _commit_maps[gateway] = None
    return _commit_maps[gateway]


@contextmanager
def iceberg_commit_properties(spark: SparkSession, properties: dict[str, str]) -> Iterator[bool]:
    """Add ``properties`` to the snapshot of every Iceberg commit this thread makes in the block
    (yields False where this Iceberg has no such map: the commits carry none).

    ``CommitMetadata``'s per-thread map is public only through a Java callback API; PySpark runs
    each Python thread's JVM calls on a thread of its own, so it is set here through reflection.
    """
    local = _commit_map(spark)
    if local is None:
        yield False
        return
    values = _jvm(spark).java.util.HashMap()
    for key, value in properties.items():
        values.put(key, value)
    local.set(values)
    try:
        yield True
    finally:
        local.remove()


_iceberg: dict[Any, SimpleNamespace] = {}


def _iceberg_handles(spark: SparkSession) -> SimpleNamespace:
    """The JVM classes and static methods a table's creation uses, looked up once per gateway."""
    gateway = spark.sparkContext._gateway
    if gateway not in _iceberg:
        jvm = _jvm(spark)
        iceberg = jvm.org.apache.iceberg
        _iceberg[gateway] = SimpleNamespace(
            from_ddl=jvm.org.apache.spark.sql.types.StructType.fromDDL,
            convert=iceberg.spark.SparkSchemaUtil.convert,
            Schema=iceberg.Schema,
            HashSet=jvm.java.util.HashSet,
            HashMap=jvm.java.util.HashMap,
            String=jvm.String,
            namespace=iceberg.catalog.Namespace.of,
            table_identifier=iceberg.catalog.TableIdentifier.of,
            owner=jvm.org.apache.spark.util.Utils.getCurrentUserName(),
        )
    return _iceberg[gateway]


def current_user(spark: SparkSession) -> str:
    """The user Spark names as a table's owner."""
    return str(_iceberg_handles(spark).owner)


def iceberg_catalog_table(
    spark: SparkSession, catalog: str, namespace: str, table: str
) -> tuple[Any, Any] | None:
    """Iceberg's own catalog behind the Spark catalog ``catalog`` (a JVM object) and the table's
    identifier in it, or None when that catalog is not Iceberg's ``SparkCatalog``."""
    from py4j.protocol import Py4JError

    try:
        manager = spark._jsparkSession.sessionState().catalogManager()
        iceberg = manager.catalog(catalog).icebergCatalog()
    except Py4JError:
        return None
    handles = _iceberg_handles(spark)
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    levels = gateway.new_array(handles.String, 1)
    levels[0] = namespace
    return iceberg, handles.table_identifier(handles.namespace(levels), table)


def create_iceberg_table(
    spark: SparkSession,
    parts: tuple[str, str, str],
    ddl: str,
    keys: tuple[str, ...],
    properties: dict[str, str],
) -> bool | None:
    """Create the table ``parts`` (catalog, namespace, table) of the columns ``ddl`` with
    ``keys`` as identifier fields in one commit, through Iceberg's catalog API. False when it
    exists already; None when the catalog is not Iceberg's ``SparkCatalog``."""
    from py4j.protocol import Py4JJavaError

    found = iceberg_catalog_table(spark, *parts)
    if found is None:
        return None
    catalog, name = found
    handles = _iceberg_handles(spark)
    converted = handles.convert(handles.from_ddl(ddl))
    fields = handles.HashSet()
    for key in keys:
        fields.add(converted.caseInsensitiveFindField(key).fieldId())
    schema = handles.Schema(converted.columns(), fields)
    values = handles.HashMap()
    for key, value in properties.items():
        values.put(key, value)
    try:
        catalog.buildTable(name, schema).withProperties(values).create()
    except Py4JJavaError as exc:
        if "AlreadyExistsException" in exc.java_exception.getClass().getName():
            return False
        raise
    return True


def rename_column_over(
    spark: SparkSession, parts: tuple[str, str, str], source: str, target: str, drop: bool
) -> bool:
    """Rename the column ``source`` of the table ``parts`` to ``target``, dropping ``target``
    first when ``drop``, in one schema commit through Iceberg's API (Spark's ALTER TABLE makes
    two, with a moment without ``target`` between them). False when the catalog is not Iceberg's
    ``SparkCatalog``."""
    found = iceberg_catalog_table(spark, *parts)
    if found is None:
        return False
    catalog, name = found
    update = catalog.loadTable(name).updateSchema()
    if drop:
        update = update.deleteColumn(target)
    update.renameColumn(source, target).commit()
    return True


def iceberg_table(spark: SparkSession, identifier: str) -> Any:
    """The table as Iceberg's JVM object: loaded from the catalog, no job."""
    spark_util = _jvm(spark).org.apache.iceberg.spark.Spark3Util
    return spark_util.loadIcebergTable(spark._jsparkSession, identifier)
