"""tf_adasamp.data: the adaptive tf.data stage and in-step sampling."""

import math
import subprocess
import sys
import threading

import numpy as np
import pytest
import tensorflow as tf

import child_process
from kernel_helpers import assert_same_state
from kernel_helpers import state_of
import reference
import sampler_controls
from tf_adasamp import AdaptiveSampler
from tf_adasamp import data
from tf_adasamp import ops

NUM_EXAMPLES = 37  # not a power of two: the tree has padding leaves
BATCH_SIZE = 8
AMPLITUDE, DECAY = 2.0, 0.7


def make_sampler(seed=0, num_examples=NUM_EXAMPLES):
  return AdaptiveSampler(num_examples, AMPLITUDE, DECAY, seed=seed)


def examples(num_examples=NUM_EXAMPLES):
  """Features whose rows name their index, and labels."""
  x = np.repeat(np.arange(num_examples, dtype=np.float32)[:, None], 3, 1)
  y = np.arange(num_examples) % 3
  return x, y


def signed_utilities(step, indices):
  """Signed, index- and time-dependent utilities."""
  return np.where(indices % 5 == 0, 1.0, -0.3) * (1 + 0.05 * step)


class RandomAccess:
  """A random-access source like a tfds data source: dicts of arrays."""

  def __init__(self, x, y):
    self.x, self.y = x, y

  def __len__(self):
    return len(self.x)

  def __getitem__(self, i):
    return {"x": self.x[i], "y": self.y[i]}


def check_lag_zero_run(next_batch, report, seed, steps):
  """Checks draws against Algorithm 1 given the twin sampler's uniforms."""
  twin = make_sampler(seed)
  algorithm = reference.Algorithm1(NUM_EXAMPLES, AMPLITUDE, DECAY)
  for step in range(steps):
    x, y, indices, probabilities = next_batch()
    expected = algorithm.draw(twin.uniforms(BATCH_SIZE).numpy())
    np.testing.assert_array_equal(indices.numpy(), expected)
    np.testing.assert_allclose(probabilities.numpy(),
                               algorithm.probabilities()[expected],
                               rtol=1e-12)
    np.testing.assert_array_equal(x.numpy()[:, 0], expected)
    np.testing.assert_array_equal(y.numpy(), expected % 3)
    utilities = signed_utilities(step, expected)
    report(indices, utilities)
    algorithm.update(expected, utilities)


@pytest.mark.parametrize("consume_in_function", [False, True])
def test_lag_zero_pipeline_draws_exactly_algorithm_1(consume_in_function):
  sampler = make_sampler(seed=5)
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE, max_lag=0)
  # Buffers after the stage would draw ahead if the lag were not bounded.
  dataset = (stage.dataset(
      examples()).map(lambda x, y, i, p: (x, y, i, p)).prefetch(8))
  iterator = iter(dataset)
  update = tf.function(stage.update) if consume_in_function else stage.update
  check_lag_zero_run(lambda: next(iterator), update, seed=5, steps=40)


def test_in_step_draws_exactly_algorithm_1():
  sampler = make_sampler(seed=6)
  source = tf.nest.map_structure(tf.constant, examples())
  draw = tf.function(lambda: data.sample_batch(sampler, source, BATCH_SIZE))
  check_lag_zero_run(draw, sampler.update, seed=6, steps=40)


@pytest.mark.parametrize("max_lag", [0, 1, 3])
def test_draws_miss_at_most_max_lag_updates(max_lag):
  num_examples, steps = 200, 12
  sampler = make_sampler(num_examples=num_examples)
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE, max_lag=max_lag)
  iterator = iter(stage.dataset(examples(num_examples)).prefetch(10))
  # Update k doubles the weight of example k alone, so an example i >= steps
  # is drawn with probability 1 / (n + k) after k updates.
  doubling = math.log(2) / AMPLITUDE
  lags = []
  for step in range(steps):
    _, _, indices, probabilities = next(iterator)
    later = indices.numpy() >= steps
    updates_seen = round(1 / probabilities.numpy()[later][0] - num_examples)
    lags.append(step - updates_seen)
    stage.update([step], [doubling])
  assert min(lags) >= 0
  assert max(lags) <= max_lag
  if max_lag == 0:
    assert max(lags) == 0


def test_new_iterator_forgets_draws_of_an_abandoned_one():
  sampler = make_sampler()
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE, max_lag=0)
  dataset = stage.dataset(examples()).prefetch(4)
  abandoned = iter(dataset)
  next(abandoned)  # never reported
  del abandoned
  batches = []
  reader = threading.Thread(target=lambda: batches.append(next(iter(dataset))),
                            daemon=True)
  reader.start()
  reader.join(timeout=60)
  assert not reader.is_alive(), "the new iterator waited for an update"
  assert len(batches) == 1


def test_an_iterator_that_a_newer_one_replaced_says_so():
  # Two iterators of a bounded stage read in turn: the permits are the
  # newer one's, and the older one says why it draws no more, where it
  # once waited for updates that the newer one's draws took.
  stage = data.AdaptiveSampling(make_sampler(),
                                BATCH_SIZE,
                                max_lag=0,
                                wait_timeout=30)
  dataset = stage.dataset(examples())
  older = iter(dataset)
  _, _, indices, _ = next(older)
  stage.update(indices, np.ones(BATCH_SIZE))
  newer = iter(dataset)
  with pytest.raises(tf.errors.FailedPreconditionError,
                     match="a newer iterator of this stage has begun"):
    for _ in range(3):  # a batch drawn before the newer one began comes first
      next(older)
  for _ in range(3):
    _, _, indices, _ = next(newer)
    stage.update(indices, np.ones(BATCH_SIZE))


def check_batches_hold_drawn_rows(dataset, sampler, rows):
  """Each batch: rows(indices), then the indices and their Q_t."""
  sampler.update([0, 1], [1.0, 2.0])  # a non-uniform Q
  for element in dataset.take(3):
    *batch, indices, probabilities = element
    assert indices.shape == (BATCH_SIZE,) and indices.dtype == tf.int64
    np.testing.assert_allclose(probabilities,
                               sampler.probabilities().numpy()[indices],
                               rtol=1e-12)
    tf.nest.map_structure(np.testing.assert_array_equal, batch,
                          rows(indices.numpy()))


@pytest.mark.parametrize("kind",
                         ["tuple", "dict", "dataset", "apply", "random_access"])
def test_batches_hold_the_rows_of_the_drawn_indices(kind):
  x, y = examples()
  sampler = make_sampler()
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE, max_lag=None)
  as_tuple = lambda i: [x[i], y[i]]
  as_dict = lambda i: [{"x": x[i], "y": y[i]}]
  dataset, rows = {
      "tuple":
          lambda: (stage.dataset((x, y)), as_tuple),
      "dict":
          lambda: (stage.dataset({
              "x": x,
              "y": y
          }), as_dict),
      "dataset":
          lambda: (stage.dataset(tf.data.Dataset.from_tensor_slices(
              (x, y))), as_tuple),
      "apply":
          lambda: (tf.data.Dataset.from_tensor_slices({
              "x": x,
              "y": y
          }).apply(stage), as_dict),
      "random_access":
          lambda: (stage.dataset(RandomAccess(x, y)), as_dict),
  }[kind]()
  check_batches_hold_drawn_rows(dataset, sampler, rows)


def test_array_record_data_source_batches_hold_the_drawn_records(tmp_path):
  tfds = pytest.importorskip("tensorflow_datasets")
  builder = tfds.testing.DummyDataset(data_dir=tmp_path,
                                      file_format="array_record")
  builder.download_and_prepare()
  source = builder.as_data_source(split="train")
  ids = np.array([source[i]["id"] for i in range(len(source))])
  sampler = make_sampler(num_examples=len(source))
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE, max_lag=None)
  check_batches_hold_drawn_rows(stage.dataset(source), sampler, lambda i: [{
      "id": ids[i]
  }])


def test_element_spec_has_static_batch_shapes():
  x, y = examples()
  stage = data.AdaptiveSampling(make_sampler(), BATCH_SIZE)
  for source in [(x, y), RandomAccess(x, y)]:
    spec = tf.nest.flatten(stage.dataset(source).element_spec)
    assert [s.shape.as_list()[0] for s in spec] == [BATCH_SIZE] * len(spec)
    assert spec[-2].dtype == tf.int64 and spec[-1].dtype == tf.float64


def test_seeded_pipelines_draw_the_same_batches():

  def run():
    stage = data.AdaptiveSampling(make_sampler(seed=11), BATCH_SIZE, max_lag=0)
    dataset = stage.dataset(examples()).prefetch(tf.data.AUTOTUNE)
    drawn = []
    for step, (_, _, indices, _) in enumerate(dataset.take(10)):
      drawn.append(indices.numpy())
      stage.update(indices, signed_utilities(step, indices.numpy()))
    return np.stack(drawn)

  np.testing.assert_array_equal(run(), run())


# A subprocess, so that a regression fails the test instead of hanging it.
ENDS_WHILE_A_DRAW_WAITS = """
import itertools, sys, time
import numpy as np, tensorflow as tf
from tf_adasamp import AdaptiveSampler, data
stage = data.AdaptiveSampling(AdaptiveSampler(50, 1.0, 0.9, seed=0), 4,
                              max_lag=0)
dataset = stage.dataset((np.arange(50.0),)).prefetch(2)
loops = {"take": lambda: dataset.take(3),
         "islice": lambda: itertools.islice(dataset, 3)}
for step, (_, indices, probabilities) in enumerate(loops[sys.argv[1]]()):
  if step < 2:
    stage.update(indices, tf.ones_like(probabilities))
  else:
    time.sleep(0.5)  # The prefetched next draw now waits for an update.
print("ended")
"""


@pytest.mark.parametrize("loop", ["take", "islice"])
def test_loop_ends_while_a_draw_waits_for_an_update(loop):
  # Dataset.take tears down the prefetch under it while the draw below waits
  # for a permit; that wait must end, as when Python stops the loop.
  result = subprocess.run([sys.executable, "-c", ENDS_WHILE_A_DRAW_WAITS, loop],
                          capture_output=True,
                          text=True,
                          timeout=120,
                          check=False,
                          env=child_process.environment())
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.strip().endswith("ended")


def test_stage_composes_with_tf_distribute():
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  sampler = make_sampler()
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE, max_lag=1)
  dataset = stage.dataset(
      examples()).map(lambda x, y, i, p: (x * 2, y, i, p)).prefetch(2)
  distributed = iter(strategy.experimental_distribute_dataset(dataset))

  @tf.function
  def step(batch):

    def replica_step(x, y, indices, probabilities):
      stage.update(indices, tf.cast(y, tf.float64))
      return tf.reduce_all(tf.equal(x[:, 0], 2 * tf.cast(indices, tf.float32)))

    return strategy.run(replica_step, args=batch)

  for _ in range(5):
    assert step(next(distributed)).numpy()
  assert sampler.kl_divergence().numpy() > 0


def test_importance_weights_make_the_weighted_mean_unbiased():
  sampler = make_sampler()
  sampler.update(np.arange(10), np.linspace(-1, 1, 10))
  q = sampler.probabilities().numpy()
  losses = np.random.default_rng(0).normal(size=NUM_EXAMPLES)
  weights = data.importance_weights(q, NUM_EXAMPLES).numpy()
  np.testing.assert_allclose(weights, 1 / (NUM_EXAMPLES * q))
  # E_{i ~ Q}[w_i * loss_i] = mean(loss).
  np.testing.assert_allclose(np.sum(q * weights * losses), losses.mean())


def test_concurrent_draws_and_updates_keep_the_tree_exact():
  num_examples = 1000
  sampler = make_sampler(num_examples=num_examples)
  source = examples(num_examples)
  stage = data.AdaptiveSampling(sampler, 64, max_lag=None)
  direct = tf.data.Dataset.range(10**9).map(
      lambda _: tuple(sampler.sample_with_probabilities(64)),
      num_parallel_calls=4,
      deterministic=False)
  pipelines = [
      stage.dataset(source).map(lambda x, y, i, p: (i, p)),
      stage.dataset(source).map(lambda x, y, i, p: (i, p)), direct
  ]
  stop = threading.Event()
  bad = []
  drawn = [0] * len(pipelines)

  def draw(reader, dataset):
    for indices, probabilities in dataset.prefetch(4):
      indices, probabilities = indices.numpy(), probabilities.numpy()
      if not (np.all((indices >= 0) & (indices < num_examples)) and
              np.all((probabilities > 0) & (probabilities <= 1))):
        bad.append((indices, probabilities))
      if stop.is_set():
        return
      drawn[reader] += 1

  readers = [
      threading.Thread(target=draw, args=pair) for pair in enumerate(pipelines)
  ]
  for reader in readers:
    reader.start()
  update = tf.function(sampler.update)
  algorithm = reference.Algorithm1(num_examples, AMPLITUDE, DECAY)
  rng = np.random.default_rng(0)
  for _ in range(1500):
    indices = rng.integers(0, num_examples, 64)
    # Large signed utilities move the log-scale often.
    utilities = rng.normal(scale=20.0, size=64)
    update(indices, utilities)
    algorithm.update(indices, utilities)
  stop.set()
  for reader in readers:
    reader.join()

  assert not bad
  assert min(drawn) >= 10  # the readers did draw while the tree changed
  np.testing.assert_allclose(sampler.log_weights.numpy(),
                             algorithm.log_weights,
                             rtol=1e-12,
                             atol=1e-12)
  np.testing.assert_allclose(sampler.probabilities().numpy(),
                             algorithm.probabilities(),
                             rtol=1e-9,
                             atol=1e-300)
  tree = sampler.tree.variable.numpy()
  capacity = sampler.tree.capacity
  parents = np.arange(1, capacity)
  np.testing.assert_allclose(tree[parents],
                             tree[2 * parents] + tree[2 * parents + 1],
                             rtol=1e-12)
  assert np.all(tree[capacity + num_examples:] == 0)


@pytest.mark.parametrize("arguments,error,message", [
    (dict(batch_size=0), ValueError, "batch_size"),
    (dict(batch_size=2.0), TypeError, "batch_size"),
    (dict(max_lag=-1), ValueError, "max_lag"),
    (dict(max_lag=0.5), TypeError, "max_lag"),
    (dict(max_lag=2**63 - 1), ValueError, "max_lag"),
    (dict(batch_size=10**10), ValueError, "batch_size"),
])
def test_stage_rejects_bad_arguments(arguments, error, message):
  arguments = {"batch_size": 4, **arguments}
  with pytest.raises(error, match=message):
    data.AdaptiveSampling(make_sampler(), **arguments)


@pytest.mark.parametrize("source,error,message", [
    (examples(NUM_EXAMPLES + 1), ValueError, "38 examples but the sampler 37"),
    ((np.zeros([NUM_EXAMPLES]), np.zeros([3])), ValueError, "same number"),
    (np.zeros([]), ValueError, "same number"),
    (tf.data.Dataset.range(3).repeat(), ValueError, "infinite"),
    (tf.data.Dataset.range(3).filter(lambda i: i > 5), ValueError, "empty"),
    (RandomAccess([], []), ValueError, "empty"),
    (5, TypeError, "__len__"),
])
def test_dataset_rejects_bad_sources(source, error, message):
  stage = data.AdaptiveSampling(make_sampler(), 4)
  with pytest.raises(error, match=message):
    stage.dataset(source)


def test_permit_ops_reject_bad_counts():
  permits = ops.draw_permits_handle(shared_name="test_bad_permit_counts")
  with pytest.raises(tf.errors.InvalidArgumentError, match="count must be"):
    ops.release_draw_permits(permits, -1)
  with pytest.raises(tf.errors.InvalidArgumentError, match="initial_permits"):
    data._DrawPermitDataset(tf.data.Dataset.counter(), permits, 0, 0.0)
  with pytest.raises(tf.errors.InvalidArgumentError, match="timeout_seconds"):
    data._DrawPermitDataset(tf.data.Dataset.counter(), permits, 1, -1.0)


@pytest.mark.parametrize("update_in_function", [False, True])
def test_stage_draws_from_the_floor_and_counts_updates_for_schedules(
    update_in_function):
  x = np.arange(sampler_controls.NUM_EXAMPLES, dtype=np.float32)
  stage = data.AdaptiveSampling(sampler_controls.controlled_sampler(seed=6),
                                8,
                                max_lag=0)
  update = tf.function(stage.update) if update_in_function else stage.update
  in_step = sampler_controls.controlled_sampler(seed=6)
  for step, (batch, indices,
             probabilities) in enumerate(stage.dataset(x).take(14)):
    expected, expected_probabilities = in_step.sample_with_probabilities(8)
    np.testing.assert_array_equal(indices, expected)
    np.testing.assert_array_equal(probabilities, expected_probabilities)
    np.testing.assert_array_equal(batch, x[expected.numpy()])
    np.testing.assert_array_equal(
        stage.sampler.importance_weights(probabilities),
        in_step.importance_weights(expected_probabilities))
    utilities = tf.cast(indices % 3, tf.float64) - 0.5
    update(indices, utilities)
    in_step.update(expected, utilities)
    count = stage.sampler._update_count
    assert int(count) == step + 1
  assert_same_state(state_of(stage.sampler), state_of(in_step))
