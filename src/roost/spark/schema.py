"""The source's row schema (Spark's Kafka source schema) and its Arrow twin.

Arrow batches handed to Spark must match the declared schema exactly (names, types, nullability),
so the Arrow schema is derived from the Spark one by PySpark's own conversion rather than spelled
out twice.
"""

from __future__ import annotations

import functools

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# Spark's Kafka source: timestampType 0 = CreateTime, 1 = LogAppendTime (Kafka's TimestampType ids).
CREATE_TIME = 0
LOG_APPEND_TIME = 1

HEADER_TYPE = StructType([
    StructField("key", StringType(), True),
    StructField("value", BinaryType(), True),
])

SOURCE_SCHEMA = StructType([
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True),
    StructField("timestamp", TimestampType(), True),
    StructField("timestampType", IntegerType(), True),
    StructField("headers", ArrayType(HEADER_TYPE, True), True),
])


@functools.cache
def source_arrow_schema() -> pa.Schema:
    # Python data source workers convert with the UTC zone whatever the session's zone is.
    return to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")
