"""Deterministic simulation of replication in Kafka's ZooKeeper mode (see cluster.py)."""
