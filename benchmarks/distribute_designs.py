"""Step time of sample + update: replicated trees against a single owner.

The measurement behind the design of tf_adasamp.distribute (issue 8; numbers
and reasoning in docs/distribute.md). Two replicas; per step, B draws per
replica, a utility per draw (a gather from a fixed table, standing in for the
model) and the reweighting of the global batch of 2B draws:

  replicated        every replica holds a copy of the sampler; it draws its B
                    from its copy, and `sampler.update` all-gathers the 2B
                    indices and utilities (one collective) and applies them
                    to every copy
  single_owner      (mirrored only) one sampler on /cpu:0, outside the
                    strategy; it draws all 2B in cross-replica context, each
                    replica takes its slice, and the 2B utilities are
                    gathered back and applied once, to the one tree
  owner_broadcast   replica 0 holds the only tree; it draws the 2B, the
                    others receive them through an all-reduce, and replica 0
                    applies the all-gathered utilities (the only single owner
                    that MultiWorkerMirroredStrategy can express)
  collectives_only  the replicated step's one all-gather (indices and the
                    utilities' bits, [B, 2] int64), no sampler: the
                    strategy's own cost per step (reference)
  one_device        (mirrored only) no strategy: one sampler draws and
                    reweights 2B (reference)

--strategy mirrored: MirroredStrategy over two logical CPU devices of this
process. --strategy multi_worker: MultiWorkerMirroredStrategy, two worker
processes on 127.0.0.1 (this process starts them and prints worker 0's lines).
Each design runs `--calls` calls of a tf.function holding `--steps-per-call`
steps (as Keras's steps_per_execution) after a warm-up, `--repeats` times,
alternating; the median milliseconds per step are printed as JSON lines.

  python -m benchmarks.distribute_designs [--strategy multi_worker]
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf

from benchmarks.machine import load
from benchmarks.machine import machine
from tf_adasamp import AdaptiveSampler
from tf_adasamp import distribute

NUM_REPLICAS = 2
AMPLITUDE, DECAY = 1.0, 0.9
TIMEOUT_S = 600


def replicated(strategy, num_examples, batch_size, table):
  sampler = distribute.create_sampler(strategy,
                                      num_examples,
                                      AMPLITUDE,
                                      DECAY,
                                      seed=0)

  def replica_step():
    indices = sampler.sample(batch_size)
    sampler.update(indices, tf.gather(table, indices))

  return lambda: strategy.run(replica_step)


def single_owner(strategy, num_examples, batch_size, table):
  with tf.device("/cpu:0"):
    owner = AdaptiveSampler(num_examples, AMPLITUDE, DECAY, seed=0)

  def replica_step(indices):
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    mine = indices[replica * batch_size:(replica + 1) * batch_size]
    return mine, tf.gather(table, mine)

  def step():
    with tf.device("/cpu:0"):
      indices = owner.sample(NUM_REPLICAS * batch_size)
    with strategy.scope():
      mine, utilities = strategy.run(replica_step, (indices,))
      owner.update(mine, utilities)

  return step


def owner_broadcast(strategy, num_examples, batch_size, table):
  # Every process makes the variables; only replica 0's are ever used.
  owner = AdaptiveSampler(num_examples, AMPLITUDE, DECAY, seed=0)
  global_size = NUM_REPLICAS * batch_size

  def replica_step():
    context = tf.distribute.get_replica_context()
    replica = context.replica_id_in_sync_group
    is_owner = tf.equal(replica, 0)
    drawn = tf.cond(is_owner, lambda: owner.sample(global_size),
                    lambda: tf.zeros([global_size], tf.int64))
    drawn = context.all_reduce(tf.distribute.ReduceOp.SUM, drawn)
    mine = drawn[replica * batch_size:(replica + 1) * batch_size]
    utilities = context.all_gather(tf.gather(table, mine), axis=0)
    tf.cond(is_owner, lambda: owner.update(drawn, utilities), lambda: None)

  return lambda: strategy.run(replica_step)


def collectives_only(strategy, num_examples, batch_size, table):
  del num_examples, table

  def replica_step():
    context = tf.distribute.get_replica_context()
    context.all_gather(tf.zeros([batch_size, 2], tf.int64), axis=0)

  return lambda: strategy.run(replica_step)


def one_device(strategy, num_examples, batch_size, table):
  del strategy
  sampler = AdaptiveSampler(num_examples, AMPLITUDE, DECAY, seed=0)

  def step():
    indices = sampler.sample(NUM_REPLICAS * batch_size)
    sampler.update(indices, tf.gather(table, indices))

  return step


DESIGNS = {
    "mirrored": [
        replicated, single_owner, owner_broadcast, collectives_only, one_device
    ],
    "multi_worker": [replicated, owner_broadcast, collectives_only],
}


def unrolled(step, steps_per_call):
  """A tf.function that runs `step` `steps_per_call` times, in order."""

  @tf.function
  def call():
    for _ in range(steps_per_call):
      step()

  return call


def milliseconds_per_step(call, calls, steps_per_call):
  start = time.perf_counter()
  for _ in range(calls):
    call()
  # Calls run asynchronously; a read waits for the last one.
  tf.constant(0).numpy()
  return 1000 * (time.perf_counter() - start) / (calls * steps_per_call)


def make_strategy(kind):
  if kind == "mirrored":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * NUM_REPLICAS)
    return tf.distribute.MirroredStrategy(
        [f"/cpu:{i}" for i in range(NUM_REPLICAS)])
  return tf.distribute.MultiWorkerMirroredStrategy()


def measure(args):
  strategy = make_strategy(args.strategy)
  is_chief = (strategy.cluster_resolver is None or
              strategy.cluster_resolver.task_id == 0)

  def report(record):
    if is_chief:
      print(json.dumps(record), flush=True)

  report({"strategy": args.strategy, "machine": machine(), "load": load()})
  for num_examples in map(int, args.sizes.split(",")):
    table = tf.constant(np.random.default_rng(0).normal(size=num_examples))
    for batch_size in map(int, args.batch_sizes.split(",")):
      calls = {
          make.__name__:
              unrolled(make(strategy, num_examples, batch_size, table),
                       args.steps_per_call) for make in DESIGNS[args.strategy]
      }
      times = {name: [] for name in calls}
      for call in calls.values():
        milliseconds_per_step(call, args.warmup, args.steps_per_call)
      for _ in range(args.repeats):
        for name, call in calls.items():
          times[name].append(
              milliseconds_per_step(call, args.calls, args.steps_per_call))
      for name, values in times.items():
        report({
            "design": name,
            "n": num_examples,
            "batch_per_replica": batch_size,
            "ms_per_step": round(statistics.median(values), 3),
            "runs_ms": [round(v, 3) for v in values]
        })


def launch_workers():
  """Runs this benchmark as two workers on loopback; returns worker 0's rc."""
  sockets = [socket.socket() for _ in range(NUM_REPLICAS)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  cluster = [f"127.0.0.1:{s.getsockname()[1]}" for s in sockets]
  for s in sockets:
    s.close()
  processes = []
  try:
    for task in range(NUM_REPLICAS):
      env = dict(os.environ,
                 TF_CONFIG=json.dumps({
                     "cluster": {
                         "worker": cluster
                     },
                     "task": {
                         "type": "worker",
                         "index": task
                     }
                 }))
      processes.append(
          subprocess.Popen([
              sys.executable, "-m", "benchmarks.distribute_designs",
              *sys.argv[1:]
          ],
                           env=env,
                           stdout=None if task == 0 else subprocess.DEVNULL))
    return max(p.wait(timeout=TIMEOUT_S) for p in processes)
  finally:
    for p in processes:
      if p.poll() is None:
        p.kill()
        p.wait()


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--strategy", choices=sorted(DESIGNS), default="mirrored")
  parser.add_argument("--sizes", default="50000,1000000")
  parser.add_argument("--batch-sizes",
                      default="100,4096",
                      help="draws per replica")
  parser.add_argument("--calls", type=int, default=20)
  parser.add_argument("--steps-per-call",
                      type=int,
                      default=10,
                      help="steps per tf.function call, as Keras's "
                      "steps_per_execution; 1 for a Python loop of steps")
  parser.add_argument("--warmup", type=int, default=3, help="calls")
  parser.add_argument("--repeats", type=int, default=5)
  args = parser.parse_args()
  if args.strategy == "multi_worker" and "TF_CONFIG" not in os.environ:
    return launch_workers()
  measure(args)
  return 0


if __name__ == "__main__":
  sys.exit(main())
