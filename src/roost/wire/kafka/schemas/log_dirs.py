"""A broker's log directories: AlterReplicaLogDirs (34) and DescribeLogDirs (35), from Kafka's
<Name>Request.json / <Name>Response.json. Kafka 4.0 dropped version 0 of both; we implement what
Kafka 3.7 serves from version 1 on (DescribeLogDirs 5, IsCordoned, is Kafka 4.3's: declared, not
served)."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

ALTER_REPLICA_LOG_DIRS_REQUEST = Message(
    "AlterReplicaLogDirsRequest", api_key=34, kind="request", versions="1-2", flexible="2+", fields=(
        Field("Dirs", "[]AlterReplicaLogDir", "0+", fields=(
            Field("Path", "string", "0+"),  # the absolute path of the directory to move to
            Field("Topics", "[]AlterReplicaLogDirTopic", "0+", fields=(
                Field("Name", "string", "0+"),
                Field("Partitions", "[]int32", "0+"),
            )),
        )),
    ))

ALTER_REPLICA_LOG_DIRS_RESPONSE = Message(
    "AlterReplicaLogDirsResponse", api_key=34, kind="response", versions="1-2", flexible="2+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Results", "[]AlterReplicaLogDirTopicResult", "0+", fields=(
            Field("TopicName", "string", "0+"),
            Field("Partitions", "[]AlterReplicaLogDirPartitionResult", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("ErrorCode", "int16", "0+"),
            )),
        )),
    ))

DESCRIBE_LOG_DIRS_REQUEST = Message(
    "DescribeLogDirsRequest", api_key=35, kind="request", versions="1-4", flexible="2+", fields=(
        # null: every partition in every directory.
        Field("Topics", "[]DescribableLogDirTopic", "0+", nullable="0+", fields=(
            Field("Topic", "string", "0+"),
            Field("Partitions", "[]int32", "0+"),
        )),
    ))

DESCRIBE_LOG_DIRS_RESPONSE = Message(
    "DescribeLogDirsResponse", api_key=35, kind="response", versions="1-4", flexible="2+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "3+"),
        Field("Results", "[]DescribeLogDirsResult", "0+", fields=(
            Field("ErrorCode", "int16", "0+"),
            Field("LogDir", "string", "0+"),
            Field("Topics", "[]DescribeLogDirsTopic", "0+", fields=(
                Field("Name", "string", "0+"),
                Field("Partitions", "[]DescribeLogDirsPartition", "0+", fields=(
                    Field("PartitionIndex", "int32", "0+"),
                    Field("PartitionSize", "int64", "0+"),
                    Field("OffsetLag", "int64", "0+"),
                    Field("IsFutureKey", "bool", "0+"),
                )),
            )),
            Field("TotalBytes", "int64", "4+", default=-1),
            Field("UsableBytes", "int64", "4+", default=-1),
            Field("IsCordoned", "bool", "5+", default=False),
        )),
    ))
