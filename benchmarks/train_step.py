"""Time per training step of the paper's CNN: uniform vs adaptive sampling.

Target (issue 6): with the cheaper utility option (utility_at="step"),
adaptive sampling's time per step is within 3% of uniform sampling's, for the
paper's CNN at batch 100. The default option (utility_at="updated",
Algorithm 1's h_t) adds a second, inference-mode forward pass over the batch;
its cost is reported beside.

Variants, each a `tf_adasamp.experiment.training.steps.make_train_step`
(sample, gather,
forward/backward, SGD update and, when adaptive, utility and reweighting, in
one tf.function) on the same initial model:
  uniform            UniformSampler
  adaptive_step      AdaptiveSampler(amplitude=1, decay=0.5), zero-one
                     utility from the step's own forward pass (h_{t-1})
  adaptive_updated   the same, utility from a second pass after the update
Data: CIFAR-sized random images (50000 x 32x32x3 float32) and the 1500
training digits (8x8x1). Each timed run calls the step `--steps` times from
Python, as the trainer does, after `--warmup` untimed steps; each round runs
every variant once, back to back, in a rotating order, so load from other
processes falls on all of them. Reports min and median seconds per step over
`--repeats` rounds, and the median of the per-round ratios to uniform.

  python -m benchmarks.train_step [--steps 10] [--repeats 40] [--jit_compile]

--jit_compile compiles each variant's step whole with XLA, the sampler's ops
included (on the CPU, XLA's convolutions are far slower than TensorFlow's).

--trainer instead compares the trainer (tf_adasamp.experiment.training.loop,
which runs `steps_per_execution` steps per call and tracks the bounds
in-graph) with the adaptive_updated step it runs, on the digits CNN (or
--model logistic), both compiled by XLA with --jit_compile: the
trainer's seconds per step are the time of a run of 25 + --steps steps minus
that of a run of 25 (the two in alternating order), each evaluating at its
start and end only, so startup, tracing, compiling and evaluation cancel, up
to their spread: give enough steps to dwarf it. Beside it, the step called
--steps times from Python. --rounds rounds; the median of the rounds'
ratios, in wall-clock and in CPU time (which other processes' load disturbs
less).

  python -m benchmarks.train_step --trainer [--steps 600] [--rounds 5] \
      [--model logistic] [--jit_compile]
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
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import models
from tf_adasamp.experiment.training import steps
from tf_adasamp.experiment.training import uniform_sampler
from tf_adasamp.sampler import AdaptiveSampler

BATCH_SIZE = 100
CIFAR_SIZED_EXAMPLES = 50000
VARIANTS = {
    "uniform": None,
    "adaptive_step": "step",
    "adaptive_updated": "updated",
}


def cifar_sized(seed):
  rng = np.random.default_rng(seed)
  images = rng.random((CIFAR_SIZED_EXAMPLES, 32, 32, 3), dtype=np.float32)
  labels = rng.integers(0, 10, CIFAR_SIZED_EXAMPLES).astype(np.int32)
  return images, labels


def digits():
  data = datasets.load("digits")
  return data.x_train, data.y_train


def make_step(images, labels, utility_at, jit_compile=False, model_name="cnn"):
  """One variant's train step, on the model every variant starts from."""
  model = models.build(model_name, images.shape[1:], 10, seed=0)
  optimizer = components.make_optimizer("sgd", 0.01, 0.0)
  num_examples = len(labels)
  if utility_at is None:
    sampler = uniform_sampler.UniformSampler(num_examples, seed=0)
  else:
    sampler = AdaptiveSampler(num_examples, amplitude=1.0, decay=0.5, seed=0)
  step = steps.make_train_step(model,
                               optimizer,
                               sampler,
                               tf.constant(images),
                               tf.constant(labels),
                               BATCH_SIZE,
                               utility="zero_one",
                               utility_at=utility_at or "updated")
  if jit_compile:
    return tf.function(step.python_function, jit_compile=True)
  return step


def seconds_per_step(step, steps):
  start = time.perf_counter()
  for _ in range(steps):
    loss = step()[0]
  float(loss)  # waits for the last step
  return (time.perf_counter() - start) / steps


def benchmark(images, labels, steps, warmup, repeats, jit_compile):
  """{variant: [seconds per step of each run]}."""
  train_steps = {
      name: make_step(images, labels, utility_at, jit_compile)
      for name, utility_at in VARIANTS.items()
  }
  for step in train_steps.values():
    seconds_per_step(step, warmup)
  times = {name: [] for name in VARIANTS}
  names = list(VARIANTS)
  for repeat in range(repeats):
    # A different variant goes first each round.
    shift = repeat % len(names)
    for name in names[shift:] + names[:shift]:
      times[name].append(seconds_per_step(train_steps[name], steps))
  return times


def report(times):
  """Prints one data set's table; returns its JSON entry.

  Besides min and median, the median over rounds of each round's time
  ratio to uniform: the variants of a round run back to back, under much
  the same load from other processes.
  """
  print(f"{'variant':<18} {'min ms':>8} {'median ms':>10} "
        f"{'min vs unif':>12} {'paired median vs unif':>22}")
  entry = {}
  for name, values in times.items():
    paired = statistics.median(t / u for t, u in zip(values, times["uniform"]))
    entry[name] = {
        "seconds_per_step": values,
        "min": min(values),
        "median": statistics.median(values),
        "min_ratio_to_uniform": min(values) / min(times["uniform"]),
        "paired_median_ratio_to_uniform": paired
    }
    print(f"{name:<18} {1e3 * entry[name]['min']:>8.2f} "
          f"{1e3 * entry[name]['median']:>10.2f} "
          f"{entry[name]['min_ratio_to_uniform']:>11.3f}x {paired:>21.3f}x")
  overhead = entry["adaptive_step"]["paired_median_ratio_to_uniform"] - 1
  print(f"adaptive_step over uniform (paired median): {100 * overhead:+.1f}% "
        f"(target within 3%: {'met' if overhead <= 0.03 else 'NOT met'})")
  return entry


def trainer_benchmark(steps, rounds, model, jit_compile, base_steps=25):
  """Per round, the trainer's and the step's seconds per step, wall clock
  and CPU (all of this process's threads: less sensitive to other load)."""
  data = datasets.load("digits")
  step = make_step(data.x_train, data.y_train, "updated", jit_compile, model)

  def timed(run):
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return np.array([time.perf_counter() - wall, time.process_time() - cpu])

  def trainer_run(total):
    # The settings of `make_step`'s step.
    config = config_lib.TrainConfig(dataset="digits",
                                    model=model,
                                    utility_at="updated",
                                    beta=0.0,
                                    steps=total,
                                    eval_interval=total,
                                    jit_compile=jit_compile)
    seconds = timed(lambda: loop.train(config, data=data))
    tf.keras.backend.clear_session()
    return seconds

  def step_run():
    for _ in range(steps):
      loss = step()[0]
    float(loss)  # waits for the last step

  # Untimed: the first of each pays for what the process sets up once.
  trainer_run(base_steps)
  step_run()
  times = {name: {"wall": [], "cpu": []} for name in ("trainer", "train_step")}
  for round_ in range(rounds):
    # Alternated, so what warms up over the rounds (caches, the GPU's
    # clocks) favours neither run.
    totals = [base_steps + steps, base_steps]
    if round_ % 2:
      totals.reverse()
    seconds = {total: trainer_run(total) for total in totals}
    trainer = seconds[base_steps + steps] - seconds[base_steps]
    train_step = timed(step_run)
    for name, (wall, cpu) in [("trainer", trainer / steps),
                              ("train_step", train_step / steps)]:
      times[name]["wall"].append(wall)
      times[name]["cpu"].append(cpu)
    print(
        f"ms/step, wall (cpu): trainer {1e3 * times['trainer']['wall'][-1]:.2f}"
        f" ({1e3 * times['trainer']['cpu'][-1]:.2f}), train_step "
        f"{1e3 * times['train_step']['wall'][-1]:.2f} "
        f"({1e3 * times['train_step']['cpu'][-1]:.2f}); load "
        f"{os.getloadavg()[0]:.2f}",
        flush=True)
  ratios = {
      clock:
          statistics.median(t / s for t, s in zip(times["trainer"][clock],
                                                  times["train_step"][clock]))
      for clock in ("wall", "cpu")
  }
  print(f"trainer / train_step, median of {rounds} rounds: wall "
        f"{ratios['wall']:.3f}x, cpu {ratios['cpu']:.3f}x (target <= 1.1x)")
  return {**times, "median_ratio": ratios}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps",
                      type=int,
                      default=None,
                      help="default 10, or 600 with --trainer")
  parser.add_argument("--warmup", type=int, default=10)
  parser.add_argument("--repeats", type=int, default=40)
  parser.add_argument("--datasets", default="cifar_sized,digits")
  parser.add_argument("--trainer", action="store_true")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--jit_compile", action="store_true")
  parser.add_argument("--model",
                      default="cnn",
                      choices=config_lib.MODELS,
                      help="the trainer's model, with --trainer")
  parser.add_argument("--output",
                      default=None,
                      help="default "
                      "results/train_step.json, or results/trainer_step.json "
                      "with --trainer")
  args = parser.parse_args()
  results_dir = os.path.join(os.path.dirname(__file__), "results")

  info = machine()
  print(json.dumps(info))
  if args.trainer:
    steps = args.steps or 600
    output = args.output or os.path.join(results_dir, "trainer_step.json")
    result = trainer_benchmark(steps, args.rounds, args.model, args.jit_compile)
    os.makedirs(os.path.dirname(output), exist_ok=True)
    with open(output, "w") as f:
      json.dump(
          {
              "steps": steps,
              "rounds": args.rounds,
              "model": args.model,
              "jit_compile": args.jit_compile,
              "machine": info,
              "results": result
          },
          f,
          indent=2)
    print(f"wrote {output}")
    return
  args.steps = args.steps or 10
  args.output = args.output or os.path.join(results_dir, "train_step.json")
  results = {}
  sources = {"cifar_sized": lambda: cifar_sized(seed=0), "digits": digits}
  for name in args.datasets.split(","):
    load_data = sources[name]
    images, labels = load_data()
    print(f"\n{name}: {len(labels)} x {'x'.join(map(str, images.shape[1:]))}"
          f", batch {BATCH_SIZE}, {args.steps} steps x {args.repeats} runs")
    results[name] = report(
        benchmark(images, labels, args.steps, args.warmup, args.repeats,
                  args.jit_compile))

  os.makedirs(os.path.dirname(args.output), exist_ok=True)
  with open(args.output, "w") as f:
    json.dump(
        {
            "batch_size": BATCH_SIZE,
            "steps": args.steps,
            "warmup": args.warmup,
            "repeats": args.repeats,
            "jit_compile": args.jit_compile,
            "machine": info,
            "results": results
        },
        f,
        indent=2)
  print(f"wrote {args.output}")


if __name__ == "__main__":
  main()
