"""How a sampler of n examples fits one machine: state, peak memory, rates.

Builds `AdaptiveSampler(n)` (n = 10^8 by default) on the CPU and reports:
  build_s          seconds for the constructor (uniform weights, both trees)
  state_bytes      the bytes of the sampler's variables
  peak_above_base  the process's peak resident memory (VmHWM, reset just
                   before) during the build, less its resident memory just
                   before, after TensorFlow and the op library loaded
  draws/s          batches of B drawn per second (`sample`), and examples/s
  reweights/s      updates of B drawn indices per second (`update`)
  *_cpu_ms         the process's CPU time a call, all threads: the cost
                   where the machine's cores are shared
Each rate is the median of `--repeats` timed runs of `--steps` calls, every
call a `tf.function` called from Python, after one untimed call.

  python -m benchmarks.sampler_scale [--num_examples 100000000]
      [--batch_size 1024] [--dtype float64]
"""

import argparse
import json
import statistics
import time

import numpy as np
import tensorflow as tf

from benchmarks.machine import load
from benchmarks.machine import machine
import tf_adasamp


def resident_kib(field):
  """A field of /proc/self/status in KiB: VmRSS (now) or VmHWM (peak)."""
  with open("/proc/self/status", encoding="ascii") as status:
    for line in status:
      if line.startswith(field + ":"):
        return int(line.split()[1])
  raise RuntimeError(f"/proc/self/status has no {field}")


def state_bytes(sampler):
  return sum(v.shape.num_elements() * v.dtype.size for v in sampler.variables)


def rate(call, steps, repeats):
  """Median calls per second of `call` over `repeats` runs of `steps`, and
  the median CPU milliseconds a call (the process's, all threads)."""
  call()
  rates, cpu_ms = [], []
  for _ in range(repeats):
    start, start_cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
      result = call()
    np.asarray(result)  # the last call's value, so all have run
    rates.append(steps / (time.perf_counter() - start))
    cpu_ms.append(1000 * (time.process_time() - start_cpu) / steps)
  return statistics.median(rates), statistics.median(cpu_ms)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--num_examples", type=int, default=10**8)
  parser.add_argument("--batch_size", type=int, default=1024)
  parser.add_argument("--dtype", default="float64")
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--output", help="a JSON file for the figures")
  args = parser.parse_args()

  with tf.device("/cpu:0"):
    tf_adasamp.AdaptiveSampler(2, amplitude=0.1, decay=0.5)  # loads the ops
    with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
      refs.write("5")  # resets VmHWM to the resident memory now
    base_kib = resident_kib("VmRSS")
    start = time.perf_counter()
    sampler = tf_adasamp.AdaptiveSampler(args.num_examples,
                                         amplitude=0.1,
                                         decay=0.5,
                                         seed=0,
                                         dtype=args.dtype)
    build_s = time.perf_counter() - start
    peak_kib = resident_kib("VmHWM") - base_kib
    batch = args.batch_size
    draw = tf.function(lambda: sampler.sample(batch))
    indices = sampler.sample(batch)
    utilities = tf.random.stateless_uniform([batch], [1, 2], dtype=tf.float64)

    @tf.function
    def reweight():
      sampler.update(indices, utilities)
      return indices

    draws, draw_cpu_ms = rate(draw, args.steps, args.repeats)
    reweights, reweight_cpu_ms = rate(reweight, args.steps, args.repeats)
  figures = {
      "num_examples": args.num_examples,
      "dtype": args.dtype,
      "batch_size": batch,
      "build_s": round(build_s, 2),
      "state_gib": round(state_bytes(sampler) / 2**30, 3),
      "peak_above_base_gib": round(peak_kib / 2**20, 3),
      "draws_per_s": round(draws, 1),
      "examples_drawn_per_s": round(draws * batch),
      "draw_cpu_ms": round(draw_cpu_ms, 3),
      "reweights_per_s": round(reweights, 1),
      "reweight_cpu_ms": round(reweight_cpu_ms, 3),
      "load": load(),
      "machine": machine(),
  }
  print(json.dumps(figures, indent=1))
  if args.output:
    with open(args.output, "w", encoding="utf-8") as out:
      json.dump(figures, out, indent=1)


if __name__ == "__main__":
  main()
