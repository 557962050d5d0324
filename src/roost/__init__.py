"""Roost: a ZooKeeper-compatible keeper, a Kafka-compatible broker, and a PySpark connector."""

__version__ = "0.1.0"
