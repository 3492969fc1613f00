"""The Python processes that tests start: their environment, and a check of
what they import."""

import contextlib
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def environment(**overrides):
  """os.environ for a child Python process: TensorFlow's start-up logging
  quiet, this process's sys.path (so that it imports the same tf_adasamp and
  test helpers), then `overrides`."""
  return {
      **os.environ, "TF_CPP_MIN_LOG_LEVEL": "2",
      "PYTHONPATH": os.pathsep.join(filter(None, sys.path)),
      **overrides
  }


def ran(module, *args, timeout, **env):
  """`python -m module *args` run to its end from the checkout's root, its
  output captured as text: a subprocess.CompletedProcess. `env`: environment
  overrides."""
  return subprocess.run([sys.executable, "-m", module, *args],
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                        timeout=timeout,
                        env=environment(**env))


def free_ports(count):
  """`count` ports of 127.0.0.1 that were free a moment ago (for a
  TF_CONFIG)."""
  sockets = [socket.socket() for _ in range(count)]
  try:
    for s in sockets:
      s.bind(("127.0.0.1", 0))
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def tf_config(ports, index):
  """The TF_CONFIG of worker `index` of a cluster of workers at `ports` of
  127.0.0.1."""
  return json.dumps({
      "cluster": {
          "worker": [f"127.0.0.1:{port}" for port in ports]
      },
      "task": {
          "type": "worker",
          "index": index
      }
  })


def wait_for(condition, what, timeout):
  """Returns once `condition()` holds; fails, naming `what`, after `timeout`
  seconds."""
  deadline = time.monotonic() + timeout
  while not condition():
    assert time.monotonic() < deadline, f"no {what} in {timeout} s"
    time.sleep(0.1)


def restore_sigint():
  """A Popen preexec_fn: SIGINT's default action in the child.

  A background job of a non-interactive shell (`make test &`, some CI
  runners) starts with SIGINT ignored, which its children inherit, and
  Python then never raises KeyboardInterrupt: a test that interrupts a child
  must not depend on how the suite was started.
  """
  signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def started(module, log, *args, **env):
  """`python -m module *args`, its output in file `log` (a file never
  fills), running until the test ends; then it and every process it started
  are killed, whatever the test's outcome. `env`: environment overrides."""
  with open(log, "w") as output:
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdout=output,
        stderr=subprocess.STDOUT,
        env=environment(**env),
        start_new_session=True,  # a process group of its own, to kill
        preexec_fn=restore_sigint)
  try:
    yield process
  finally:
    try:
      os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
      pass  # all ended
    process.wait()


def running_in_group(group):
  """The processes of process group `group` that have not ended (Linux)."""
  running = []
  for stat in glob.glob("/proc/[0-9]*/stat"):
    try:
      with open(stat, encoding="ascii") as f:
        # pid (command) state ppid group ...; the command may hold spaces.
        state, _, process_group = f.read().rsplit(")", 1)[1].split()[:3]
    except OSError:
      continue  # ended meanwhile
    if int(process_group) == group and state != "Z":
      running.append(stat)
  return running


# Run first in the child of `import_attempts`: a finder ahead of all others
# that makes the modules of ABSENT missing and records who asked for them.
_ABSENT_MODULES = """
import importlib.abc, json, sys
ABSENT = {absent!r}
ATTEMPTS = []

class Absent(importlib.abc.MetaPathFinder):

  def find_spec(self, name, path=None, target=None):
    if not any(name == a or name.startswith(a + ".") for a in ABSENT):
      return None
    frame = sys._getframe(1)
    while frame and frame.f_globals.get("__name__", "").startswith(
        ("importlib", "_frozen_importlib")):
      frame = frame.f_back
    ATTEMPTS.append([frame and frame.f_globals.get("__name__"), name])
    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, Absent())
import numpy, keras, tensorflow
ATTEMPTS.clear()  # Keras's own optional imports are not the statement's.
{statement}
print(json.dumps(ATTEMPTS))
"""


def import_attempts(statement, absent):
  """The imports of modules `absent` that running `statement` tries.

  Runs `statement` in a fresh interpreter, after NumPy, Keras and
  TensorFlow, where the modules named in `absent` (and their submodules) are
  missing, as on a machine without them: a module that imports one, even
  inside try/except or through another package, is caught in the act. Returns
  a [importing module, absent module] pair per attempt.
  """
  code = _ABSENT_MODULES.format(absent=tuple(absent), statement=statement)
  result = subprocess.run([sys.executable, "-c", code],
                          capture_output=True,
                          text=True,
                          check=False,
                          timeout=300,
                          env=environment())
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.splitlines()[-1])
