"""Ends a trainer whose multi-worker cluster has not formed in time.

`cluster.join` runs it as

  python -I cluster_watchdog.py PID TIMEOUT MESSAGE PEERS

with a pipe for stdin, which closes when PID's wait is over (or PID is gone).
If it is still open after TIMEOUT seconds, this prints MESSAGE and the PEERS
(a JSON list of [name, "host:port"]) that accept no connection, then kills
PID: waiting inside TensorFlow, it runs no Python to end itself. Standard
library only, so it starts in milliseconds.
"""

import json
import os
import select
import signal
import socket
import sys


def unreachable(peers):
  """The "name (address)" of each peer whose port accepts no connection."""
  names = []
  for name, address in peers:
    host, _, port = address.rpartition(":")
    try:
      socket.create_connection((host.strip("[]"), int(port)), timeout=1).close()
    except (OSError, ValueError):
      names.append(f"{name} ({address})")
  return names


def waiting(timeout):
  """Whether stdin is still open, without EOF, after `timeout` seconds."""
  return not select.select([sys.stdin], [], [], timeout)[0]


def main(pid, timeout, message, peers):
  if not waiting(float(timeout)):
    return
  missing = unreachable(json.loads(peers))
  if not waiting(0):  # the cluster formed while the peers were probed
    return
  print(message + ("; no answer from " + ", ".join(missing) if missing else
                   "; every peer answers: do all workers have this "
                   "TF_CONFIG's cluster?"),
        file=sys.stderr,
        flush=True)
  os.kill(int(pid), signal.SIGKILL)


if __name__ == "__main__":
  main(*sys.argv[1:])
