"""The server subcommands of `roost` (`up`, `broker`, `keeper`, `demo`, `console`) and what they
share: the node runner, `roost up --brokers` planning (`cluster_plan`) and its supervisor, child
processes, the metrics endpoint's start."""
