"""The record commands: `roost produce` and `roost consume`, their record format and JSON form,
and the Kafka client I/O they share."""
