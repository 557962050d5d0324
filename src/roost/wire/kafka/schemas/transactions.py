"""The transaction APIs: AddPartitionsToTxn (24, the client form v0-3 only), AddOffsetsToTxn (25),
EndTxn (26), WriteTxnMarkers (27) and TxnOffsetCommit (28), from Kafka's <Name>Request.json /
<Name>Response.json.

The codec stops where Kafka's later versions change the semantics Roost implements: AddPartitionsToTxn
v4+ is the broker-to-coordinator verify form (KIP-890 part 1), EndTxn v5 and TxnOffsetCommit v5
belong to KIP-890 part 2 (epoch bump per transaction, implicit partition adds)."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

ADD_PARTITIONS_TO_TXN_REQUEST = Message(
    "AddPartitionsToTxnRequest", api_key=24, kind="request", versions="0-3", flexible="3+", fields=(
        Field("Transactions", "[]AddPartitionsToTxnTransaction", "4+", fields=(
            Field("TransactionalId", "string", "4+"),
            Field("ProducerId", "int64", "4+"),
            Field("ProducerEpoch", "int16", "4+"),
            Field("VerifyOnly", "bool", "4+", default=False),
            Field("Topics", "[]AddPartitionsToTxnTopic", "4+", fields=(
                Field("Name", "string", "0+"),
                Field("Partitions", "[]int32", "0+"),
            )),
        )),
        Field("V3AndBelowTransactionalId", "string", "0-3"),
        Field("V3AndBelowProducerId", "int64", "0-3"),
        Field("V3AndBelowProducerEpoch", "int16", "0-3"),
        Field("V3AndBelowTopics", "[]AddPartitionsToTxnTopic", "0-3", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]int32", "0+"),
        )),
    ))

ADD_PARTITIONS_TO_TXN_RESPONSE = Message(
    "AddPartitionsToTxnResponse", api_key=24, kind="response", versions="0-3", flexible="3+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "4+", default=0),
        Field("ResultsByTransaction", "[]AddPartitionsToTxnResult", "4+", fields=(
            Field("TransactionalId", "string", "4+"),
            Field("TopicResults", "[]AddPartitionsToTxnTopicResult", "4+", fields=(
                Field("Name", "string", "0+"),
                Field("ResultsByPartition", "[]AddPartitionsToTxnPartitionResult", "0+", fields=(
                    Field("PartitionIndex", "int32", "0+"),
                    Field("PartitionErrorCode", "int16", "0+"),
                )),
            )),
        )),
        Field("ResultsByTopicV3AndBelow", "[]AddPartitionsToTxnTopicResult", "0-3", fields=(
            Field("Name", "string", "0+"),
            Field("ResultsByPartition", "[]AddPartitionsToTxnPartitionResult", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("PartitionErrorCode", "int16", "0+"),
            )),
        )),
    ))

ADD_OFFSETS_TO_TXN_REQUEST = Message(
    "AddOffsetsToTxnRequest", api_key=25, kind="request", versions="0-3", flexible="3+", fields=(
        Field("TransactionalId", "string", "0+"),
        Field("ProducerId", "int64", "0+"),
        Field("ProducerEpoch", "int16", "0+"),
        Field("GroupId", "string", "0+"),
    ))

ADD_OFFSETS_TO_TXN_RESPONSE = Message(
    "AddOffsetsToTxnResponse", api_key=25, kind="response", versions="0-3", flexible="3+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "0+"),
    ))

END_TXN_REQUEST = Message(
    "EndTxnRequest", api_key=26, kind="request", versions="0-3", flexible="3+", fields=(
        Field("TransactionalId", "string", "0+"),
        Field("ProducerId", "int64", "0+"),
        Field("ProducerEpoch", "int16", "0+"),
        Field("Committed", "bool", "0+"),
    ))

END_TXN_RESPONSE = Message(
    "EndTxnResponse", api_key=26, kind="response", versions="0-3", flexible="3+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "0+"),
        Field("ProducerId", "int64", "5+", default=-1),
        Field("ProducerEpoch", "int16", "5+", default=-1),
    ))

WRITE_TXN_MARKERS_REQUEST = Message(
    "WriteTxnMarkersRequest", api_key=27, kind="request", versions="1-1", flexible="1+", fields=(
        Field("Markers", "[]WritableTxnMarker", "0+", fields=(
            Field("ProducerId", "int64", "0+"),
            Field("ProducerEpoch", "int16", "0+"),
            Field("TransactionResult", "bool", "0+"),
            Field("Topics", "[]WritableTxnMarkerTopic", "0+", fields=(
                Field("Name", "string", "0+"),
                Field("PartitionIndexes", "[]int32", "0+"),
            )),
            Field("CoordinatorEpoch", "int32", "0+"),
            Field("TransactionVersion", "int8", "2+", default=0),
        )),
    ))

WRITE_TXN_MARKERS_RESPONSE = Message(
    "WriteTxnMarkersResponse", api_key=27, kind="response", versions="1-1", flexible="1+", fields=(
        Field("Markers", "[]WritableTxnMarkerResult", "0+", fields=(
            Field("ProducerId", "int64", "0+"),
            Field("Topics", "[]WritableTxnMarkerTopicResult", "0+", fields=(
                Field("Name", "string", "0+"),
                Field("Partitions", "[]WritableTxnMarkerPartitionResult", "0+", fields=(
                    Field("PartitionIndex", "int32", "0+"),
                    Field("ErrorCode", "int16", "0+"),
                )),
            )),
        )),
    ))

TXN_OFFSET_COMMIT_REQUEST = Message(
    "TxnOffsetCommitRequest", api_key=28, kind="request", versions="0-3", flexible="3+", fields=(
        Field("TransactionalId", "string", "0+"),
        Field("GroupId", "string", "0+"),
        Field("ProducerId", "int64", "0+"),
        Field("ProducerEpoch", "int16", "0+"),
        Field("GenerationId", "int32", "3+", default=-1),
        Field("MemberId", "string", "3+", default=""),
        Field("GroupInstanceId", "string", "3+", nullable="3+", default=None),
        Field("Topics", "[]TxnOffsetCommitRequestTopic", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]TxnOffsetCommitRequestPartition", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("CommittedOffset", "int64", "0+"),
                Field("CommittedLeaderEpoch", "int32", "2+", default=-1),
                Field("CommittedMetadata", "string", "0+", nullable="0+"),
            )),
        )),
    ))

TXN_OFFSET_COMMIT_RESPONSE = Message(
    "TxnOffsetCommitResponse", api_key=28, kind="response", versions="0-3", flexible="3+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("Topics", "[]TxnOffsetCommitResponseTopic", "0+", fields=(
            Field("Name", "string", "0+"),
            Field("Partitions", "[]TxnOffsetCommitResponsePartition", "0+", fields=(
                Field("PartitionIndex", "int32", "0+"),
                Field("ErrorCode", "int16", "0+"),
            )),
        )),
    ))

DESCRIBE_TRANSACTIONS_REQUEST = Message(
    "DescribeTransactionsRequest", api_key=65, kind="request", versions="0", flexible="0+", fields=(
        Field("TransactionalIds", "[]string", "0+"),
    ))

DESCRIBE_TRANSACTIONS_RESPONSE = Message(
    "DescribeTransactionsResponse", api_key=65, kind="response", versions="0", flexible="0+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("TransactionStates", "[]TransactionState", "0+", fields=(
            Field("ErrorCode", "int16", "0+"),
            Field("TransactionalId", "string", "0+"),
            Field("TransactionState", "string", "0+"),
            Field("TransactionTimeoutMs", "int32", "0+"),
            Field("TransactionStartTimeMs", "int64", "0+"),
            Field("ProducerId", "int64", "0+"),
            Field("ProducerEpoch", "int16", "0+"),
            Field("Topics", "[]TopicData", "0+", fields=(
                Field("Topic", "string", "0+"),
                Field("Partitions", "[]int32", "0+"),
            )),
        )),
    ))

LIST_TRANSACTIONS_REQUEST = Message(
    "ListTransactionsRequest", api_key=66, kind="request", versions="0-1", flexible="0+", fields=(
        Field("StateFilters", "[]string", "0+"),
        Field("ProducerIdFilters", "[]int64", "0+"),
        Field("DurationFilter", "int64", "1+", default=-1),
        Field("TransactionalIdPattern", "string", "2+", nullable="2+", default=None),
    ))

LIST_TRANSACTIONS_RESPONSE = Message(
    "ListTransactionsResponse", api_key=66, kind="response", versions="0-1", flexible="0+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "0+"),
        Field("UnknownStateFilters", "[]string", "0+"),
        Field("TransactionStates", "[]TransactionState", "0+", fields=(
            Field("TransactionalId", "string", "0+"),
            Field("ProducerId", "int64", "0+"),
            Field("TransactionState", "string", "0+"),
        )),
    ))
