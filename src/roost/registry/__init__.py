"""A Confluent-compatible schema registry built into Roost (docs/schema-registry.md).

Pure cores: schemas (parsing, canonical forms), compat_avro / compat_json / compat_protobuf and
compatibility (the rules), store (the `_schemas` replay), security (who may do what), service
(what each operation answers and writes). Shells: kafka_log (the topic through confluent-kafka,
and the writer's election through a consumer group), api (aiohttp), server (`roost schema-registry`).
"""
