"""The uniform baselines behind AdaptiveSampler's interface: draws with
replacement (the paper's Unif) and random reshuffling (an epoch's
permutation, what `tf.data`'s shuffle gives)."""

import numpy as np
import tensorflow as tf

from tf_adasamp import _validation
from tf_adasamp.sampler import make_generator


class _UniformBaseline(tf.Module):
  """What the uniform baselines share: n examples, each drawn with
  probability 1 / n, and an `update` that ignores utilities. Having no log
  weights, `tf_adasamp.diagnostics` reads them as uniform."""

  def __init__(self, num_examples, name=None):
    super().__init__(name=name)
    self._num_examples = _validation.positive_int(num_examples, "num_examples")

  @property
  def num_examples(self):
    return self._num_examples

  def update(self, indices, utilities):
    """Uniform sampling ignores utilities."""

  def probabilities(self):
    return tf.fill([self._num_examples],
                   tf.constant(1 / self._num_examples, tf.float64))

  def kl_divergence(self):
    return tf.zeros([], tf.float64)


class UniformSampler(_UniformBaseline):
  """Uniform draws behind AdaptiveSampler's interface, for a fair baseline.

  Draws index floor(u * n) for each uniform u of `generator.uniform([B],
  float64)`, the very stream and call that AdaptiveSampler makes, and the
  index its sum-tree walk returns while Q_t is uniform: so with a shared seed
  both samplers draw the same first batch, and an AdaptiveSampler with
  amplitude 0 would draw the same indices forever.
  """

  def __init__(self, num_examples, seed=None, name=None):
    super().__init__(num_examples, name=name)
    with self.name_scope:
      self.generator = make_generator(seed)

  def sample(self, batch_size):
    """Draws `batch_size` indices uniformly; int64 [batch_size]."""
    uniforms = self.generator.uniform([batch_size], dtype=tf.float64)
    indices = tf.cast(tf.floor(uniforms * self._num_examples), tf.int64)
    # u * n can round up to n in floating point.
    return tf.minimum(indices, self._num_examples - 1)


class ReshufflingSampler(_UniformBaseline):
  """Random reshuffling behind AdaptiveSampler's interface.

  Each epoch visits every example once, in a fresh permutation: draw k is
  element k mod n of epoch k // n's permutation, the argsort of n
  stateless uniforms seeded by (seed, epoch). Batches run on across an
  epoch's end, as `dataset.shuffle(n).repeat().batch(B)` does with
  `reshuffle_each_iteration`. The draw count and the current permutation
  are variables, so a checkpoint resumes the order exactly. Marginally each
  draw is uniform.

  Args:
    num_examples: n, the examples to permute.
    seed: the seed of every epoch's permutation.
    name: the module's name.

  Raises:
    ValueError: num_examples is not a positive int.
  """

  def __init__(self, num_examples, seed=0, name=None):
    super().__init__(num_examples, name=name)
    self._seed = seed
    with self.name_scope:
      self.draws = tf.Variable(0, dtype=tf.int64, trainable=False, name="draws")
      self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
      self.permutation = tf.Variable(self._permutation_of(
          tf.constant(0, tf.int64)),
                                     trainable=False,
                                     name="permutation")

  def sample(self, batch_size):
    """The next `batch_size` draws (at most one epoch); int64 [batch_size]."""
    n = self._num_examples
    epoch, position = self.draws // n, self.draws % n
    tf.cond(self.epoch == epoch, lambda: None, lambda: self._start_epoch(epoch))
    positions = position + tf.range(batch_size, dtype=tf.int64)
    past_the_end = positions >= n
    following = tf.cond(tf.reduce_any(past_the_end),
                        lambda: self._permutation_of(epoch + 1),
                        lambda: self.permutation.read_value())
    indices = tf.where(
        past_the_end, tf.gather(following, tf.maximum(positions - n, 0)),
        tf.gather(self.permutation, tf.minimum(positions, n - 1)))
    self.draws.assign_add(batch_size)
    return indices

  def _start_epoch(self, epoch):
    self.permutation.assign(self._permutation_of(epoch))
    self.epoch.assign(epoch)

  def _permutation_of(self, epoch):
    return _permutation(self._seed, epoch, self._num_examples)


def _permutation(seed, epoch, num_examples):
  """Epoch `epoch`'s permutation of `num_examples` under `seed`."""
  seed = tf.stack([tf.constant(seed, tf.int64), epoch])
  keys = tf.random.stateless_uniform([num_examples], seed=seed)
  return tf.cast(tf.argsort(keys, stable=True), tf.int64)


def check_saved_reshuffling(saved, num_examples, seed):
  """Raises ValueError unless `saved`, a checkpoint's values of a
  ReshufflingSampler ({"draws", "epoch", "permutation"}), is a state that
  the draws of one over `num_examples` examples with `seed` reach: edited
  by hand, it would draw examples out of order, or out of range.

  draws >= 0; epoch that of the last batch's first draw, so that
  epoch * n <= draws < (epoch + 2) * n (a batch is at most n draws); the
  permutation that epoch's.
  """
  draws, epoch = int(saved["draws"]), int(saved["epoch"])
  n = num_examples
  if draws < 0 or epoch < 0:
    raise ValueError(f"the reshuffling sampler's draws {draws} and epoch "
                     f"{epoch} must be >= 0")
  if not epoch * n <= draws < (epoch + 2) * n:
    raise ValueError(f"the reshuffling sampler's draws {draws} do not fall "
                     f"in its epoch {epoch} of {n} examples")
  expected = _permutation(seed, tf.constant(epoch, tf.int64), n).numpy()
  permutation = np.asarray(saved["permutation"])
  if permutation.shape != expected.shape or np.any(permutation != expected):
    raise ValueError("the reshuffling sampler's permutation is not that of "
                     f"its epoch {epoch} under seed {seed}")


# The samplers that draw without looking at utilities.
BASELINES = (UniformSampler, ReshufflingSampler)
