"""What adaptive sampling adds to a CPU training step, at batch 100.

SGD steps on the same model and data, each one tf.function call from Python,
as in a training loop:
  uniform    indices from a tf.random.Generator, uniform over [0, n)
  sampler    indices from AdaptiveSampler (London, NIPS 2017, Algorithm 1),
             then reweighting the batch by fixed utilities: the sampler's ops
             alone
  adaptive   the same, reweighting by the batch's zero-one utilities, which
             the step also has to compute
Models: the paper's CNN (DESIGN.md: conv32-conv32-pool-drop.25,
conv64-conv64-pool-drop.25, dense512-drop.5, softmax) on 32x32x3 images, and a
small MLP (64-128-10) on 8x8 images; n = 50000 random images each. The three
steps alternate over --repeats runs (of 10 CNN steps, 500 MLP steps); reported
are the best and median ms per step, and the extra time over uniform.

  python -m benchmarks.training_step_cost [--repeats 10]
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import tensorflow as tf

from benchmarks.machine import load
from benchmarks.machine import machine
import tf_adasamp

NUM_EXAMPLES = 50000
BATCH_SIZE = 100
NUM_CLASSES = 10


def paper_cnn():
  layers = tf.keras.layers

  def block(filters):
    return [
        layers.Conv2D(filters, 3, padding="same", activation="relu"),
        layers.Conv2D(filters, 3, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Dropout(0.25)
    ]

  return tf.keras.Sequential([
      tf.keras.Input((32, 32, 3)), *block(32), *block(64),
      layers.Flatten(),
      layers.Dense(512, activation="relu"),
      layers.Dropout(0.5),
      layers.Dense(NUM_CLASSES)
  ])


def small_mlp():
  return tf.keras.Sequential([
      tf.keras.Input((8, 8, 1)),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(128, activation="relu"),
      tf.keras.layers.Dense(NUM_CLASSES)
  ])


# Each model's builder, image shape and steps per run.
MODELS = {
    "cnn": (paper_cnn, (32, 32, 3), 10),
    "mlp": (small_mlp, (8, 8, 1), 500)
}


def make_steps(build, image_shape, seed=0):
  """The three train steps, on one model and data set."""
  rng = np.random.default_rng(seed)
  images = tf.constant(
      rng.integers(0, 256, (NUM_EXAMPLES, *image_shape), dtype=np.uint8))
  labels = tf.constant(rng.integers(0, NUM_CLASSES, NUM_EXAMPLES))
  tf.keras.utils.set_random_seed(seed)
  model = build()
  optimizer = tf.keras.optimizers.SGD(0.01)
  generator = tf.random.Generator.from_seed(seed)
  sampler = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES,
                                       amplitude=1.0,
                                       decay=0.9,
                                       seed=seed)
  fixed_utilities = tf.constant(rng.uniform(size=BATCH_SIZE))

  def train(indices):
    """One SGD step on the examples `indices`; returns their labels and
    logits."""
    x = tf.cast(tf.gather(images, indices), tf.float32) / 255
    y = tf.gather(labels, indices)
    with tf.GradientTape() as tape:
      logits = model(x, training=True)
      loss = tf.reduce_mean(
          tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return y, logits

  @tf.function
  def uniform():
    train(generator.uniform([BATCH_SIZE], maxval=NUM_EXAMPLES, dtype=tf.int64))

  @tf.function
  def sampler_only():
    indices = sampler.sample(BATCH_SIZE)
    train(indices)
    sampler.update(indices, fixed_utilities)

  @tf.function
  def adaptive():
    indices = sampler.sample(BATCH_SIZE)
    sampler.update(
        indices, tf_adasamp.utilities.from_logits("zero_one", *train(indices)))

  return {"uniform": uniform, "sampler": sampler_only, "adaptive": adaptive}


def ms_per_step(step, steps):
  start = time.perf_counter()
  for _ in range(steps):
    step()
  return 1e3 * (time.perf_counter() - start) / steps


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeats", type=int, default=10)
  parser.add_argument("--output",
                      default=os.path.join(os.path.dirname(__file__), "results",
                                           "training_step_cost.json"))
  args = parser.parse_args()

  command = " ".join(["python -m benchmarks.training_step_cost", *sys.argv[1:]])
  info = machine()
  print(command, json.dumps(info), sep="\n")
  results = {}
  print("\nms per step, best / median; the extras over uniform, of the "
        "medians:\n")
  print("| model | uniform | sampler | adaptive | sampler extra | "
        "adaptive extra | load |\n|---|---|---|---|---|---|---|")
  for name, (build, image_shape, num_steps) in MODELS.items():
    before = load()
    steps = make_steps(build, image_shape)
    times = {variant: [] for variant in steps}
    for step in steps.values():
      ms_per_step(step, 3)  # Traces and warms up.
    for _ in range(args.repeats):
      for variant, step in steps.items():
        times[variant].append(ms_per_step(step, num_steps))
    results[name] = {
        "steps_per_run": num_steps,
        "ms_per_step": times,
        "load": [before, load()]
    }
    cells = [
        f"{min(times[v]):.3g} / {statistics.median(times[v]):.3g}"
        for v in steps
    ]
    uniform = statistics.median(times["uniform"])
    for variant in ("sampler", "adaptive"):
      extra = statistics.median(times[variant]) - uniform
      cells.append(f"{extra:+.3f} ms ({extra / uniform:+.1%})")
    print(f"| {name} | {' | '.join(cells)} | {before}-{load()} |", flush=True)

  os.makedirs(os.path.dirname(args.output), exist_ok=True)
  with open(args.output, "w") as f:
    json.dump(
        {
            "command": command,
            "machine": info,
            "batch_size": BATCH_SIZE,
            "num_examples": NUM_EXAMPLES,
            "repeats": args.repeats,
            "results": results
        },
        f,
        indent=1)
  print(f"wrote {args.output}")


if __name__ == "__main__":
  main()
