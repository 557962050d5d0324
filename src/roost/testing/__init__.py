"""roost.testing: pytest fixtures that give tests a real Roost broker and keeper, with no Docker
and no JVM. The plugin (roost.testing.plugin) loads by itself once Roost is installed, through
the `pytest11` entry point `roost`; `-p no:roost` turns it off.
"""

from roost.testing.clients import KafkaHelpers, MissingClientError, Record
from roost.testing.node import RoostNode
from roost.testing.process import RoostStartError

__all__ = ["KafkaHelpers", "MissingClientError", "Record", "RoostNode", "RoostStartError"]
