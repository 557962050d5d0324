#!/usr/bin/env python3
"""Rounds of TLS connections opened (handshake done) and closed against one `roost up` broker,
printing its RSS: held (all of a round open) and after (4 s after the round closed), then 35 s
after the last round (past the heap trimmer's 30 s interval, roost.broker.net.heap_trim).

    .venv/bin/python scripts/tls_churn_rss.py [--rounds 6] [--connections 500]
"""

from __future__ import annotations

import argparse
import resource
import socket
import ssl
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.hostile.test_abusive_tls_clients import SSL_LISTENER, make_certificates, tls_broker_args
from tests.support.abuse import rss_mib
from tests.support.procs import start_roost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6, choices=range(1, 51), metavar="1..50")
    parser.add_argument("--connections", type=int, default=500, choices=range(1, 3001), metavar="1..3000")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.connections * 2 + 500)), hard))
    with tempfile.TemporaryDirectory(prefix="tls-churn-") as directory:
        where = Path(directory)
        ca, pem = make_certificates(where)
        proc = start_roost(tls_broker_args(where / "data", pem, "--max.connections", str(args.connections + 100)),
                           expect=(SSL_LISTENER,))
        try:
            host, port = proc.address(SSL_LISTENER).rsplit(":", 1)
            context = ssl.create_default_context(cafile=str(ca))
            pid = proc.popen.pid
            time.sleep(2)
            print(f"broker RSS at start: {rss_mib(pid):.0f} MiB")
            for number in range(1, args.rounds + 1):
                held = [context.wrap_socket(socket.create_connection((host, int(port)), timeout=10),
                                            server_hostname="127.0.0.1") for _ in range(args.connections)]
                peak = rss_mib(pid)
                for tls_socket in held:
                    tls_socket.close()
                time.sleep(4)
                print(f"round {number}: {args.connections} TLS connections held {peak:.0f} MiB, "
                      f"closed 4 s later {rss_mib(pid):.0f} MiB")
            time.sleep(35)
            print(f"35 s after the last round: {rss_mib(pid):.0f} MiB")
        finally:
            proc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
