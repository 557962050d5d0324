"""Produce (0) and InitProducerId (22), from Kafka's ProduceRequest/Response.json and
InitProducerIdRequest/Response.json."""

from __future__ import annotations

from roost.wire.kafka.schema import Field, Message

PRODUCE_REQUEST = Message(
    "ProduceRequest", api_key=0, kind="request", versions="0-11", flexible="9+", fields=(
        Field("TransactionalId", "string", "3+", nullable="3+", default=None),
        Field("Acks", "int16", "0+"),
        Field("TimeoutMs", "int32", "0+"),
        Field("TopicData", "[]TopicProduceData", "0+", fields=(
            Field("Name", "string", "0-12"),
            Field("TopicId", "uuid", "13+"),
            Field("PartitionData", "[]PartitionProduceData", "0+", fields=(
                Field("Index", "int32", "0+"),
                Field("Records", "records", "0+", nullable="0+"),
            )),
        )),
    ))

PRODUCE_RESPONSE = Message(
    "ProduceResponse", api_key=0, kind="response", versions="0-11", flexible="9+", fields=(
        Field("Responses", "[]TopicProduceResponse", "0+", fields=(
            Field("Name", "string", "0-12"),
            Field("TopicId", "uuid", "13+"),
            Field("PartitionResponses", "[]PartitionProduceResponse", "0+", fields=(
                Field("Index", "int32", "0+"),
                Field("ErrorCode", "int16", "0+"),
                Field("BaseOffset", "int64", "0+"),
                Field("LogAppendTimeMs", "int64", "2+", default=-1),
                Field("LogStartOffset", "int64", "5+", default=-1),
                Field("RecordErrors", "[]BatchIndexAndErrorMessage", "8+", fields=(
                    Field("BatchIndex", "int32", "8+"),
                    Field("BatchIndexErrorMessage", "string", "8+", nullable="8+", default=None),
                )),
                Field("ErrorMessage", "string", "8+", nullable="8+", default=None),
                Field("CurrentLeader", "LeaderIdAndEpoch", "10+", tagged="10+", tag=0, fields=(
                    Field("LeaderId", "int32", "10+", default=-1),
                    Field("LeaderEpoch", "int32", "10+", default=-1),
                )),
            )),
        )),
        Field("ThrottleTimeMs", "int32", "1+", default=0),
        Field("NodeEndpoints", "[]NodeEndpoint", "10+", tagged="10+", tag=0, fields=(
            Field("NodeId", "int32", "10+"),
            Field("Host", "string", "10+"),
            Field("Port", "int32", "10+"),
            Field("Rack", "string", "10+", nullable="10+", default=None),
        )),
    ))

INIT_PRODUCER_ID_REQUEST = Message(
    "InitProducerIdRequest", api_key=22, kind="request", versions="0-4", flexible="2+", fields=(
        Field("TransactionalId", "string", "0+", nullable="0+"),
        Field("TransactionTimeoutMs", "int32", "0+"),
        Field("ProducerId", "int64", "3+", default=-1),
        Field("ProducerEpoch", "int16", "3+", default=-1),
        Field("Enable2Pc", "bool", "6+", default=False),
        Field("KeepPreparedTxn", "bool", "6+", default=False),
    ))

INIT_PRODUCER_ID_RESPONSE = Message(
    "InitProducerIdResponse", api_key=22, kind="response", versions="0-4", flexible="2+", fields=(
        Field("ThrottleTimeMs", "int32", "0+"),
        Field("ErrorCode", "int16", "0+"),
        Field("ProducerId", "int64", "0+", default=-1),
        Field("ProducerEpoch", "int16", "0+"),
        Field("OngoingTxnProducerId", "int64", "6+", default=-1),
        Field("OngoingTxnProducerEpoch", "int16", "6+", default=-1),
    ))
