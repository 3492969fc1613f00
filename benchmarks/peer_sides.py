"""One side of benchmarks.peer_comparison, timed in a process of its own.

Each side is a library in the loop its users write, and imports only that
library (and NumPy):

  ours         tf_adasamp through its public API, in a tf.range loop inside a
               tf.function: AdaptiveSampler.sample(B) ("draw"); sample, then
               AdaptiveSampler.update of the draws ("step"); and
               SumTree.sample of a tf.random.Generator's uniforms, then
               SumTree.set of the draws ("tree_step")
  ours_xla     "draw" and "step" with jit_compile=True (SumTree.set has no
               XLA kernel, so "tree_step" does not compile)
  flashbax     flashbax's sum-tree (float32): stratified_sample ("draw"), and
               then set_batch_bincount of the draws ("step": its bincount
               is O(n) a batch), in a lax.fori_loop under jax.jit, the
               tree donated
  cpprb        cpprb's PrioritizedReplayBuffer from Python, one call a
               batch: sample(B) ("draw"), then update_priorities of the
               draws ("step")
  numpy        rng.choice(n, B, p=...) ("draw": O(n) a batch);
               searchsorted of the uniforms on a cumulative sum made once
               ("searchsorted": draws only, as long as the weights never
               change); and the step that changes them, the cumulative sum
               remade each batch ("step")
  categorical  tf.random.categorical over the log weights in a tf.range loop
               inside a tf.function ("draw": O(n) a batch, the cumulative
               sum of the softmax)

Every loop sums the draws (so nothing is left unused) and the draws are over
the same weights (gamma(0.5) + 1e-3, seeded by n); a step writes the same B
new weights at the drawn leaves. A loop runs LOOP batches a call (fewer where
one batch takes long), its calls repeated for at least --min-seconds, --repeats
times, the workloads taking turns, each repeat after an untimed call. Prints
one JSON line: per workload the wall and CPU seconds (the process's, all its
threads) per batch of each repeat, the process's id and its thread count at
the end.

  python -m benchmarks.peer_sides SIDE --num-leaves N --batch-size B
      [--repeats 5] [--min-seconds 0.2] [--dtype float64]
"""

import argparse
import json
import os
import sys
import time

import numpy as np

# Batches per call of a compiled loop: a training loop's steps_per_execution.
LOOP = 64
# The longest call: where one batch takes long, a call runs fewer of them.
MAX_CALL_SECONDS = 1.0


def random_weights(num_leaves):
  """The weights every side draws from: positive, so every peer takes them."""
  rng = np.random.default_rng(num_leaves)
  return rng.gamma(0.5, size=num_leaves) + 1e-3


def new_weights(batch_size):
  """The B weights a step writes at the leaves it drew."""
  return np.random.default_rng(batch_size).gamma(0.5, size=batch_size) + 1e-3


def ours(num_leaves, batch_size, dtype="float64", jit_compile=False):
  """tf_adasamp's workloads: {name: run(batches)}."""
  import tensorflow as tf

  import tf_adasamp
  dtype = tf.as_dtype(dtype)
  weights = random_weights(num_leaves)
  sampler = tf_adasamp.AdaptiveSampler(num_leaves,
                                       amplitude=1.0,
                                       decay=0.5,
                                       seed=0,
                                       dtype=dtype)
  # From uniform weights 1, one update with utilities log(w) gives w.
  sampler.update(tf.range(num_leaves, dtype=tf.int64), np.log(weights))
  tree = tf_adasamp.SumTree(num_leaves, initial_weights=weights, dtype=dtype)
  generator = tf.random.Generator.from_seed(1)
  written = tf.constant(new_weights(batch_size), dtype)

  def draw():
    return tf.reduce_sum(sampler.sample(batch_size))

  def step():
    indices = sampler.sample(batch_size)
    sampler.update(indices, written)
    return tf.reduce_sum(indices)

  def tree_step():
    indices, _ = tree.sample(generator.uniform([batch_size], dtype=dtype))
    tree.set(indices, written)
    return tf.reduce_sum(indices)

  bodies = {"draw": draw, "step": step}
  if not jit_compile:
    bodies["tree_step"] = tree_step
  return {
      name: tf_range_loop(body, jit_compile) for name, body in bodies.items()
  }


def ours_xla(num_leaves, batch_size, dtype="float64"):
  return ours(num_leaves, batch_size, dtype, jit_compile=True)


def tf_range_loop(body, jit_compile=False):
  """run(batches): body() `batches` times in a tf.range loop inside one
  tf.function, the sum of its results fetched at the end."""
  import tensorflow as tf

  @tf.function(jit_compile=jit_compile)
  def loop(count):
    total = tf.zeros([], tf.int64)
    for _ in tf.range(count):
      total += body()
    return total

  counts = {}

  def run(batches):
    if batches not in counts:
      counts[batches] = tf.constant(batches, tf.int64)
    return loop(counts[batches]).numpy()

  return run


def flashbax(num_leaves, batch_size, dtype=None):
  """flashbax's workloads (its tree is float32 whatever `dtype`)."""
  del dtype
  from flashbax.buffers import sum_tree
  import jax
  import jax.numpy as jnp
  state = sum_tree.set_batch_bincount(
      sum_tree.init(num_leaves), jnp.arange(num_leaves),
      jnp.asarray(random_weights(num_leaves), jnp.float32))
  written = jnp.asarray(new_weights(batch_size), jnp.float32)

  def draw_loop(state, key, count):

    def body(_, carry):
      key, total = carry
      key, subkey = jax.random.split(key)
      drawn = sum_tree.stratified_sample(state, batch_size, subkey)
      return key, total + jnp.sum(drawn)

    return jax.lax.fori_loop(0, count, body, (key, jnp.int32(0)))[1]

  def step_loop(state, key, count):

    def body(_, carry):
      state, key, total = carry
      key, subkey = jax.random.split(key)
      drawn = sum_tree.stratified_sample(state, batch_size, subkey)
      state = sum_tree.set_batch_bincount(state, drawn, written)
      return state, key, total + jnp.sum(drawn)

    state, _, total = jax.lax.fori_loop(0, count, body,
                                        (state, key, jnp.int32(0)))
    return state, total

  draw_jit = jax.jit(draw_loop)
  step_jit = jax.jit(step_loop, donate_argnums=0)
  holder = {"state": state, "key": jax.random.PRNGKey(0)}

  def next_key():
    holder["key"], key = jax.random.split(holder["key"])
    return key

  def draw(batches):
    return draw_jit(holder["state"], next_key(), batches).block_until_ready()

  def step(batches):
    holder["state"], total = step_jit(holder["state"], next_key(), batches)
    return total.block_until_ready()

  return {"draw": draw, "step": step}


def cpprb(num_leaves, batch_size, dtype=None):
  """cpprb's workloads (its trees are float32 whatever `dtype`). With
  alpha = 1 and eps = 0 its priorities are the weights."""
  del dtype
  from cpprb import PrioritizedReplayBuffer
  buffer = PrioritizedReplayBuffer(num_leaves, {"index": {
      "dtype": np.int64
  }},
                                   alpha=1.0,
                                   eps=0.0)
  buffer.add(index=np.arange(num_leaves), priorities=random_weights(num_leaves))
  written = new_weights(batch_size)

  def draw(batches):
    total = 0
    for _ in range(batches):
      total += buffer.sample(batch_size)["indexes"].sum()
    return total

  def step(batches):
    total = 0
    for _ in range(batches):
      indices = buffer.sample(batch_size)["indexes"]
      buffer.update_priorities(indices, written)
      total += indices.sum()
    return total

  return {"draw": draw, "step": step}


def numpy_side(num_leaves, batch_size, dtype="float64"):
  """NumPy's workloads: what a user without a sum-tree writes."""
  weights = random_weights(num_leaves).astype(dtype)
  rng = np.random.default_rng(0)
  probabilities = weights.astype(np.float64) / weights.sum()
  cumulative = np.cumsum(weights)
  written = new_weights(batch_size).astype(dtype)

  def draw(batches):
    total = 0
    for _ in range(batches):
      total += rng.choice(num_leaves, batch_size, p=probabilities).sum()
    return total

  def searchsorted(batches):
    total = 0
    for _ in range(batches):
      targets = rng.random(batch_size) * cumulative[-1]
      total += np.searchsorted(cumulative, targets, side="right").sum()
    return total

  def step(batches):
    total = 0
    for _ in range(batches):
      sums = np.cumsum(weights)
      indices = np.searchsorted(sums,
                                rng.random(batch_size) * sums[-1],
                                side="right")
      weights[indices] = written
      total += indices.sum()
    return total

  return {"draw": draw, "searchsorted": searchsorted, "step": step}


def categorical(num_leaves, batch_size, dtype="float64"):
  """tf.random.categorical's draws over the log weights."""
  import tensorflow as tf
  logits = tf.constant(np.log(random_weights(num_leaves))[np.newaxis], dtype)

  def draw():
    return tf.reduce_sum(tf.random.categorical(logits, batch_size)[0])

  return {"draw": tf_range_loop(draw)}


SIDES = {
    "ours": ours,
    "ours_xla": ours_xla,
    "flashbax": flashbax,
    "cpprb": cpprb,
    "numpy": numpy_side,
    "categorical": categorical,
}


def plan(run, min_seconds):
  """(batches per call, calls per repeat) of `run`, after its warm-up call
  (tracing, compiling): LOOP batches a call, or fewer where one batch takes
  long, and enough calls for min_seconds."""
  run(1)
  start = time.perf_counter()
  run(1)
  one = max(time.perf_counter() - start, 1e-9)
  batches = max(1, min(LOOP, int(MAX_CALL_SECONDS / one)))
  return batches, max(1, int(min_seconds / (one * batches)))


def timed(workloads, repeats, min_seconds):
  """{name: {batches_per_call, wall, cpu}}: the seconds per batch of each
  repeat, the workloads taking turns."""
  plans = {name: plan(run, min_seconds) for name, run in workloads.items()}
  result = {
      name: {
          "batches_per_call": batches,
          "wall": [],
          "cpu": []
      } for name, (batches, _) in plans.items()
  }
  for _ in range(repeats):
    for name, run in workloads.items():
      batches, calls = plans[name]
      run(batches)  # warms the caches the other workloads used
      start, start_cpu = time.perf_counter(), time.process_time()
      for _ in range(calls):
        run(batches)
      count = batches * calls
      result[name]["wall"].append((time.perf_counter() - start) / count)
      result[name]["cpu"].append((time.process_time() - start_cpu) / count)
  return result


def thread_count():
  """The threads this process has now (Linux), or None."""
  try:
    return len(os.listdir("/proc/self/task"))
  except OSError:
    return None


def versions(side):
  """The versions of what `side` ran on."""
  from importlib import metadata
  names = {
      "ours": ["tensorflow"],
      "ours_xla": ["tensorflow"],
      "categorical": ["tensorflow"],
      "flashbax": ["flashbax", "jax", "jaxlib"],
      "cpprb": ["cpprb"],
      "numpy": [],
  }[side]
  return {
      "numpy": np.__version__,
      **{
          name: metadata.version(name) for name in names
      }
  }


def positive_int(text):
  value = int(text)
  if value < 1:
    raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
  return value


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("side", choices=sorted(SIDES))
  parser.add_argument("--num-leaves", type=positive_int, required=True)
  parser.add_argument("--batch-size", type=positive_int, required=True)
  parser.add_argument("--repeats", type=positive_int, default=5)
  parser.add_argument("--min-seconds", type=float, default=0.2)
  parser.add_argument("--dtype",
                      choices=["float64", "float32"],
                      default="float64",
                      help="our trees' and NumPy's float type (flashbax and "
                      "cpprb are float32 always)")
  return parser.parse_args(argv)


def main(argv=None):
  args = parse_args(argv)
  workloads = SIDES[args.side](args.num_leaves, args.batch_size, args.dtype)
  times = timed(workloads, args.repeats, args.min_seconds)
  print(
      json.dumps({
          "side": args.side,
          "num_leaves": args.num_leaves,
          "batch_size": args.batch_size,
          "dtype": args.dtype,
          "pid": os.getpid(),
          "threads": thread_count(),
          "versions": versions(args.side),
          "workloads": times,
      }))


if __name__ == "__main__":
  sys.exit(main())
