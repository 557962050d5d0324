"""`roost zk`: a ZooKeeper client for the keeper (or any ZooKeeper) built on kazoo: the command
group, its session, the interactive shell, node formatting, tree export and import, raw requests."""
