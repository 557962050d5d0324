"""roost.testing.faults: run real keepers and brokers in network namespaces, inject faults (network
partitions with no RST, kill -9, SIGSTOP pauses, power cuts that lose unsynced writes), record every
client operation in a history and judge it with roost.testing.history's checkers.

The command is `scripts/fault_run.py` (root and Linux network namespaces needed); docs/fault-testing.md
says how to run it and what each fault does.
"""
