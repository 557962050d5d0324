"""Roost's PySpark connector: a Python data source registered as `roost`.

    from roost.spark import register
    register(spark)                      # once per SparkSession
    df = (spark.readStream.format("roost")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "posts")          # or subscribePattern
          .option("startingOffsets", "earliest")
          .load())                               # key, value, topic, partition, offset, timestamp, ...
    (df.selectExpr("key", "upper(CAST(value AS STRING)) AS value")
       .writeStream.format("roost")
       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
       .option("topic", "shouts")
       .option("checkpointLocation", "/tmp/ckpt")
       .start())

Modules: `options` (option parsing), `offsets` (offset arithmetic, data-loss rules), `schema`,
`source` (readers), `sink` and `exactly_once` (writers and their exactly-once argument),
`fetch_client` / `cluster` / `record_reader` / `arrow_columns` (reading with Roost's own client:
fetched batches decoded straight into Arrow), `kafka_io` / `sink_io` (the confluent-kafka shell,
for writing and for options only librdkafka honours), `session` (a local SparkSession).
The heavy imports (pyspark, pyarrow) happen only when these are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Make `format("roost")` available in `spark` (PySpark's data source registry is per session)."""
    from roost.spark.datasource import RoostDataSource

    spark.dataSource.register(RoostDataSource)
