"""The trainer's multi-worker runs: nothing a worker or its user does hangs
the others or leaves them out of step.

Each worker is a trainer process on 127.0.0.1 (its TF_CONFIG naming free
ports), killed with its process group when the test ends.
"""

import contextlib
import os
import pathlib
import signal

import pytest
import tensorflow as tf

import child_process
from run_records import without_clocks
from tf_adasamp.experiment.training import resume
from tf_adasamp.experiment.training import run_files

pytestmark = pytest.mark.multi_worker

TIMEOUT = 240  # seconds; generous for a loaded machine
STEPS = 150
TRAIN = [
    "--dataset=digits", "--model=logistic", "--noprogress", f"--steps={STEPS}",
    "--eval_interval=25", "--strategy=multi_worker"
]


@contextlib.contextmanager
def cluster(workers, ports=None):
  """A trainer per (output_dir, flags beyond TRAIN) of `workers`, as the
  workers of one cluster, each logging to output_dir.log; yields [(process,
  log)]."""
  ports = ports or child_process.free_ports(len(workers))
  with contextlib.ExitStack() as stack:
    started = []
    for index, (output_dir, flags) in enumerate(workers):
      log = pathlib.Path(f"{output_dir}.log")
      process = stack.enter_context(
          child_process.started("tf_adasamp.experiment.train",
                                log,
                                *TRAIN,
                                f"--output_dir={output_dir}",
                                *flags,
                                TF_CONFIG=child_process.tf_config(ports,
                                                                  index)))
      started.append((process, log))
    yield started


def finish(process, log):
  """The process's exit status and output, once it ends."""
  process.wait(timeout=TIMEOUT)
  return process.returncode, log.read_text()


def run_to_the_end(output_dirs, *flags):
  """Each worker's metric records, once all have finished."""
  with cluster([(output_dir, flags) for output_dir in output_dirs]) as workers:
    for process, log in workers:
      status, output = finish(process, log)
      assert status == 0, output
  return [run_files.read_metrics(d) for d in output_dirs]


def test_a_worker_whose_peer_never_starts_gives_up_at_the_timeout(tmp_path):
  ports = child_process.free_ports(2)
  # Worker 1 never starts.
  with cluster([(tmp_path / "w0", ["--cluster_timeout=2"])],
               ports=ports) as [(process, log)]:
    status, output = finish(process, log)
  # Killed by the watchdog: waiting in TensorFlow, it runs no Python.
  assert status == -signal.SIGKILL, output
  assert ("worker 0: the cluster did not form in 2 s; no answer from "
          f"worker 1 (127.0.0.1:{ports[1]})") in output


def test_ctrl_c_ends_a_worker_waiting_for_its_cluster(tmp_path):
  with cluster([(tmp_path / "w0", [])],
               ports=child_process.free_ports(2)) as [(process, log)]:
    child_process.wait_for(lambda: "waiting for the 2 tasks" in log.read_text(),
                           "wait for the cluster", TIMEOUT)
    process.send_signal(signal.SIGINT)
    status, output = finish(process, log)
  assert status == -signal.SIGINT, output


@pytest.mark.parametrize("config,message", [
    ("{worker: 1}", "TF_CONFIG is not JSON"),
    (child_process.tf_config(
        [1], index=3), "TF_CONFIG's task (worker 3) is not one of"),
])
def test_a_bad_tf_config_is_refused_in_one_line(tmp_path, config, message):
  with child_process.started("tf_adasamp.experiment.train",
                             tmp_path / "log",
                             *TRAIN,
                             f"--output_dir={tmp_path}/w0",
                             TF_CONFIG=config) as process:
    status, output = finish(process, tmp_path / "log")
  assert status == 1, output
  assert "Traceback" not in output, output
  assert message in output


def test_workers_with_other_settings_refuse_to_start(tmp_path):
  with cluster([(tmp_path / "w0", []),
                (tmp_path / "w1", ["--seed=1"])]) as workers:
    for process, log in workers:
      status, output = finish(process, log)
      assert status == 1, output
      assert "Traceback" not in output, output
      assert ("the workers of TF_CONFIG's cluster have different settings"
              in output)
  assert not run_files.read_metrics(tmp_path / "w0")


def drop_last_checkpoint(output_dir):
  """Makes `output_dir`'s run look killed while writing its last
  checkpoint."""
  directory = os.path.join(output_dir, "checkpoints")
  *kept, last = tf.train.get_checkpoint_state(
      directory).all_model_checkpoint_paths
  tf.compat.v1.train.update_checkpoint_state(directory,
                                             kept[-1],
                                             all_model_checkpoint_paths=kept)
  for path in tf.io.gfile.glob(last + ".*"):
    tf.io.gfile.remove(path)


def test_a_cluster_that_lost_a_worker_resumes_exactly(tmp_path):
  output_dirs = [tmp_path / f"w{i}" for i in range(2)]
  with cluster([(output_dir, []) for output_dir in output_dirs]) as workers:
    (first, first_log), (second, second_log) = workers
    child_process.wait_for(
        lambda: (resume.last_checkpoint_step(output_dirs[1]) or 0) >= 50,
        "checkpoint of step 50", TIMEOUT)
    # SIGTERM, which TensorFlow's coordination service would take for itself.
    second.send_signal(signal.SIGTERM)
    status, output = finish(second, second_log)
    assert status == -signal.SIGTERM, output
    status, output = finish(first, first_log)
  assert status == 1, output
  assert "Traceback" not in output, output
  assert "the cluster lost a worker after step" in output, output

  # Up to the loss, the run was uninterrupted.
  before = [run_files.read_metrics(d) for d in output_dirs]
  steps = [resume.last_checkpoint_step(d) for d in output_dirs]
  assert steps[1] < STEPS
  if steps[0] == steps[1]:
    drop_last_checkpoint(output_dirs[1])
  resumed = run_to_the_end(output_dirs, "--resume")
  # Both went back to a checkpoint before their last record, and redid
  # that record bit for bit.
  assert without_clocks(resumed[0]) == without_clocks(resumed[1])
  for records in before:
    assert without_clocks(resumed[0][:len(records)]) == without_clocks(records)
  assert resumed[0][-1]["step"] == STEPS
