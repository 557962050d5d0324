"""What the `roost` CLI and the web console both ask a cluster, as a library: where a cluster is
(`target`), the Kafka AdminClient bounded by a timeout (`kafka_client`), replica sizes from
DescribeLogDirs (`replica_sizes`), cluster health (`health`), the offset grammar
(`offset_spec`) and consumer-group seek planning (`seek`). Its failures are AdminErrors
(`errors`): one line meant for a person, which the CLI prints and the console answers with.
Nothing here imports click, the CLI or the console."""
