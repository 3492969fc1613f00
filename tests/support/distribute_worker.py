"""One process of tests/test_distribute.py: adaptive sampling under a strategy.

  python tests/support/distribute_worker.py mirrored OUT [--restore CHECKPOINT]
  TF_CONFIG=... python tests/support/distribute_worker.py multi_worker OUT [...]

`mirrored` runs MirroredStrategy over two logical CPU devices, which must be
configured before TensorFlow starts its runtime: that, and keeping other test
files' devices untouched, is why this runs in a process of its own.
`multi_worker` is one worker of a MultiWorkerMirroredStrategy cluster given by
TF_CONFIG (one replica per worker).

The run starts from CHECKPOINT if given, trains STEPS steps of synthetic
utilities (even steps update inside `strategy.run`, odd ones from the
per-replica values it returns), writes a checkpoint OUT/ckpt (task 0), then
draws SHARE_STEPS steps through an input pipeline with `sample_share`. It
saves OUT/task<i>.npz: `draws`, `probabilities` [STEPS, local replicas, B],
`shares`, `share_probabilities` [SHARE_STEPS, local replicas, B],
`replica_ids`, `num_pipelines`, `refusal` (what `update` says to a sampler
with one copy under several replicas) and `state<k>` [local replicas, ...]:
every local copy of the k-th variable of `state_variables`.
"""

import argparse
import os
import sys

import keras
import numpy as np
import tensorflow as tf

from tf_adasamp import AdaptiveSampler
from tf_adasamp import data
from tf_adasamp import distribute
from tf_adasamp.experiment.training import components
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import loop
from tf_adasamp.keras import AdaptiveSamplingModel

NUM_EXAMPLES = 40
AMPLITUDE = 0.5
DECAY = 0.5
SEED = 7
BATCH_SIZE = 16  # Per replica.
STEPS = 300
SHARE_STEPS = 3
STAGE_STEPS = 150
# Utility of each example: signed, fixed, so that Q_t is far from uniform.
UTILITIES = np.random.default_rng(0).normal(size=NUM_EXAMPLES)
# Added per replica id, so that an index two replicas drew has two utilities
# and the first (in replica order) must win.
REPLICA_SHIFT = 0.25


def utilities(indices, replica):
  """The synthetic utilities of the draws `indices` of replica `replica`."""
  return (tf.gather(tf.constant(UTILITIES), indices) +
          REPLICA_SHIFT * tf.cast(replica, tf.float64))


def state_variables(sampler):
  """Everything a sampler's checkpoint holds: its variables and RNG state."""
  return [*sampler.variables, sampler.generator.state]


def make_strategy(mode):
  if mode in ("mirrored", "trainer"):
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  return tf.distribute.MultiWorkerMirroredStrategy()


def local(strategy, value):
  """A per-replica value as an array [local replicas, ...]."""
  return np.stack(
      [np.asarray(v) for v in strategy.experimental_local_results(value)])


def train(strategy, sampler):
  """STEPS steps; returns the draws and their probabilities, per replica."""

  def draw():
    indices, probabilities = sampler.sample_with_probabilities(BATCH_SIZE)
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    return indices, probabilities, utilities(indices, replica)

  @tf.function
  def update_in_replicas():

    def replica_step():
      indices, probabilities, step_utilities = draw()
      sampler.update(indices, step_utilities)
      return indices, probabilities

    return strategy.run(replica_step)

  @tf.function
  def update_across_replicas():
    indices, probabilities, step_utilities = strategy.run(draw)
    sampler.update(indices, step_utilities)
    return indices, probabilities

  draws, probabilities = [], []
  for step in range(STEPS):
    step_fn = update_in_replicas if step % 2 == 0 else update_across_replicas
    indices, step_probabilities = step_fn()
    draws.append(local(strategy, indices))
    probabilities.append(local(strategy, step_probabilities))
  return {"draws": np.stack(draws), "probabilities": np.stack(probabilities)}


def draw_shares(strategy, sampler):
  """SHARE_STEPS steps of pipeline draws; the pipelines are built in scope."""
  pipelines = []

  def dataset_fn(context):
    pipelines.append(context.num_input_pipelines)
    # One element per local replica and step.
    num_local = len(strategy.extended.worker_devices)
    return tf.data.Dataset.range(
        SHARE_STEPS * num_local).map(lambda _: distribute.sample_share(
            sampler, BATCH_SIZE, context.input_pipeline_id, context.
            num_input_pipelines))

  shares = [[
      local(strategy, value) for value in element
  ] for element in strategy.distribute_datasets_from_function(dataset_fn)]
  return {
      "shares": np.stack([s[0] for s in shares]),
      "share_probabilities": np.stack([s[1] for s in shares]),
      "num_pipelines": pipelines[0]
  }


def train_through_stage(strategy):
  """STAGE_STEPS steps on batches of a fresh sampler's tf.data stage
  (max_lag=0: exactly Algorithm 1), one pipeline per worker."""
  sampler = distribute.create_sampler(strategy,
                                      NUM_EXAMPLES,
                                      AMPLITUDE,
                                      DECAY,
                                      seed=SEED)
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE, max_lag=0)
  # Each example is its own index, to check that batches match draws.
  examples = np.arange(NUM_EXAMPLES)
  batches = iter(
      strategy.distribute_datasets_from_function(
          lambda context: stage.dataset(examples, context)))

  @tf.function
  def step(batch):

    def replica_step(batch_examples, indices, probabilities):
      replica = tf.distribute.get_replica_context().replica_id_in_sync_group
      stage.update(indices, utilities(indices, replica))
      return batch_examples, indices, probabilities

    return strategy.run(replica_step, batch)

  steps = [[local(strategy, value)
            for value in step(next(batches))]
           for _ in range(STAGE_STEPS)]
  # Not the generator: the pipelines draw one step ahead of the last update,
  # each in its own time.
  results = {
      f"stage_state{k}": local(strategy, v)
      for k, v in enumerate(sampler.variables)
  }
  for key, values in zip(["examples", "draws", "probabilities"], zip(*steps)):
    results[f"stage_{key}"] = np.stack(values)
  return results


def fit_keras(strategy):
  """A short `fit` of AdaptiveSamplingModel under the strategy; returns
  whether the sampler's copies ended identical and the losses."""
  sampler = distribute.create_sampler(strategy,
                                      NUM_EXAMPLES,
                                      AMPLITUDE,
                                      DECAY,
                                      seed=SEED)
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE, max_lag=1)
  x = np.random.default_rng(0).normal(size=(NUM_EXAMPLES, 4))
  y = (x[:, 0] > 0).astype(np.int64)
  with strategy.scope():
    keras.utils.set_random_seed(0)
    net = keras.Sequential(
        [keras.Input((4,)),
         keras.layers.Dense(2, activation="softmax")])
    model = AdaptiveSamplingModel(net, stage, utility="l1")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
  history = model.fit(strategy.distribute_datasets_from_function(
      lambda context: stage.dataset((x.astype(np.float32), y), context)),
                      steps_per_epoch=10,
                      epochs=2,
                      verbose=0)
  copies = local(strategy, sampler.tree.variable)
  return {
      "keras_copies_identical":
          all(np.array_equal(c, copies[0]) for c in copies),
      "keras_loss":
          np.array(history.history["loss"]),
      "keras_kl":
          np.array(history.history["kl"])
  }


def run_trainer(out):
  """The trainer with strategy="mirrored" on digits, briefly. In a process
  of its own: two MirroredStrategy objects in one process share collective
  keys."""
  records = loop.train(
      config_lib.TrainConfig(dataset="digits",
                             model="logistic",
                             steps=20,
                             eval_interval=10,
                             strategy="mirrored"))
  np.savez(os.path.join(out, "task0.npz"),
           replicas=components.make_strategy("mirrored").num_replicas_in_sync,
           test_accuracy=[r["test_accuracy"] for r in records],
           kl=[r["kl"] for r in records])


def refusal(strategy):
  """What `update` says to a one-copy sampler under several replicas."""
  one_copy = AdaptiveSampler(NUM_EXAMPLES, AMPLITUDE, DECAY)  # No strategy.
  try:
    strategy.run(lambda: one_copy.update([0], [1.0]))
  except ValueError as error:
    return str(error)
  return ""


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("mode", choices=["mirrored", "multi_worker", "trainer"])
  parser.add_argument("out")
  parser.add_argument("--restore")
  args = parser.parse_args()
  strategy = make_strategy(args.mode)
  if args.mode == "trainer":
    return run_trainer(args.out)
  sampler = distribute.create_sampler(strategy,
                                      NUM_EXAMPLES,
                                      AMPLITUDE,
                                      DECAY,
                                      seed=SEED)
  if args.restore:
    tf.train.Checkpoint(sampler=sampler).read(args.restore).assert_consumed()
  task = strategy.cluster_resolver.task_id if strategy.cluster_resolver else 0
  with strategy.scope():
    results = train(strategy, sampler)
    results["replica_ids"] = local(
        strategy,
        strategy.run(lambda: tf.distribute.get_replica_context().
                     replica_id_in_sync_group))
    results.update((f"state{k}", local(strategy, v))
                   for k, v in enumerate(state_variables(sampler)))
    tf.train.Checkpoint(sampler=sampler).write(
        os.path.join(args.out, "ckpt" if task == 0 else f"ckpt{task}"))
    results.update(draw_shares(strategy, sampler))
  results.update(train_through_stage(strategy))
  if args.mode == "mirrored":
    results.update(fit_keras(strategy))
  results["refusal"] = refusal(strategy)
  np.savez(os.path.join(args.out, f"task{task}.npz"), **results)


if __name__ == "__main__":
  sys.exit(main())
