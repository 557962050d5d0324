"""Kafka client quotas (produce/fetch byte rates, request time, connection limits): see core.py."""
