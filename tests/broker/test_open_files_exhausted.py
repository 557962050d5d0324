"""A broker that runs out of file descriptors while opening a partition's log fails that one
partition, not its log directory: the directory stays online and, once descriptors are free
again, the next log opens there. (Kafka takes the whole directory offline on "Too many open
files", and with it every partition the broker holds there.) Checked in a real child process
whose soft limit on open files is low, so the operating system itself refuses the descriptors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, os, resource, sys
from pathlib import Path
from roost.storage.log_manager import LogManager, LogUnavailable
from roost.config import BrokerConfig

def descriptors():
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None

data = Path(sys.argv[1])
config = BrokerConfig.build([("test", {"broker.id": 1, "log.dirs": str(data / "logs")})])
logs = LogManager(config, data)
_soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
opened, refused, before_refusal = [], None, None
for index in range(100):
    counted = descriptors()
    try:
        opened.append(logs.open_log("many", index, config.topic_defaults()))
    except LogUnavailable:
        refused, before_refusal = index, counted
        break
# The operator raises the limit: the refused open must have left no descriptor behind.
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
after_refusal = descriptors()
for partition_log in opened:
    partition_log.close()
later = logs.open_log("later", 0, config.topic_defaults())
print(json.dumps({"opened": len(opened), "refused": refused, "before_refusal": before_refusal,
                  "after_refusal": after_refusal, "online": [d.online for d in logs.dirs.dirs],
                  "later": later.log_end_offset}))
"""

def test_running_out_of_descriptors_fails_one_log_and_leaves_the_directory_online(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["refused"] is not None and outcome["opened"] > 0, outcome  # the limit was reached
    assert outcome["online"] and all(outcome["online"]), outcome  # no directory went offline
    if outcome["before_refusal"] is not None:  # counted while one descriptor was still free
        assert outcome["after_refusal"] == outcome["before_refusal"], outcome
    assert outcome["later"] == 0  # a log opens there again once descriptors are free
    assert "raise the open-files limit" in done.stderr
