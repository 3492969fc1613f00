"""Examples/s of an adaptive tf.data pipeline against uniform shuffling.

Target (issue 4): adaptive sampling delivers >= 0.9x the examples/s of the
same pipeline with uniform shuffling, on CIFAR-10-sized in-memory data
(50000 x 32x32x3 uint8 images and int64 labels), batch 100.

Pipelines, each ending in prefetch(AUTOTUNE):
  uniform_shuffle   from_tensor_slices((x, y)).shuffle(50000).batch(100)
  uniform_gather    range(n).shuffle(n).batch(100), then gather (x, y)
  adaptive          AdaptiveSampling(sampler, 100).dataset((x, y)), the
                    default max_lag=1
  adaptive_nolag    the same with max_lag=0 (exact Algorithm 1)
  adaptive_lag8     the same with max_lag=8
  adaptive_draws    the same with max_lag=None and no updates: the
                    pipeline alone, without the sampler update
There is no model: each batch goes to a step that does nothing for the
uniform pipelines and adaptive_draws and, for the other adaptive ones,
reports stand-in utilities with stage.update, the work adaptive sampling
adds to a train step.
Consumers:
  graph_loop   all steps in one tf.function looping over the iterator (as
               Keras's steps_per_execution or a `tf.range` loop): measures
               the pipeline
  python_loop  a step tf.function called from Python per batch: measures the
               per-step dispatch as much as the pipeline
Each run takes `--steps` batches after `--warmup` from a fresh pipeline;
runs alternate between pipelines; the table gives min, median and max.

  python -m benchmarks.data_pipeline [--steps 300] [--repeats 5]
"""

import argparse
import functools
import json
import os
import statistics
import time

import numpy as np
import tensorflow as tf

from benchmarks.machine import load
from benchmarks.machine import machine
import tf_adasamp
from tf_adasamp import data

NUM_EXAMPLES = 50000
BATCH_SIZE = 100


def cifar_sized(seed):
  rng = np.random.default_rng(seed)
  images = rng.integers(0, 256, (NUM_EXAMPLES, 32, 32, 3), dtype=np.uint8)
  labels = rng.integers(0, 10, NUM_EXAMPLES).astype(np.int64)
  return tf.constant(images), tf.constant(labels)


def uniform_shuffle(images, labels):
  dataset = (tf.data.Dataset.from_tensor_slices(
      (images, labels)).shuffle(NUM_EXAMPLES).repeat().batch(BATCH_SIZE))
  return dataset.prefetch(tf.data.AUTOTUNE), lambda batch: None


def uniform_gather(images, labels):
  dataset = (tf.data.Dataset.range(NUM_EXAMPLES).shuffle(
      NUM_EXAMPLES).repeat().batch(BATCH_SIZE).map(
          lambda i: (tf.gather(images, i), tf.gather(labels, i))))
  return dataset.prefetch(tf.data.AUTOTUNE), lambda batch: None


def adaptive(images, labels, report=True, **options):
  sampler = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES,
                                       amplitude=1.0,
                                       decay=0.9,
                                       seed=0)
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE, **options)
  # A stand-in for the model's per-example L1 utilities.
  utilities = tf.constant(np.random.default_rng(1).uniform(size=NUM_EXAMPLES))

  def step(batch):
    if report:
      indices = batch[2]
      stage.update(indices, tf.gather(utilities, indices))

  return stage.dataset((images, labels)).prefetch(tf.data.AUTOTUNE), step


PIPELINES = {
    "uniform_shuffle": uniform_shuffle,
    "uniform_gather": uniform_gather,
    "adaptive": adaptive,
    "adaptive_nolag": functools.partial(adaptive, max_lag=0),
    "adaptive_lag8": functools.partial(adaptive, max_lag=8),
    "adaptive_draws": functools.partial(adaptive, max_lag=None, report=False),
}


def in_graph(dataset, step):
  """Takes batches in one tf.function, as Keras's steps_per_execution or a
  custom loop over `tf.range` does."""
  iterator = iter(dataset)

  @tf.function
  def take(steps):
    batch = next(iterator)
    step(batch)
    for _ in tf.range(steps - 1):
      batch = next(iterator)
      step(batch)
    return batch[1]

  return lambda steps: take(tf.constant(steps)).numpy()


def in_python(dataset, step):
  """Takes batches from Python, calling a step tf.function on each."""
  iterator = iter(dataset)
  step = tf.function(step)

  def take(steps):
    for _ in range(steps):
      batch = next(iterator)
      step(batch)
    return batch[1].numpy()

  return take


CONSUMERS = {"graph_loop": in_graph, "python_loop": in_python}


def examples_per_second(make, images, labels, consumer, steps, warmup):
  dataset, step = make(images, labels)
  take = CONSUMERS[consumer](dataset, step)
  take(warmup)
  start = time.perf_counter()
  take(steps)
  return steps * BATCH_SIZE / (time.perf_counter() - start)


def report(rates):
  """Prints one consumer's table; returns its JSON entry."""
  medians = {name: statistics.median(values) for name, values in rates.items()}
  print(f"{'pipeline':<16} {'min ex/s':>10} {'median ex/s':>12} "
        f"{'max ex/s':>10} {'vs shuffle':>11} {'vs gather':>10}")
  entry = {}
  for name, values in rates.items():
    entry[name] = {
        "examples_per_second": values,
        "median": medians[name],
        "ratio_to_uniform_shuffle": medians[name] / medians["uniform_shuffle"],
        "ratio_to_uniform_gather": medians[name] / medians["uniform_gather"]
    }
    print(f"{name:<16} {min(values):>10.0f} {medians[name]:>12.0f} "
          f"{max(values):>10.0f} "
          f"{entry[name]['ratio_to_uniform_shuffle']:>10.2f}x "
          f"{entry[name]['ratio_to_uniform_gather']:>9.2f}x")
  ratio = entry["adaptive"]["ratio_to_uniform_shuffle"]
  print(f"target, adaptive >= 0.9x uniform_shuffle (medians): {ratio:.2f}x, "
        f"{'met' if ratio >= 0.9 else 'NOT met'}")
  return entry


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=300)
  parser.add_argument("--warmup", type=int, default=30)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--output",
                      default=os.path.join(os.path.dirname(__file__), "results",
                                           "data_pipeline.json"))
  args = parser.parse_args()

  info = machine()
  print(json.dumps(info))
  load_before = load()
  images, labels = cifar_sized(seed=0)
  results = {}
  for consumer in CONSUMERS:
    rates = {name: [] for name in PIPELINES}
    for _ in range(args.repeats):
      for name, make in PIPELINES.items():
        rates[name].append(
            examples_per_second(make, images, labels, consumer, args.steps,
                                args.warmup))
    print(f"\n{consumer} (batch {BATCH_SIZE}, {args.steps} batches, "
          f"{args.repeats} runs)")
    results[consumer] = report(rates)

  os.makedirs(os.path.dirname(args.output), exist_ok=True)
  with open(args.output, "w") as f:
    json.dump(
        {
            "batch_size": BATCH_SIZE,
            "num_examples": NUM_EXAMPLES,
            "steps": args.steps,
            "warmup": args.warmup,
            "repeats": args.repeats,
            "machine": info,
            "load": [load_before, load()],
            "results": results
        },
        f,
        indent=2)
  print(f"wrote {args.output}")


if __name__ == "__main__":
  main()
