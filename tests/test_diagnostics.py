"""The sampler's diagnostics against a NumPy reference, and their tags."""

import math

import numpy as np
import pytest
import tensorflow as tf

from sampler_controls import NUM_EXAMPLES
from sampler_controls import utility_of
import tf_adasamp
from tf_adasamp import AdaptiveSampler
from tf_adasamp import diagnostics


def reference(log_weights, indices, misclassified):
  """The diagnostics in NumPy, in long double, from the log weights."""
  log_w = np.asarray(log_weights, np.longdouble)
  log_q = log_w - (log_w.max() + np.log(np.exp(log_w - log_w.max()).sum()))
  q = np.exp(log_q)
  n = len(log_w)
  return {
      "kl_divergence": max(float(np.sum(q * (log_q + np.log(n)))), 0.0),
      "max_probability": float(q.max()),
      "effective_sample_size": float(1 / (n * np.sum(q * q))),
      # 1% of n, rounded up: the heaviest example, for these n.
      "heaviest_share": float(np.sort(q)[-math.ceil(0.01 * n):].sum()),
      "distinct_draws": len(np.unique(indices)),
      "misclassified_mass": float(q[misclassified].sum()),
      "log_n_probability": (log_q + np.log(n)).astype(np.float64),
  }


class FixedSampler:
  """A stand-in with given log weights (any values a sampler can hold)."""

  def __init__(self, log_weights):
    self.log_weights = tf.constant(log_weights, tf.float64)
    self.num_examples = len(log_weights)


class UniformStandIn:
  """A sampler without log weights, as the uniform baseline is."""
  num_examples = 6


def assert_matches(values, expected):
  assert set(values) == set(expected)
  for name, value in values.items():
    np.testing.assert_allclose(value,
                               expected[name],
                               rtol=1e-12,
                               atol=1e-15,
                               err_msg=name)


@pytest.mark.parametrize(
    "log_weights",
    [
        [0.0, 0.0, 0.0, 0.0],
        [0.3, -1.2, 2.5, 0.0, 0.7],
        # Weights whose ratio underflows float64: exp(-900) is 0, so
        # np.log(probabilities) would read -inf for the last example.
        [0.0, 5.0, -900.0],
        # Large log weights: their exp overflows, their logsumexp does not.
        [800.0, 799.0, 10.0, 801.5],
    ])
def test_compute_matches_the_numpy_reference(log_weights):
  indices = np.array([2, 0, 2, 1, 2], np.int64) % len(log_weights)
  misclassified = np.arange(len(log_weights)) % 2 == 1
  values = diagnostics.compute(FixedSampler(log_weights), indices,
                               misclassified)
  values = {name: value.numpy() for name, value in values.items()}
  assert_matches(values, reference(log_weights, indices, misclassified))
  assert np.isfinite(values["log_n_probability"]).all()


@pytest.mark.parametrize("n,k", [(1, 1), (100, 1), (101, 2), (60000, 600)])
def test_heaviest_share_is_of_one_percent_rounded_up(n, k):
  assert diagnostics.heaviest_count(n) == k
  log_q = np.log(np.arange(1.0, n + 1) / (n * (n + 1) / 2))
  np.testing.assert_allclose(diagnostics.heaviest_share(log_q, k),
                             np.exp(log_q)[-k:].sum(),
                             rtol=1e-12)
  uniform = np.full(n, -math.log(n))
  np.testing.assert_allclose(diagnostics.heaviest_share(uniform, k),
                             k / n,
                             rtol=1e-12)


def test_histogram_is_finite_where_a_cached_weight_underflowed():
  sampler = FixedSampler([0.0, -900.0])
  log_n_q = diagnostics.compute(sampler)["log_n_probability"].numpy()
  np.testing.assert_allclose(log_n_q, [math.log(2), -900 + math.log(2)],
                             rtol=1e-12)


def test_an_adaptive_sampler_after_updates_matches_the_reference():
  sampler = tf_adasamp.AdaptiveSampler(7, amplitude=3.0, decay=0.5, seed=1)
  for _ in range(5):
    indices = sampler.sample(4)
    sampler.update(indices, tf.linspace(0.0, 1.0, 4))
  values = diagnostics.compute(sampler)
  expected = reference(sampler.log_weights.numpy(), [0], [False] * 7)
  for name in ("kl_divergence", "max_probability", "effective_sample_size",
               "log_n_probability"):
    np.testing.assert_allclose(values[name], expected[name], rtol=1e-12)
  # The sampler's own O(1) KL, from its cached sums, agrees.
  np.testing.assert_allclose(values["kl_divergence"],
                             sampler.kl_divergence(),
                             rtol=1e-9)


def test_a_float32_sampler_is_read_in_float64():
  sampler = tf_adasamp.AdaptiveSampler(5, 1.0, 0.5, seed=0, dtype=tf.float32)
  sampler.update([1, 3], [1.0, 2.0])
  values = diagnostics.compute(sampler)
  assert all(v.dtype == tf.float64 for v in values.values())
  expected = reference(sampler.log_weights.numpy(), [0], [False] * 5)
  np.testing.assert_allclose(values["kl_divergence"],
                             expected["kl_divergence"],
                             rtol=1e-12)


def test_a_sampler_without_log_weights_is_uniform():
  values = diagnostics.compute(UniformStandIn(), [1, 1, 4],
                               [True, False, False, True, False, False])
  assert float(values["kl_divergence"]) == 0
  np.testing.assert_allclose(values["max_probability"], 1 / 6, rtol=1e-15)
  np.testing.assert_allclose(values["effective_sample_size"], 1, rtol=1e-15)
  np.testing.assert_allclose(values["misclassified_mass"], 2 / 6, rtol=1e-15)
  np.testing.assert_allclose(values["log_n_probability"],
                             np.zeros(6),
                             atol=1e-15)
  assert int(values["distinct_draws"]) == 2


def test_one_example_taking_all_is_the_extreme():
  values = diagnostics.compute(FixedSampler([0.0, -1e4, -1e4, -1e4]))
  np.testing.assert_allclose(values["kl_divergence"], math.log(4), rtol=1e-12)
  np.testing.assert_allclose(values["max_probability"], 1, rtol=1e-12)
  np.testing.assert_allclose(values["effective_sample_size"], 1 / 4, rtol=1e-12)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_distinct_draws_counts_like_numpy_also_under_xla(jit_compile):
  count = tf.function(diagnostics.distinct_draws, jit_compile=jit_compile)
  rng = np.random.default_rng(0)
  for size in (1, 2, 17, 64):
    indices = rng.integers(0, 10, size)
    assert int(count(tf.constant(indices))) == len(np.unique(indices))


def test_distinct_draws_of_no_draws_is_zero():
  assert int(diagnostics.distinct_draws(tf.zeros([0], tf.int64))) == 0


def read_tags(log_dir):
  """{tag: plugin name} of every summary under `log_dir`."""
  found = {}
  for path in tf.io.gfile.glob(f"{log_dir}/events.*"):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        found[value.tag] = value.metadata.plugin_data.plugin_name
  return found


def test_write_puts_each_quantity_under_its_tag(tmp_path):
  values = diagnostics.compute(FixedSampler([0.0, 1.0, 2.0]), [0, 2],
                               [True, False, True])
  writer = tf.summary.create_file_writer(str(tmp_path))
  with writer.as_default():
    diagnostics.write(values, step=3)
  writer.flush()
  tags = read_tags(tmp_path)
  assert tags == {
      tag: ("histograms" if name in diagnostics.HISTOGRAMS else "scalars")
      for name, tag in diagnostics.TAGS.items()
  }
  assert all(tag.startswith("sampler/") for tag in tags)


def test_write_leaves_out_none_and_refuses_unknown_quantities(tmp_path):
  writer = tf.summary.create_file_writer(str(tmp_path))
  with writer.as_default():
    diagnostics.write({"max_probability": 0.5, "distinct_draws": None}, step=0)
    with pytest.raises(ValueError, match="'kl'"):
      diagnostics.write({"kl": 0.1}, step=1)
  writer.flush()
  assert read_tags(tmp_path) == {"sampler/max_probability": "scalars"}


def test_heaviest_lists_the_most_probable_examples_relative_to_uniform():
  rng = np.random.default_rng(4)
  log_weights = rng.normal(size=50)
  log_q = log_weights - np.log(np.exp(log_weights).sum())
  indices, relative = diagnostics.heaviest(tf.constant(log_q), 5)
  expected = np.argsort(-log_q)[:5]
  np.testing.assert_array_equal(indices, expected)
  np.testing.assert_allclose(relative, 50 * np.exp(log_q[expected]))
  uniform = diagnostics.heaviest(
      tf.fill([4], tf.constant(-np.log(4.0), tf.float64)), 4)[1]
  np.testing.assert_allclose(uniform, np.ones(4))


def heaviest_events(log_dir):
  """{tag: (step, value)} of the heaviest examples' summaries under
  `log_dir`: the table's text, the images decoded to uint8 [k, H, W, C]."""
  found = {}
  for path in tf.io.gfile.glob(f"{log_dir}/events.*"):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        strings = value.tensor.string_val
        if value.metadata.plugin_data.plugin_name == "text":
          found[value.tag] = (event.step, strings[0].decode())
        else:  # width, height, then one PNG per image
          found[value.tag] = (
              event.step,
              np.stack([tf.io.decode_png(png).numpy() for png in strings[2:]]))
  return found


def heaviest_table(indices, relative, labels):
  return "\n".join([
      "| rank | index | label | n·q |", "|---|---|---|---|",
      *(f"| {rank} | {index} | {label} | {weight:.4g} |"
        for rank, (index, label,
                   weight) in enumerate(zip(indices, labels, relative), 1))
  ])


@pytest.mark.parametrize("in_function", [False, True])
@pytest.mark.parametrize("channels", [None, 1, 3])
def test_heaviest_summary_writes_the_heaviest_images_and_their_table(
    tmp_path, in_function, channels):
  rng = np.random.default_rng(2)
  n, k = 30, 5
  log_q = np.log(rng.dirichlet(np.ones(n)))
  shape = (n, 4, 6) if channels is None else (n, 4, 6, channels)
  images = rng.integers(0, 256, shape).astype(np.uint8)
  labels = rng.integers(0, 3, n).astype(np.int32)
  names = ["cat", "dog", "emu"]
  write = diagnostics.heaviest_summary
  arguments = (log_q, images, labels)
  if in_function:
    write = tf.function(write)
    arguments = tuple(tf.constant(a) for a in arguments)
  writer = tf.summary.create_file_writer(str(tmp_path))
  with writer.as_default():
    assert bool(write(*arguments, k=k, step=7, class_names=names))
  writer.flush()
  expected = np.argsort(-log_q, kind="stable")[:k]
  found = heaviest_events(tmp_path)
  assert set(found) == {"sampler/heaviest/images", "sampler/heaviest/table"}
  step, table = found["sampler/heaviest/table"]
  assert step == 7
  assert table == heaviest_table(expected, n * np.exp(log_q[expected]),
                                 [names[label] for label in labels[expected]])
  step, written = found["sampler/heaviest/images"]
  assert step == 7
  np.testing.assert_array_equal(written.reshape(images[expected].shape),
                                images[expected])


def test_heaviest_summary_reads_a_samplers_distribution(tmp_path):
  sampler = tf_adasamp.AdaptiveSampler(12, amplitude=2.0, decay=0.5, seed=0)
  sampler.update([3, 7, 9], [1.0, 0.5, 2.0])
  images = np.linspace(0, 1, 12 * 9, dtype=np.float32).reshape(12, 3, 3, 1)
  labels = np.arange(12) % 4
  writer = tf.summary.create_file_writer(str(tmp_path))
  with writer.as_default(step=2):
    diagnostics.heaviest_summary(sampler, images, labels, k=3)
  writer.flush()
  indices, relative = diagnostics.heaviest(
      diagnostics.log_probabilities(sampler), 3)
  np.testing.assert_array_equal(indices, [9, 3, 7])
  step, table = heaviest_events(tmp_path)["sampler/heaviest/table"]
  assert step == 2
  assert table == heaviest_table(indices.numpy(), relative.numpy(),
                                 labels[[9, 3, 7]])


def test_heaviest_summary_without_a_writer_writes_nothing(tmp_path):
  assert not bool(
      diagnostics.heaviest_summary(np.full(4, -np.log(4)),
                                   np.zeros((4, 2, 2)),
                                   np.zeros(4, np.int32),
                                   k=2,
                                   step=0))


@pytest.mark.parametrize("k,images,labels,error,message", [
    (0, (6, 2, 2), (6,), ValueError, "k must be >= 1"),
    (7, (6, 2, 2), (6,), ValueError, r"k must be in \[1, 6\]"),
    (2.0, (6, 2, 2), (6,), TypeError, "k must be an int"),
    (2, (5, 2, 2), (6,), ValueError, "images must hold the 6 examples"),
    (2, (6, 2, 2), (4,), ValueError, "labels must hold the 6 examples"),
    (2, (6, 2, 2, 2), (6,), ValueError, r"\[n, H, W, C\] with C 1, 3 or 4"),
    (2, (6, 4), (6,), ValueError, r"\[n, H, W, C\] with C 1, 3 or 4"),
])
def test_heaviest_summary_refuses_bad_arguments(tmp_path, k, images, labels,
                                                error, message):
  writer = tf.summary.create_file_writer(str(tmp_path))
  with writer.as_default(step=0), pytest.raises(error, match=message):
    diagnostics.heaviest_summary(np.zeros(6), np.zeros(images),
                                 np.zeros(labels, np.int32), k)
  writer.flush()
  assert not heaviest_events(tmp_path)


def test_heaviest_refuses_bad_counts_and_takes_a_length_known_when_run():
  with pytest.raises(ValueError, match=r"k must be in \[1, 3\]"):
    diagnostics.heaviest(tf.zeros([3], tf.float64), 4)
  with pytest.raises(ValueError, match="must be a vector"):
    diagnostics.heaviest(tf.zeros([3, 1], tf.float64), 1)
  # Of a length known only when it runs.
  top = tf.function(lambda log_q: diagnostics.heaviest(log_q, 2),
                    input_signature=[tf.TensorSpec([None], tf.float64)])
  np.testing.assert_array_equal(
      top(tf.math.log(tf.constant([0.1, 0.5, 0.4], tf.float64)))[0], [1, 2])


@pytest.mark.parametrize("in_function", [False, True])
def test_heaviest_refuses_log_weights_for_log_probabilities(in_function):
  # Log weights read as log probabilities would give n q_i in the thousands.
  sampler = tf_adasamp.AdaptiveSampler(12, amplitude=2.0, decay=0.5, seed=0)
  sampler.update([3, 7, 9], [4.0, 0.5, 2.0])
  heaviest = diagnostics.heaviest
  if in_function:
    heaviest = tf.function(heaviest, reduce_retracing=True)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="log_q must be log probabilities"):
    heaviest(sampler.log_weights, 3)
  _, relative = heaviest(diagnostics.log_probabilities(sampler), 3)
  assert relative.numpy().max() < 12


@pytest.mark.parametrize("labels,class_names,error,message", [
    (np.arange(6, dtype=np.float32) + 0.7, None, TypeError,
     "labels must be integer class ids, got float32"),
    (np.zeros((6, 1), np.int32), None, ValueError,
     r"labels must be \[n\] class ids \(not one-hot rows or \[n, 1\]\), "
     r"got shape \(6, 1\)"),
    (np.eye(6, 3, dtype=np.int64), None, ValueError, "not one-hot rows"),
    (np.arange(6) % 3, "abc", TypeError, "class_names must be a list or tuple "
     "of str, got 'abc'"),
    (np.arange(6) % 3, [0, 1, 2], TypeError, "class_names must be a list"),
    (np.arange(6) % 3, [], ValueError, "must name at least one class"),
    (np.arange(6), ["a", "b"], tf.errors.InvalidArgumentError,
     r"labels must be ids of the 2 class_names"),
])
def test_heaviest_summary_refuses_labels_it_would_misread(
    tmp_path, labels, class_names, error, message):
  writer = tf.summary.create_file_writer(str(tmp_path))
  with writer.as_default(step=0), pytest.raises(error, match=message):
    diagnostics.heaviest_summary(np.full(6, -np.log(6)),
                                 np.zeros((6, 2, 2)),
                                 labels,
                                 k=6,
                                 class_names=class_names)
  writer.flush()
  assert not heaviest_events(tmp_path)


@pytest.mark.parametrize("epsilon", [0.0, 0.2, 1.0])
def test_diagnostics_describe_the_distribution_the_draws_follow(epsilon):
  sampler = AdaptiveSampler(NUM_EXAMPLES, 3.0, 0.5, epsilon=epsilon)
  indices = np.arange(NUM_EXAMPLES)
  sampler.update(indices, utility_of(indices))
  values = diagnostics.compute(sampler)
  kl = float(sampler.kl_divergence())
  assert float(values["kl_divergence"]) == pytest.approx(kl,
                                                         rel=1e-9,
                                                         abs=1e-15)
  probabilities = np.exp(values["log_n_probability"]) / NUM_EXAMPLES
  np.testing.assert_allclose(probabilities, sampler.probabilities(), rtol=1e-12)
