"""Trains the experiment's runs: in this process, or in a pool of worker
processes that each take the next unfinished run as they free up.

Each worker is a spawned process with one TensorFlow thread: a run's steps
are small and mostly single-threaded, so on a small CPU several runs at
once use the cores better than one run does. A worker's error (a run that
diverged, a directory that holds another run) is raised here, in the
process that called `run_all`, and stops the runs that have not started.
Runs are resumable: a finished run is skipped and an interrupted one goes
on from its last checkpoint.
"""

import concurrent.futures
import glob
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time

from tf_adasamp import _validation
from tf_adasamp.experiment.training import run_files

# What a command line tells a user who interrupts its `run_all`.
INTERRUPTED = ("the finished runs are kept, and the same command goes on "
               "with the others from their last checkpoints")
# The data every run of a worker trains on (set once, by _start_worker).
_worker_data = None

# Worker processes are replaced after this many runs each: TensorFlow keeps
# part of each finished run's memory (its functions' constants, the
# training images among them), and a worker that trained 55 runs of all of
# Fashion-MNIST grew to 11 GB and was killed for memory.
RUNS_PER_WORKER = 8


def max_workers():
  """The most worker processes this machine takes: each is a TensorFlow
  process of about 1 GiB, so one a GiB of its memory."""
  memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
  return max(1, memory >> 30)


def check_workers(workers):
  """`workers` as an int in [1, max_workers()]; ValueError (TypeError for a
  non-int) naming the flag otherwise."""
  workers = _validation.positive_int(workers, "workers")
  if workers > max_workers():
    raise ValueError(f"workers must be at most {max_workers()}, a GiB of "
                     "this machine's memory each (a worker is a TensorFlow "
                     f"process of about 1 GiB), got {workers}")
  return workers


def run_all(runs, data, progress=False, workers=1, spawn=False):
  """Trains every unfinished run; prints a line per run.

  Args:
    runs: study.Runs.
    data: the datasets.Dataset every run trains on, or a function of a Run
      returning its Dataset (picklable where workers > 1 or `spawn`).
    progress: show a progress bar per run (workers == 1 only).
    workers: processes that train the runs, each with one TensorFlow
      thread; 1 trains them in this process, unless `spawn`.
    spawn: train in worker processes even where `workers` is 1, each
      replaced after RUNS_PER_WORKER runs: a long pass of runs one at a
      time then does not hold every finished run's memory.

  Raises:
    ValueError: `workers` is not in [1, max_workers()].
    run_files.RunError: a run's directory holds a run of other settings
      (before any run starts), or a run failed (in a worker or here).
  """
  check_workers(workers)
  for run in runs:
    run_files.check_output_dir(run.config)
  remove_stale_temporaries(runs)
  labelled = []
  for number, run in enumerate(runs, 1):
    label = (f"[{number}/{len(runs)}] {run.algorithm} amplitude "
             f"{run.amplitude:g} trial {run.trial}")
    if run_files.is_complete(run.config.output_dir, run.config.steps):
      print(f"{label}: finished before, skipped", flush=True)
    else:
      labelled.append((label, run))
  if not spawn and (workers == 1 or len(labelled) <= 1):
    for label, run in labelled:
      print(_train(label, run, data, progress), flush=True)
    return
  if labelled:
    _train_in_pool(labelled, data, min(workers, len(labelled)))


def remove_stale_temporaries(runs):
  """Removes the temporary files a killed run left beside its metrics,
  settings and checkpoint digests (run_files.write_atomically's, which a
  kill can interrupt)."""
  for run in runs:
    directory = glob.escape(run.config.output_dir)
    for folder in (directory, os.path.join(directory, "checkpoints")):
      for path in glob.glob(os.path.join(folder, run_files.TEMPORARY_FILES)):
        os.remove(path)


def _train_in_pool(labelled, data, workers):
  # A fresh pool for each RUNS_PER_WORKER runs a worker: Python 3.11's
  # max_tasks_per_child hangs once the first workers retire.
  chunk = workers * RUNS_PER_WORKER
  for start in range(0, len(labelled), chunk):
    _train_in_one_pool(labelled[start:start + chunk], data, workers)


def _train_in_one_pool(labelled, data, workers):
  context = multiprocessing.get_context("spawn")
  before = set(multiprocessing.active_children())
  pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers,
                                                mp_context=context,
                                                initializer=_start_worker,
                                                initargs=(data,))
  futures = [
      pool.submit(_train_in_worker, label, run) for label, run in labelled
  ]
  try:
    for future in concurrent.futures.as_completed(futures):
      print(future.result(), flush=True)
  except BaseException:
    # A run failed, or the runner was interrupted: the runs not started are
    # dropped and the ones under way ended (each goes on from its last
    # checkpoint next time).
    pool.shutdown(wait=False, cancel_futures=True)
    for process in set(multiprocessing.active_children()) - before:
      process.terminate()
      process.join()
    raise
  pool.shutdown()


def _start_worker(data):
  """Sets up a worker process: one TensorFlow thread, the shared data, and
  an end with the runner."""
  global _worker_data
  _worker_data = data
  # Ctrl-C reaches the whole process group: the runner ends the workers.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  threading.Thread(target=_exit_with_the_runner, daemon=True).start()
  import tensorflow as tf
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)


def _exit_with_the_runner():
  """Ends this worker when the runner ends, however it ends, even by
  `kill -9` (docs/guarantees.md). It may stop a run anywhere: the run goes
  on from its last checkpoint."""
  multiprocessing.connection.wait([multiprocessing.parent_process().sentinel])
  os._exit(1)


def _train_in_worker(label, run):
  return _train(label, run, _worker_data, progress=False)


def _train(label, run, data, progress):
  """Trains `run`; its line for the log."""
  import tensorflow as tf

  from tf_adasamp.experiment.training import loop
  start = time.time()
  records = loop.train(run.config,
                       data=data(run) if callable(data) else data,
                       progress=progress)
  # Frees the finished run's model and functions.
  tf.keras.backend.clear_session()
  return (f"{label}: {time.time() - start:.1f} s, final train loss "
          f"{records[-1]['train_loss']:.4f}, test accuracy "
          f"{records[-1]['test_accuracy']:.4f}")
