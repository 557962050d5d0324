"""The `roost` PySpark data source: one class that Spark instantiates with the user's options."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from roost.spark.options import OptionError, parse_reader_options, parse_writer_options
from roost.spark.schema import SOURCE_SCHEMA


class RoostDataSource(DataSource):
    """`spark.read/readStream/write/writeStream.format("roost")`, with Spark's Kafka options."""

    @classmethod
    def name(cls) -> str:
        return "roost"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    # The readers and writers are imported where they are made: Spark starts a new Python process
    # for every streaming query's source and sink, and each pays for what this module imports.

    def reader(self, schema: StructType) -> DataSourceReader:
        from roost.spark.source import RoostBatchReader
        return RoostBatchReader(parse_reader_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from roost.spark.source import RoostStreamReader
        return RoostStreamReader(parse_reader_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        batch_id = self.options.get("batchId")
        try:
            parsed_batch = None if batch_id is None else int(batch_id)
        except ValueError:
            raise OptionError(f"option 'batchId' must be an integer, got {batch_id!r}") from None
        from roost.spark.sink import RoostBatchWriter
        return RoostBatchWriter(parse_writer_options(self.options), schema, parsed_batch)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from roost.spark.sink import RoostStreamWriter
        return RoostStreamWriter(parse_writer_options(self.options), schema)
