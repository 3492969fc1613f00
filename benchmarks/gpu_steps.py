"""In-graph step costs for the GPU half of issue 15 (runs on any device).

  sampler   one AdaptiveSampler step (draw B, reweight the B draws by fixed
            utilities) at n = 50000, B = 100, against the same tf.range loop
            doing nothing but a dependent add: the sampler's own cost per
            step, launch gaps included; and its parts, and the step with the
            generator's own uniform ops (sampler_loops)
  mlp       an SGD step of an MLP 256-512-10 (ReLU) on n = 50000 random
            784-feature examples, batch 128: uniform draws against adaptive
            ones (zero-one utilities of the step's own forward pass,
            utility_at="step"), as steps.make_train_step builds them
  cnn       the same for the paper's CNN at batch 100, on n = 50000 random
            images of Fashion-MNIST's size (28x28x1) and of CIFAR-10's
            (32x32x3), compiled by XLA only (as the study runs it)

Every variant is one tf.function running --steps steps in a tf.range loop
(as the trainer's steps_per_execution), called --repeats times after a
warm-up, variants alternating; the median microseconds per step are printed
and written as JSON after each part. Each also runs compiled whole by XLA
(jit_compile=True, named "... (XLA)"), unless it fails to compile (said,
then left out); --compiled_only runs those alone.

  python -m benchmarks.gpu_steps [--steps 200] [--repeats 7] [--compiled_only]
"""

import argparse
import json
import os
import statistics
import time

import numpy as np
import tensorflow as tf

from benchmarks.machine import machine
from tf_adasamp.experiment.training import components
from tf_adasamp.experiment.training import models
from tf_adasamp.experiment.training import steps
from tf_adasamp.sampler import AdaptiveSampler

NUM_EXAMPLES = 50000

# What each of sampler_loops' loops runs per iteration.
LOOP_BODIES = {
    "empty": "the loop alone (AssignAddVariableOp)",
    "sampler": "step: draw + reweight",
    "draw": "draw (SumTreeDraw)",
    "update": "reweight (AdaptiveReweight)",
    "separate_uniforms": "step, the generator's own uniform ops + "
                         "SumTreeSample + reweight",
}


def range_loop(body, result, jit_compile):
  """A tf.function of a step count: body() that many times in a tf.range
  loop, then result()."""

  @tf.function(jit_compile=jit_compile)
  def run(count):
    for _ in tf.range(count):
      body()
    return result()

  return run


def sampler_loops(batch_size, jit_compile=False):
  """The sampler's loops, each a tf.function of the step count: "empty",
  "sampler" (a whole step), its parts "draw" and "update", and
  "separate_uniforms", the step with the generator's uniforms drawn by the
  generator's own ops and then sampled (as before the fused draw op)."""
  sampler = AdaptiveSampler(NUM_EXAMPLES, amplitude=1.0, decay=0.5, seed=0)
  rng = np.random.default_rng(0)
  utilities = tf.constant(rng.random(batch_size))
  indices = tf.constant(rng.integers(NUM_EXAMPLES, size=batch_size))
  counter = tf.Variable(0, dtype=tf.int64)

  def loop(body):
    return range_loop(body, counter.read_value, jit_compile)

  return {
      "empty":
          loop(lambda: counter.assign_add(1)),
      "sampler":
          loop(lambda: sampler.update(sampler.sample(batch_size), utilities)),
      "draw":
          loop(lambda: sampler.sample(batch_size)),
      "update":
          loop(lambda: sampler.update(indices, utilities)),
      "separate_uniforms":
          loop(lambda: sampler.update(
              sampler.tree.sample(sampler.uniforms(batch_size))[0], utilities)),
  }


def mlp(shape):
  return tf.keras.Sequential([
      tf.keras.Input(shape),
      tf.keras.layers.Dense(256, activation="relu"),
      tf.keras.layers.Dense(512, activation="relu"),
      tf.keras.layers.Dense(10)
  ])


def cnn(shape):
  return models.build("cnn", shape, 10, seed=0)


def training_loops(batch_size, shape=(784,), build=mlp, jit_compile=False):
  """{"uniform": loop, "adaptive": loop} of SGD steps of build(shape) (an
  MLP 256-512-10 by default) on NUM_EXAMPLES random examples of `shape`."""
  rng = np.random.default_rng(0)
  images = tf.constant(rng.random((NUM_EXAMPLES, *shape), dtype=np.float32))
  labels = tf.constant(rng.integers(0, 10, NUM_EXAMPLES).astype(np.int32))
  loops = {}
  for sampling in ("uniform", "adaptive"):
    model = build(shape)
    sampler = components.make_sampler(sampling, NUM_EXAMPLES, 1.0, 0.5, seed=0)
    step = steps.make_train_step(model,
                                 components.make_optimizer("sgd", 0.01, 0.0),
                                 sampler,
                                 images,
                                 labels,
                                 batch_size,
                                 utility_at="step")

    def loop(count, step=step):
      loss = tf.zeros([])
      for _ in tf.range(count):
        loss += step()[0]
      return loss

    loops[sampling] = tf.function(loop, jit_compile=jit_compile)
  return loops


def with_xla(steps, compiled_only, make_loops, *args, **kwargs):
  """make_loops(*args, **kwargs) (unless `compiled_only`) and its loops
  compiled by XLA, named "... (XLA)", if they compile and run for `steps`
  steps."""
  loops = {} if compiled_only else make_loops(*args, **kwargs)
  compiled = make_loops(*args, **kwargs, jit_compile=True)
  try:
    for loop in compiled.values():
      loop(tf.constant(steps, tf.int64)).numpy()
  except tf.errors.OpError as error:
    print(f"XLA left out: {error.message.splitlines()[0]}")
    return loops
  loops.update({f"{name} (XLA)": loop for name, loop in compiled.items()})
  return loops


def microseconds_per_step(loops, steps, repeats):
  """{name: [us per step of each repeat]}, the loops alternating."""
  count = tf.constant(steps, tf.int64)
  for loop in loops.values():
    loop(count).numpy()  # traces and warms up
  times = {name: [] for name in loops}
  for _ in range(repeats):
    for name, loop in loops.items():
      start = time.perf_counter()
      loop(count).numpy()  # waits for the device
      times[name].append((time.perf_counter() - start) / steps * 1e6)
  return times


def median_microseconds(loops, steps, repeats):
  """{name: median microseconds per step}, the loops alternating."""
  times = microseconds_per_step(loops, steps, repeats)
  return {name: statistics.median(values) for name, values in times.items()}


def adaptive_over_uniform(times, title):
  """{"adaptive_over_uniform[ (XLA)]": ratio} of `times`' uniform and
  adaptive loops, each pair printed under `title`."""
  ratios = {}
  for suffix in ("", " (XLA)"):
    if "uniform" + suffix not in times:
      continue
    uniform, adaptive = times["uniform" + suffix], times["adaptive" + suffix]
    ratios["adaptive_over_uniform" + suffix] = adaptive / uniform
    print(f"{title}{suffix}: uniform {uniform:.1f} us, adaptive "
          f"{adaptive:.1f} us per step; adaptive / uniform "
          f"{adaptive / uniform:.3f}x")
  return ratios


# The CNN's inputs: Fashion-MNIST's size and CIFAR-10's.
CNN_SHAPES = {"28x28x1": (28, 28, 1), "32x32x3": (32, 32, 3)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--repeats", type=int, default=7)
  parser.add_argument("--compiled_only", action="store_true")
  parser.add_argument("--output",
                      default=os.path.join(os.path.dirname(__file__), "results",
                                           "gpu_steps.json"))
  args = parser.parse_args()

  info = machine()
  print(json.dumps(info))
  sampler = median_microseconds(
      with_xla(args.steps, args.compiled_only, sampler_loops, 100), args.steps,
      args.repeats)
  print(f"n = {NUM_EXAMPLES}, B = 100, us per loop iteration (over the empty "
        "loop's, compiled alike):")
  for name, micros in sampler.items():
    empty = sampler["empty (XLA)" if name.endswith("(XLA)") else "empty"]
    print(f"  {name}: {micros:.1f} ({micros - empty:+.1f})")
  mlp_us = median_microseconds(
      with_xla(args.steps, args.compiled_only, training_loops, 128), args.steps,
      args.repeats)
  results = {
      "steps": args.steps,
      "repeats": args.repeats,
      "machine": info,
      "sampler_us": sampler,
      "mlp_us": mlp_us,
      "mlp_ratios": adaptive_over_uniform(mlp_us, "MLP 256-512-10, B = 128"),
      "cnn_us": {},
      "cnn_ratios": {},
  }
  write(results, args.output)
  for name, shape in CNN_SHAPES.items():
    times = median_microseconds(
        with_xla(args.steps, True, training_loops, 100, shape=shape, build=cnn),
        args.steps, args.repeats)
    results["cnn_us"][name] = times
    results["cnn_ratios"][name] = adaptive_over_uniform(
        times, f"paper CNN {name}, B = 100")
    write(results, args.output)


def write(results, path):
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w") as f:
    json.dump(results, f, indent=2)
  print(f"wrote {path}", flush=True)


if __name__ == "__main__":
  main()
