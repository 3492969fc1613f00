"""Raw-op microbenchmarks of the sum-tree ops on one device, no peers.

For each n (leaves) and B (batch size), in float64:
  sample         draws/s of SumTreeSample, uniforms given
  draw           draws/s of SumTreeDraw, which makes a tf.random.Generator's
                 uniforms itself (AdaptiveSampler.sample)
  sorted         SumTreeSample draws/s on sorted (stratified) uniforms
  set            unique updates/s of SumTreeSet
  reweight       unique updates/s of AdaptiveReweight
  step           microseconds per AdaptiveSampler step: draw (its
                 uniforms made inside) + reweight
Then one sampler step at n = 50000, B = 100, op by op, and the same in a
tf.range loop. These time the ops, not a user's loop: the ratios against
flashbax, cpprb, NumPy and tf.random.categorical come from
benchmarks.peer_comparison, each side in its own process.

The ops run in-graph: one concrete function runs UNROLL batches, each
after the previous one's outputs (a control dependency) and state (the
variables' order), on inputs that rotate between calls so that consecutive
batches touch different leaves, and every set changes the leaves it writes.
Steps are ordered by their state only, so TF may draw a step's uniforms
while the previous step reweights, as in any in-graph loop. Every figure is
over --repeats runs of at least --min-seconds each, the figures at one n, B
taking turns (seconds_per_call): the best (min time) and the median; the
process's CPU time (all threads) is recorded too, and a table per
CPU-second printed, for machines that other jobs share.

  python -m benchmarks.sum_tree_throughput [--sizes 10000 50000 1000000
      10000000] [--batch-sizes 128 1024 4096] [--repeats 5]
"""

import argparse
import itertools
import json
import os
import statistics
import sys
import time

import numpy as np
import tensorflow as tf

from benchmarks import gpu_steps
from benchmarks.machine import load
from benchmarks.machine import machine
import tf_adasamp
from tf_adasamp import ops

# Batches per concrete-function call, over which the call's own cost spreads.
UNROLL = 64
INPUT_SETS = 4
LOOP_STEPS = 1000
DTYPE = tf.float64


def seconds_per_call(calls, repeats, min_seconds):
  """Times each of `calls`, {name: call}, over `repeats` runs of at least
  min_seconds: {name: (seconds per call, CPU seconds per call)}, a list of
  one per run each.

  The calls take turns, run by run, each run after one untimed call that
  warms the caches the others used: a slow spell of the machine then falls
  on all of them alike, where timing one after another put it into their
  ratios. The CPU time is the process's (all its threads): on a machine
  whose cores other jobs share, the wall time measures the share this
  process got as much as the code, and the CPU time does not.
  """
  counts = {}
  for name, call in calls.items():
    call()  # Traces and warms the caches.
    start = time.perf_counter()
    call()
    counts[name] = max(
        1, int(min_seconds / max(time.perf_counter() - start, 1e-9)))
  times = {name: ([], []) for name in calls}
  for _ in range(repeats):
    for name, call in calls.items():
      call()
      start, start_cpu = time.perf_counter(), time.process_time()
      for _ in range(counts[name]):
        call()
      times[name][0].append((time.perf_counter() - start) / counts[name])
      times[name][1].append((time.process_time() - start_cpu) / counts[name])
  return times


def rates(calls, repeats, min_seconds):
  """{name: {best, median} units/s, the median units per CPU-second and the
  raw seconds per call} of `calls`, {name: (call, units per call)}, timed
  by seconds_per_call."""
  times = seconds_per_call({
      name: call for name, (call, _) in calls.items()
  }, repeats, min_seconds)
  result = {}
  for name, (_, units) in calls.items():
    wall, cpu = times[name]
    result[name] = {
        "best": units / min(wall),
        "median": units / statistics.median(wall),
        "cpu_median": units / statistics.median(cpu),
        "seconds_per_call": wall,
        "cpu_seconds_per_call": cpu
    }
  return result


def in_graph(batch, input_sets, unroll):
  """A call that runs `unroll` batches in one tf.function, each after the
  last: batch(*[x[r] for x in inputs]) for r < unroll, where `inputs` is the
  next of `input_sets`, tuples of tensors of leading dimension `unroll`."""

  @tf.function
  def run(inputs):
    columns = [tf.unstack(x, num=unroll) for x in inputs]
    result = []
    for r in range(unroll):
      with tf.control_dependencies(result):
        result = [
            x
            for x in tf.nest.flatten(batch(*[column[r] for column in columns]))
            if x is not None
        ]
    # Returning the tensors keeps the last batch (and so all) from pruning.
    return [x for x in result if isinstance(x, tf.Tensor)]

  # A concrete function's call skips tf.function's argument binding and
  # cache lookup, half of the call's Python cost here.
  concrete = run.get_concrete_function(input_sets[0])
  cycle = itertools.cycle(input_sets)
  return lambda: concrete(next(cycle))


def random_weights(num_leaves, rng):
  return rng.gamma(0.5, size=num_leaves) + 1e-3


def changing(updates):
  """`updates`, (indices, weights) pairs, then the same indices with twice
  the weights: cycled through, every set changes the leaves it writes, as a
  training step's do."""
  return updates + [(indices, 2 * weights) for indices, weights in updates]


def sampler_step(sampler, batch_size):
  """A training step's sampling: draw a batch, reweight it by `utility`."""

  def step(utility):
    indices, _ = sampler.sample_with_probabilities(batch_size)
    sampler.update(indices, utility)

  return step


def measure_ours(num_leaves, batch_size, weights, rng):
  """{name: (call, units per call)} of our ops at n, B."""
  tree = tf_adasamp.SumTree(num_leaves, initial_weights=weights, dtype=DTYPE)
  sampler = tf_adasamp.AdaptiveSampler(num_leaves,
                                       amplitude=1.0,
                                       decay=0.9,
                                       seed=0,
                                       dtype=DTYPE)
  generator = tf.random.Generator.from_seed(1)

  def sets(make):
    """INPUT_SETS tuples of tensors, each stacking UNROLL make()s."""
    return [
        tuple(
            tf.constant(np.stack(column))
            for column in zip(*[make()
                                for _ in range(UNROLL)]))
        for _ in range(INPUT_SETS)
    ]

  def uniforms():
    return (rng.random(batch_size),)

  def sorted_uniforms():
    return (np.sort(rng.random(batch_size)),)

  def unique_update():
    return (rng.choice(num_leaves, batch_size,
                       replace=False), random_weights(batch_size, rng))

  def utilities():
    return (rng.normal(size=batch_size),)

  def sample(uniforms):
    return tree.sample(uniforms)[0]

  def draw():
    return ops.sum_tree_draw(tree.variable.handle,
                             generator.state.handle,
                             batch_size,
                             T=DTYPE)[0]

  def measure(batch, input_sets, units=batch_size):
    return in_graph(batch, input_sets, UNROLL), UNROLL * units

  return {
      "sample":
          measure(sample, sets(uniforms)),
      "draw":
          measure(draw, [()]),
      "sorted":
          measure(sample, sets(sorted_uniforms)),
      "set":
          measure(tree.set, changing(sets(unique_update))),
      "reweight":
          measure(sampler.update, changing(sets(unique_update))),
      "step":
          measure(sampler_step(sampler, batch_size), sets(utilities), units=1),
  }


def step_breakdown(args, num_leaves=50000, batch_size=100):
  """Microseconds per in-graph op of one sampler step, and per step."""
  sampler = tf_adasamp.AdaptiveSampler(num_leaves,
                                       amplitude=1.0,
                                       decay=0.9,
                                       seed=0,
                                       dtype=DTYPE)
  rng = np.random.default_rng(1)
  counter = tf.Variable(0, dtype=tf.int64)
  uniforms = (tf.constant(rng.random((UNROLL, batch_size))),)
  indices = tf.constant(rng.integers(num_leaves, size=(UNROLL, batch_size)))
  utilities = (tf.constant(rng.normal(size=(UNROLL, batch_size))),)
  step = sampler_step(sampler, batch_size)

  parts = {
      "trivial op (AssignAddVariableOp)":
          (lambda: counter.assign_add(1, read_value=False), ()),
      "uniforms (generator.uniform)":
          (lambda: sampler.uniforms(batch_size), ()),
      "SumTreeSample (uniforms given)":
          (lambda u: sampler.tree.sample(u)[0], uniforms),
      "SumTreeDraw (uniforms made inside)":
          (lambda: sampler.sample(batch_size), ()),
      "AdaptiveReweight": (sampler.update, (indices, *utilities)),
      "step: draw + reweight": (step, utilities),
  }
  calls = {
      name: in_graph(batch, [inputs], UNROLL)
      for name, (batch, inputs) in parts.items()
  }
  one_step = tf.function(step)
  utility = utilities[0][0]
  calls["step, one tf.function call from Python"] = lambda: one_step(utility)
  times = seconds_per_call(calls, args.repeats, args.min_seconds)
  result, cpu = {}, {}
  for name, (wall, cpu_seconds) in times.items():
    batches = UNROLL if name in parts else 1
    result[name] = [1e6 * t / batches for t in wall]
    cpu[name] = [1e6 * t / batches for t in cpu_seconds]
  return result, cpu


def millions(rate):
  return f"{rate / 1e6:.3g}"


def print_tables(results):
  print("\nOurs (best / median over the runs):\n")
  print("| n | B | sample M draws/s | draw M draws/s | sorted M draws/s | "
        "set M updates/s | reweight M updates/s | step us | load |")
  print("|---|---|---|---|---|---|---|---|---|")
  for row in results:
    ours = row["ours"]
    cells = [
        f"{millions(ours[k]['best'])} / {millions(ours[k]['median'])}"
        for k in ("sample", "draw", "sorted", "set", "reweight")
    ]
    step = ours["step"]
    cells.append(f"{1e6 / step['best']:.1f} / {1e6 / step['median']:.1f}")
    print(f"| {row['n']} | {row['batch_size']} | {' | '.join(cells)} | "
          f"{row['load'][0]}-{row['load'][1]} |")


def print_cpu_table(results):
  """Our rates per CPU-second, where the machine is shared."""
  print("\nPer CPU-second of the process (all threads), median, M/s:\n")
  print("| n | B | sample | draw | set | reweight |")
  print("|---|---|---|---|---|---|")
  for row in results:
    cells = [
        millions(row["ours"][k]["cpu_median"])
        for k in ("sample", "draw", "set", "reweight")
    ]
    print(f"| {row['n']} | {row['batch_size']} | {' | '.join(cells)} |")


def find(results, num_leaves, batch_size):
  return next((row for row in results
               if row["n"] == num_leaves and row["batch_size"] == batch_size),
              None)


def print_targets(results, loop_steps):
  """Issue 7's and issue 17's targets on the ops alone, where this run
  measured them (the targets against peers: benchmarks.peer_comparison)."""
  print("\nTargets (median; best in brackets):")
  checks = []
  for num_leaves, batch_size, minimum in [(50000, 4096, 50e6),
                                          (50000, 4096, 20e6),
                                          (10**7, 4096, 5e6)]:
    row = find(results, num_leaves, batch_size)
    if row:
      sample = row["ours"]["sample"]
      checks.append((f"draws/s at n={num_leaves}, B={batch_size} >= "
                     f"{minimum / 1e6:g}M", sample["median"]
                     >= minimum, f"{millions(sample['median'])}M "
                     f"[{millions(sample['best'])}M]"))
  step = loop_steps["sampler"]
  for limit in (15, 25):
    checks.append(
        (f"in-graph step (tf.range loop) at n=5e4, B=100 <= {limit} us",
         statistics.median(step)
         <= limit, f"{statistics.median(step):.1f} us [{min(step):.1f} us]"))
  for name, met, figure in checks:
    print(f"  {name}: {figure} ({'met' if met else 'NOT met'})")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sizes",
                      type=int,
                      nargs="+",
                      default=[10**4, 5 * 10**4, 10**6, 10**7])
  parser.add_argument("--batch-sizes",
                      type=int,
                      nargs="+",
                      default=[128, 1024, 4096])
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--min-seconds",
                      type=float,
                      default=0.05,
                      help="the shortest run")
  parser.add_argument("--output",
                      default=os.path.join(os.path.dirname(__file__), "results",
                                           "sum_tree_throughput.json"))
  args = parser.parse_args()

  command = " ".join(
      ["python -m benchmarks.sum_tree_throughput", *sys.argv[1:]])
  info = machine()
  print(command, json.dumps(info), sep="\n")
  rng = np.random.default_rng(0)
  results = []
  for num_leaves in args.sizes:
    weights = random_weights(num_leaves, rng)
    for batch_size in args.batch_sizes:
      before = load()
      ours = rates(measure_ours(num_leaves, batch_size, weights, rng),
                   args.repeats, args.min_seconds)
      results.append({
          "n": num_leaves,
          "batch_size": batch_size,
          "ours": ours,
          "load": [before, load()]
      })
      print(
          f"n={num_leaves} B={batch_size}: "
          f"{millions(ours['sample']['median'])}M draws/s "
          f"(load {before})",
          flush=True)
  print_tables(results)
  print_cpu_table(results)

  before = load()
  breakdown, breakdown_cpu = step_breakdown(args)
  print(f"\nOne sampler step at n=50000, B=100, in-graph unless said "
        f"(us per op; load {before}-{load()}):\n")
  print("| op | best us | median us | median CPU us (all threads) |\n"
        "|---|---|---|---|")
  for name, times in breakdown.items():
    print(f"| {name} | {min(times):.2f} | {statistics.median(times):.2f} | "
          f"{statistics.median(breakdown_cpu[name]):.2f} |")

  # As a training loop runs it: the step in a tf.range loop of many
  # iterations (steps_per_execution), the loop's own cost included.
  before = load()
  loop_steps = gpu_steps.microseconds_per_step(gpu_steps.sampler_loops(100),
                                               LOOP_STEPS, args.repeats)
  print(f"\nThe same in a tf.range loop of {LOOP_STEPS} iterations (us per "
        f"iteration; load {before}-{load()}):\n")
  print("| loop body | best us | median us |\n|---|---|---|")
  for name, times in loop_steps.items():
    print(f"| {gpu_steps.LOOP_BODIES[name]} | {min(times):.2f} | "
          f"{statistics.median(times):.2f} |")
  print_targets(results, loop_steps)

  os.makedirs(os.path.dirname(args.output), exist_ok=True)
  with open(args.output, "w") as f:
    json.dump(
        {
            "command": command,
            "machine": info,
            "unroll": UNROLL,
            "repeats": args.repeats,
            "results": results,
            "step_breakdown_us": breakdown,
            "loop_step_us": loop_steps,
            "step_breakdown_cpu_us": breakdown_cpu
        },
        f,
        indent=1)
  print(f"wrote {args.output}")


if __name__ == "__main__":
  main()
