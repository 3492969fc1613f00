"""The sampler's diagnostics against a NumPy reference, and their tags."""

import math

import numpy as np
import pytest
import tensorflow as tf

import tf_adasamp
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
