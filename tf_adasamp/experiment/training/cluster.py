"""The multi-worker cluster of TF_CONFIG, joined so that it can always be left.

`tf.distribute.MultiWorkerMirroredStrategy()` waits in its constructor until
every worker of TF_CONFIG has started (one waited 13 minutes before we
stopped it; a register timeout for the coordination service did not shorten
the wait), in C++ holding the GIL, so Python's Ctrl-C handler never runs.
Its coordination service also takes SIGTERM for itself, as a preemption
notice, and the process trains on. `join` bounds that wait, lets Ctrl-C end
it, and gives SIGTERM back.
"""

import json
import os
import signal
import subprocess
import sys

import tensorflow as tf

_WATCHDOG = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "cluster_watchdog.py")


class TFConfigError(ValueError):
  """TF_CONFIG names no task of its cluster, or is not JSON."""


def _peers(resolver):
  """[name, address] of each chief and worker of TF_CONFIG's cluster but
  this task."""
  try:
    jobs = resolver.cluster_spec().as_dict()
    me = (resolver.task_type, resolver.task_id)
  except ValueError as error:  # json.JSONDecodeError
    raise TFConfigError(f"TF_CONFIG is not JSON ({error})") from None
  except (TypeError, AttributeError, KeyError) as error:
    raise TFConfigError("TF_CONFIG is not a cluster spec: give "
                        '{"cluster": {"worker": ["host:port", ...]}, '
                        '"task": {"type": "worker", "index": i}} '
                        f"({type(error).__name__}: {error})") from None
  addresses = _training_tasks(jobs)
  if not addresses:
    raise TFConfigError(
        "TF_CONFIG names no chief or worker (it is unset, empty or has no "
        "cluster): set it for each worker, or leave out "
        "--strategy=multi_worker")
  if me not in addresses:
    raise TFConfigError(f"TF_CONFIG's task ({me[0]} {me[1]}) is not one of "
                        "its cluster's")
  return [[f"{job} {index}", address]
          for (job, index), address in addresses.items()
          if (job, index) != me]


def _training_tasks(jobs):
  """{(job, index): "host:port"} of the chief and workers of `jobs`, the
  tasks that train (and wait); TFConfigError for an address without a
  port."""
  addresses = {}
  for job in ("chief", "worker"):
    tasks = jobs.get(job, [])
    # A sparse job is a {task index: address} dict.
    for index, address in (tasks.items()
                           if isinstance(tasks, dict) else enumerate(tasks)):
      host, _, port = str(address).rpartition(":")
      if not (host and port.isdigit()):
        raise TFConfigError(f"TF_CONFIG's {job} {index} has address "
                            f"{address!r}; give it as host:port")
      addresses[job, index] = address
  return addresses


def join(timeout):
  """MultiWorkerMirroredStrategy over TF_CONFIG, once its cluster has formed.

  Call it from the main thread. While it waits, it says so on stderr; Ctrl-C
  ends the process at once (nothing has been trained yet); after `timeout`
  seconds a watchdog process names the workers that do not answer and kills
  this one (exit status 137), as nothing else ends a process waiting there.
  Afterwards SIGINT and SIGTERM act as they did before. Raises
  TFConfigError before any wait.
  """
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  peers = _peers(resolver)
  if not peers:  # a cluster of one: nothing to wait for
    return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
  me = f"{resolver.task_type} {resolver.task_id}"
  handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
  signal.signal(signal.SIGINT, signal.SIG_DFL)
  try:
    print(
        f"{me}: waiting for the {len(peers) + 1} tasks of TF_CONFIG's "
        f"cluster to start (at most {timeout:g} s: --cluster_timeout)",
        file=sys.stderr,
        flush=True)
    watchdog = [
        sys.executable, "-I", _WATCHDOG,
        str(os.getpid()),
        str(timeout), f"{me}: the cluster did not form in {timeout:g} s",
        json.dumps(peers)
    ]
    # Leaving the `with` closes the watchdog's stdin, its cue to end. In a
    # session of its own, it does not get the terminal's Ctrl-C.
    with subprocess.Popen(watchdog,
                          stdin=subprocess.PIPE,
                          start_new_session=True):
      return tf.distribute.MultiWorkerMirroredStrategy(
          cluster_resolver=resolver)
  finally:
    for signum, handler in handlers.items():
      signal.signal(signum, handler)


def gather(strategy, values):
  """Every replica's int64 `values` (the same on each replica of a worker),
  as a NumPy array of one row per replica, in replica order."""

  @tf.function
  def all_rows():
    local = tf.constant([values], tf.int64)
    return strategy.gather(strategy.run(lambda: local), axis=0)

  return all_rows().numpy()
