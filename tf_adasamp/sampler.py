"""Adaptive sampling for SGD: London, NIPS 2017, Algorithm 1.

    w_i <- 1 for all i
    each step: draw i with probability w_i / sum(w); update the model;
               w_i <- w_i ** decay * exp(amplitude * utility_i)

Mini-batches draw B independent indices and reweight each unique index once
(its first occurrence), as the paper's mini-batch variant says.

The exact state is the log weights l_i = log w_i, which stay within
|l| <= amplitude * max|u| / (1 - decay) whatever the run's length; the sum-tree
caches exp(l_i - c) for a shared log-scale c that the update op moves when the
cached total leaves a safe range. So weights never overflow, underflow to an
all-zero tree or turn NaN, and probabilities stay exact relative to the log
weights. A second tree of s_i log s_i makes KL(Q_t || uniform) an O(1) read.

Three controls from the field, off by default (then the sampler is exactly
Algorithm 1): a uniform floor `epsilon`, drawing from
(1 - epsilon) Q_t + epsilon U; an amplitude that follows a schedule of the
update count (`tf_adasamp.schedules`); and importance weights
(1 / (n p_i)) ** beta, `beta` a float or a schedule.
"""

import functools
import math
from typing import Callable

import tensorflow as tf
from tensorflow.python.trackable import data_structures

from tf_adasamp import _checkpointing
from tf_adasamp import _draws
from tf_adasamp import _sampler_checkpoint
from tf_adasamp import _validation
from tf_adasamp import defaults
from tf_adasamp import ops
from tf_adasamp._draws import make_generator
from tf_adasamp.sum_tree import SumTree
from tf_adasamp.sum_tree import TensorLike

# tf.random.Algorithm.PHILOX, the state layout the draw op reads.
_PHILOX = tf.random.Algorithm.PHILOX.value
# Integers of the width of each float dtype, to carry utilities bit for bit.
_BITS = {tf.float32: tf.int32, tf.float64: tf.int64}

# A schedule of a setting: a callable of the update count (an int64 scalar
# tensor) returning a scalar, e.g. a Keras LearningRateSchedule or one of
# `tf_adasamp.schedules`.
Schedule = Callable[[tf.Tensor], TensorLike]


class AdaptiveSampler(tf.Module):
  """Draws example indices from Algorithm 1's adaptive distribution Q_t.

  Example, one training step (no host round-trip inside `tf.function`):
    sampler = tf_adasamp.AdaptiveSampler(len(x), amplitude=1.0, decay=0.5,
                                         seed=0)
    indices = sampler.sample(100)
    ... forward/backward on tf.gather(x, indices) ...
    sampler.update(indices, tf_adasamp.utilities.zero_one(labels, probs))
  """

  def __init__(self,
               num_examples: int,
               amplitude: float | Schedule = defaults.AMPLITUDE,
               decay: float = defaults.DECAY,
               seed: int | None = None,
               stratified: bool = False,
               dtype: tf.DType = tf.float64,
               name: str | None = None,
               epsilon: float = 0.0,
               beta: float | Schedule = defaults.BETA):
    """Creates a uniform sampler over `num_examples` indices.

    `amplitude`, `decay` and `beta` default to `tf_adasamp.defaults`.

    Args:
      num_examples: n, an int >= 1.
      amplitude: alpha >= 0, how strongly a utility raises a weight; or a
        schedule of it (`tf_adasamp.schedules`, a Keras
        `LearningRateSchedule`, any callable of the update count returning a
        scalar), evaluated at each update at the number of updates before
        it. A value < 0 or not finite refuses that update.
      decay: lambda in (0, 1), how fast past utilities are forgotten.
      seed: seed of the sampler's `tf.random.Generator`; None to follow
        TensorFlow's global seed (`tf.random.set_seed`,
        `keras.utils.set_random_seed`), nondeterministic if none is set.
      stratified: if True, a batch of B draws takes one uniform from each of
        B equal strata of [0, 1) (lower variance, still drawn from Q_t
        marginally); if False, B independent draws as in the paper.
      dtype: tf.float64 (default) or tf.float32, for weights and sums.
      name: name of the module.
      epsilon: the uniform floor, in [0, 1]: each draw picks an example
        uniformly with probability epsilon, else from Q_t, so draws follow
        (1 - epsilon) Q_t + epsilon U; `probabilities`, the probabilities
        returned with draws and `kl_divergence` are this mixture's. 0 (the
        default) draws from Q_t, as Algorithm 1.
      beta: the importance exponent, in [0, 1], or a schedule of it (as for
        `amplitude`, evaluated at the update count when weights are made):
        `importance_weights` gives (1 / (n p_i)) ** beta, 1 unbiased, 0
        none.

    Raises:
      TypeError: if an argument is of the wrong type (a bool for an int, a
        dtype other than float32 or float64).
      ValueError: if an argument is out of its range above, also once
        rounded to `dtype`; amplitude / (1 - decay) is so large that a log
        weight could overflow `dtype` (above its largest number over 1e8,
        the largest utility it keeps finite); or if made in a
        `tf.distribute` strategy's scope, where
        `tf_adasamp.distribute.create_sampler` makes it.
    """
    if tf.distribute.has_strategy() and tf.distribute.in_cross_replica_context(
    ):
      # Its tree is built by an op on the variable's handle, which a mirrored
      # variable has only in replica context, where create_sampler builds.
      raise ValueError(
          "AdaptiveSampler is made in a tf.distribute strategy's scope; make "
          "it with tf_adasamp.distribute.create_sampler(strategy, ...)")
    super().__init__(name=name)
    self._num_examples = _validation.positive_int(num_examples, "num_examples")
    self._dtype = _validation.float_dtype(dtype)
    # Checked as the ops will see them, rounded to the weights' dtype.
    self._amplitude = (amplitude
                       if callable(amplitude) else _validation.amplitude(
                           amplitude, self._dtype.as_numpy_dtype))
    self._decay = _validation.decay(decay, self._dtype.as_numpy_dtype)
    if not callable(self._amplitude):
      _validation.log_weight_bound(self._amplitude, self._decay,
                                   self._dtype.as_numpy_dtype)
    self._stratified = _validation.boolean(stratified, "stratified")
    self._epsilon = _validation.fraction(epsilon, "epsilon")
    self._beta = beta if callable(beta) else _validation.fraction(beta, "beta")
    seed = _validation.seed(seed)
    # The state is saved as one (CheckedState), its parts untracked.
    untracked = data_structures.NoDependency
    with self.name_scope:
      self.tree = untracked(
          SumTree(self._num_examples, dtype=self._dtype, name="tree"))
      # Sums of s_i * log(s_i) over the cached s_i of `tree`; node 0 holds
      # the total of `tree`, so that one read gives both (kl_divergence).
      # Leaves of 0 (s_i log s_i for s_i = 1), made as one tensor that the
      # variable adopts: no full-size copy beside the state.
      self._entropy_tree = untracked(
          tf.Variable(tf.pad(tf.reshape(self.tree.total(), [1]),
                             [[0, 2 * self.tree.capacity - 1]]),
                      trainable=False,
                      name="entropy_tree"))
      self.log_weights = untracked(
          tf.Variable(tf.zeros([self._num_examples], self._dtype),
                      trainable=False,
                      name="log_weights"))
      # The tree caches exp(log_weights - log_scale).
      self._log_scale = untracked(
          tf.Variable(tf.zeros([], self._dtype),
                      trainable=False,
                      name="log_scale"))
      self.generator = untracked(make_generator(seed))
      # The number of updates applied, which schedules read; only a sampler
      # with a schedule has it, so that others keep their checkpoints' and
      # Keras weights' layout.
      self._update_count = None
      if callable(self._amplitude) or callable(self._beta):
        self._update_count = untracked(
            tf.Variable(tf.zeros([], tf.int64),
                        trainable=False,
                        name="update_count"))
    variables = {
        "tree": self.tree.variable,
        "entropy_tree": self._entropy_tree,
        "log_weights": self.log_weights,
        "log_scale": self._log_scale,
        "generator_state": self.generator.state
    }
    if self._update_count is not None:
      variables["update_count"] = self._update_count
    # The settings a checkpoint must agree with; a schedule, being code, is
    # not saved. The controls' are saved where they are not the defaults,
    # so that checkpoints written before the controls existed restore.
    self._settings = {"decay": self._decay}
    if not callable(self._amplitude):
      self._settings["amplitude"] = self._amplitude
    if self._epsilon:
      self._settings["epsilon"] = self._epsilon
    if not callable(self._beta) and self._beta != 1:
      self._settings["beta"] = self._beta
    self._checkpointed = _checkpointing.CheckedState(
        variables, {
            "num_examples": self._num_examples,
            **self._settings
        },
        functools.partial(_sampler_checkpoint.restore,
                          variables=variables,
                          num_examples=self._num_examples,
                          settings=self._settings))

  @property
  def num_examples(self) -> int:
    """The number of examples n."""
    return self._num_examples

  @property
  def amplitude(self) -> float | Schedule:
    """Algorithm 1's amplitude alpha, or its schedule."""
    return self._amplitude

  @property
  def decay(self) -> float:
    """Algorithm 1's decay lambda."""
    return self._decay

  @property
  def stratified(self) -> bool:
    """Whether a batch's draws are stratified."""
    return self._stratified

  @property
  def dtype(self) -> tf.DType:
    """The dtype of the weights and sums."""
    return self._dtype

  @property
  def epsilon(self) -> float:
    """The uniform floor: draws follow (1 - epsilon) Q_t + epsilon U."""
    return self._epsilon

  @property
  def beta(self) -> float | Schedule:
    """The importance exponent, a float or a schedule of it."""
    return self._beta

  def uniforms(self, batch_size: int) -> tf.Tensor:
    """Draws the uniforms behind the next draw, advancing the generator.

    Args:
      batch_size: B, an int >= 1.

    Returns:
      [B] uniforms in [0, 1), of the sampler's dtype; stratified for a
      stratified sampler.

    Raises:
      TypeError: if `batch_size` is not an int.
      ValueError: if `batch_size` is out of [1, 2**31 - 1].
    """
    # Checked before the generator advances: a refused call draws nothing.
    batch_size = _validation.batch_size(batch_size)
    uniforms = _draws.generator_uniforms(self.generator, batch_size,
                                         self._dtype)
    if self._stratified:
      uniforms = _draws.stratified(uniforms, batch_size)
    return uniforms

  def sample(self, batch_size: int) -> tf.Tensor:
    """Draws indices from Q_t.

    With the floor, the draws follow (1 - epsilon) Q_t + epsilon U.

    Args:
      batch_size: B, an int >= 1.

    Returns:
      int64 [B] indices in [0, n).

    Raises:
      TypeError: if `batch_size` is not an int.
      ValueError: if `batch_size` is out of [1, 2**31 - 1].
    """
    return self.sample_with_probabilities(batch_size)[0]

  def sample_with_probabilities(self,
                                batch_size: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Draws indices, with the probability of each.

    The probabilities are Q_t(i), or with the floor the mixture's
    (1 - epsilon) Q_t(i) + epsilon / n; they give importance weights
    1 / (n p_i) for an unbiased gradient estimate (`importance_weights`).
    The draws are those of `tree.sample(uniforms(B))` without the floor;
    with it, a uniform u < epsilon picks example floor(u / epsilon * n) and
    any other is mapped to (u - epsilon) / (1 - epsilon) for the tree.

    Args:
      batch_size: B, an int >= 1.

    Returns:
      (indices, probabilities): int64 [B] indices in [0, n) and [B] their
      probabilities.

    Raises:
      TypeError: if `batch_size` is not an int.
      ValueError: if `batch_size` is out of [1, 2**31 - 1].
    """
    if self._epsilon or not self._draws_in_one_op():
      return self._sample_from(self.tree.variable, self.uniforms(batch_size))
    # The same uniforms and generator state, made inside the draw op: one op
    # per batch where the generator's own take several, a quarter of a
    # sampler step's time on the CPU and the GPU (benchmarks/RESULTS.md).
    return ops.sum_tree_draw(self.tree.variable.handle,
                             self.generator.state.handle,
                             tf.constant(_validation.batch_size(batch_size),
                                         tf.int64),
                             T=self._dtype,
                             stratified=self._stratified)

  def _sample_from(self, tree, uniforms):
    """Draws for `uniforms` from `tree`, with the floor.

    `tree` is the tree's variable, or one replica's copy of it; see
    `sample_with_probabilities`.

    Returns:
      (indices, probabilities) of the draws.
    """
    uniforms = tf.convert_to_tensor(uniforms, self._dtype)
    if not self._epsilon:
      return ops.sum_tree_sample(tree.handle, uniforms)
    indices, probabilities = _draws.floored_draws(tree, self.tree.capacity,
                                                  self._num_examples,
                                                  self._epsilon, uniforms)
    return indices, self._floored(probabilities)

  def _floored(self, probabilities):
    """(1 - epsilon) Q_t + epsilon / n for probabilities Q_t."""
    return ((1 - self._epsilon) * probabilities +
            self._epsilon / self._num_examples)

  def importance_weights(self, probabilities: TensorLike) -> tf.Tensor:
    """(1 / (n p_i)) ** beta, for draws of probabilities p_i.

    With beta = 1 the weighted batch mean of a loss is an unbiased estimate
    of its mean over the n examples; smaller beta trades bias for variance.
    The weights are not divided by their maximum, as prioritized replay's
    are (TorchRL, Schaul et al.): as in SGD's importance samplers, their
    mean under the draws, sum_i p_i (n p_i) ** -beta, is 1 at beta = 1 and
    at most 1 for any beta (Jensen), so the step size keeps its meaning;
    with the floor, no weight exceeds epsilon ** -beta. For the replay
    convention, divide by `tf.reduce_max` of the batch's weights.

    Args:
      probabilities: [B] probabilities of draws, as
        `sample_with_probabilities` returns them.

    Returns:
      [B] weights, of the probabilities' dtype.

    Raises:
      InvalidArgumentError: a beta schedule's value outside [0, 1] (inside
        `jit_compile=True`, where nothing can raise, the weights are NaN).
    """
    return self._weights(probabilities, self._beta_now())

  def sample_with_weights(self, batch_size: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Draws `batch_size` indices and returns (indices, importance weights).

    The draws are those of `sample_with_probabilities`, the weights those of
    `importance_weights` for their probabilities. A beta schedule is
    evaluated, and refused, before the draw.

    Returns:
      (indices, importance weights), each [batch_size].
    """
    beta = self._beta_now()
    with tf.control_dependencies([beta] if tf.is_tensor(beta) else []):
      indices, probabilities = self.sample_with_probabilities(batch_size)
    return indices, self._weights(probabilities, beta)

  def _beta_now(self):
    """beta, or its schedule's value at the update count, checked."""
    if callable(self._beta):
      return self._scheduled(self._beta, "beta", upper=1.0)[0]
    return self._beta

  def _weights(self, probabilities, beta):
    probabilities = tf.convert_to_tensor(probabilities, dtype_hint=self._dtype)
    scaled = self._num_examples * probabilities
    if tf.is_tensor(beta):
      return tf.pow(scaled, -tf.cast(beta, probabilities.dtype))
    # Exactly 1 / (n p) for beta = 1, as `tf_adasamp.data.importance_weights`.
    return 1 / scaled if beta == 1 else tf.pow(scaled, -beta)

  def _scheduled(self, schedule, name, upper=math.inf):
    """`_validation.schedule_value` at this sampler's update count."""
    return _validation.schedule_value(schedule, self._update_count, name,
                                      self._dtype, upper)

  def _draws_in_one_op(self):
    """Whether the draw op makes the generator's uniforms itself.

    It does for a Philox state, outside tf.distribute, where a generator's
    draws depend on the replica.

    Returns:
      A bool.
    """
    return (self.generator.algorithm == _PHILOX and self.strategy is None and
            not tf.distribute.has_strategy())

  @property
  def strategy(self) -> tf.distribute.Strategy | None:
    """The strategy whose replicas each hold a copy of the state, or None.

    `tf_adasamp.distribute.create_sampler` makes such a sampler; None means
    one copy.
    """
    variable = self.tree.variable
    if isinstance(variable, tf.distribute.DistributedValues):
      return variable.distribute_strategy
    return None

  def update(self, indices: TensorLike, utilities: TensorLike) -> None:
    """Algorithm 1, line 5: w_i <- w_i ** decay * exp(amplitude * u_i).

    With an amplitude schedule, the amplitude is its value at the update
    count; a sampler with a schedule counts each update it applies.

    Works in every tf.distribute context, as a mirrored variable's `assign`
    does. Inside `strategy.run` (e.g. a Keras `train_step`), `indices` and
    `utilities` are this replica's; every replica must call `update` in the
    same step (a collective), and the union of all replicas' draws updates
    every copy of the state, so the copies stay identical. In cross-replica
    context they are the per-replica values `strategy.run` returned.

    Args:
      indices: [B] sampled indices in [0, n); a repeated index is reweighted
        once, with the utility of its first occurrence (in replica order
        across replicas).
      utilities: [B] finite utilities, e.g. from `tf_adasamp.utilities`.

    Raises:
      TypeError: if `indices` are not integers or `utilities` not real, or
        an amplitude schedule returns something other than a real number.
      ValueError: if the sampler has one copy of its state and is updated
        from a replica of a strategy with several.
      tf.errors.InvalidArgumentError: if an index is out of range, a utility
        not finite, a new log weight would overflow, an amplitude schedule's
        value is out of range, or the shapes differ; the state is left as
        it was.
    """
    strategy = self.strategy
    if strategy is not None and not tf.distribute.has_strategy():
      with strategy.scope():
        self.update(indices, utilities)
      return
    if not tf.distribute.has_strategy():
      self._reweight(indices, utilities)
      return
    if tf.distribute.in_cross_replica_context():
      # Always gathered: with one local replica, `strategy.run` returns plain
      # tensors that still hold only that replica's share.
      current = tf.distribute.get_strategy()
      packed = current.gather(current.run(self._pack, (indices, utilities)),
                              axis=0)
      if strategy is None:
        # One copy outside the strategy (a single owner): update it once.
        self._reweight(*self._unpack(packed))
      else:
        strategy.run(self._reweight, self._unpack(packed))
      return
    context = tf.distribute.get_replica_context()
    if strategy is None and context.num_replicas_in_sync > 1:
      raise ValueError(
          "the sampler has one copy of its state but the strategy has "
          f"{context.num_replicas_in_sync} replicas; make it with "
          "tf_adasamp.distribute.create_sampler(strategy, ...)")
    packed = context.all_gather(self._pack(indices, utilities), axis=0)
    self._reweight(*self._unpack(packed))

  def _reweight(self, indices, utilities, amplitude=None, decay=None):
    """Reweights this replica's copy of the state, then counts the update.

    By default with the sampler's amplitude (or its schedule's value) and
    decay; a reset passes its own and is not counted.

    Args:
      indices: [B] indices.
      utilities: [B] utilities.
      amplitude: the amplitude; None for the sampler's.
      decay: the decay; None for the sampler's.
    """
    indices = _validation.indices(indices)
    utilities = self._as_utilities(utilities)
    counted = amplitude is None
    valid = True
    if counted and callable(self._amplitude):
      # The op takes its amplitude as a constant (XLA compiles it in), so
      # the schedule's value scales the utilities and the op's amplitude is
      # 1: the same products amplitude * u. A refused value is NaN, which
      # the op refuses as a utility.
      amplitude, valid = self._scheduled(
          self._amplitude, "amplitude",
          _validation.max_amplitude_ratio(self._dtype.as_numpy_dtype) *
          (1 - self._decay))
      utilities, amplitude = amplitude * utilities, 1.0
    reweight = ops.adaptive_reweight(
        self.tree.variable.handle, self._entropy_tree.handle,
        self.log_weights.handle, self._log_scale.handle, indices, utilities,
        tf.constant(self._amplitude if amplitude is None else amplitude,
                    self._dtype),
        tf.constant(self._decay if decay is None else decay, self._dtype))
    if counted and self._update_count is not None:
      # After the reweight, which stops the step where it refuses (on a
      # GPU it refuses silently, and a refused amplitude is not counted).
      # Through the handle, as the reweight, to count on this replica's
      # copy.
      with tf.control_dependencies([reweight]):
        tf.raw_ops.AssignAddVariableOp(resource=self._update_count.handle,
                                       value=tf.cast(valid, tf.int64))

  def _as_utilities(self, utilities):
    utilities = tf.convert_to_tensor(utilities, dtype_hint=self._dtype)
    if not (utilities.dtype.is_floating or utilities.dtype.is_integer):
      raise TypeError("utilities must be real numbers, got "
                      f"{utilities.dtype.name}")
    return tf.cast(utilities, self._dtype)

  def _pack(self, indices, utilities):
    """Packs indices and the bits of the utilities, to gather at once.

    One collective instead of two: per step, the collective's latency, not
    its few bytes, is what costs (docs/distribute.md).

    Args:
      indices: [b] indices.
      utilities: [b] utilities.

    Returns:
      [b, 2] int64.
    """
    bits = tf.bitcast(self._as_utilities(utilities), _BITS[self._dtype])
    return tf.stack([_validation.indices(indices),
                     tf.cast(bits, tf.int64)],
                    axis=1)

  def _unpack(self, packed):
    """(indices, utilities) from a gathered `_pack`."""
    bits = tf.cast(packed[:, 1], _BITS[self._dtype])
    return packed[:, 0], tf.bitcast(bits, self._dtype)

  def probabilities(self) -> tf.Tensor:
    """Reads the distribution the draws follow.

    Q_t; with the floor, the mixture (1 - epsilon) Q_t + epsilon / n.

    Returns:
      [n] probabilities, of the sampler's dtype.
    """
    if self._epsilon:
      return self._floored(self.tree.probabilities())
    return self.tree.probabilities()

  def kl_divergence(self) -> tf.Tensor:
    """KL(Q_t || uniform) of the current distribution, in O(1).

    With cached weights s_i, total W and H = sum_i s_i log s_i,
    KL = sum_i (s_i / W) log(n s_i / W) = log n + H / W - log W.
    W and H come from one read of one variable (the entropy tree, whose
    node 0 holds W), so they are of one state even while other threads
    update the sampler.

    With the floor, it is the KL of the mixture P = (1 - epsilon) Q_t +
    epsilon U that the draws follow, at most (1 - epsilon) KL(Q_t || U)
    (convexity). log P_i does not split over those sums, so it costs a pass
    over the n probabilities, O(n), from one read of the tree.

    Returns:
      A scalar >= 0 of the sampler's dtype.
    """
    if self._epsilon:
      probabilities = self.probabilities()
      kl = tf.reduce_sum(
          tf.math.xlogy(probabilities, self._num_examples * probabilities))
      return tf.maximum(kl, tf.zeros([], self._dtype))
    total, entropy_sum = tf.unstack(tf.gather(self._entropy_tree, [0, 1]))
    kl = (math.log(self._num_examples) + entropy_sum / total -
          tf.math.log(total))
    # Round-off can leave a uniform distribution a hair below zero.
    return tf.maximum(kl, tf.zeros([], self._dtype))

  def reset(self) -> None:
    """Returns to the uniform distribution (all weights 1).

    The update count that schedules read is kept.

    One reweight op over every index with utility 0, amplitude 0 and decay 0
    (l_i <- 0; the op then caches leaves of exactly 1): it holds the locks
    of all of the state, so no update runs halfway through a reset. Inside
    `strategy.run`, it resets this replica's copy.
    """
    self._reweight(tf.range(self._num_examples, dtype=tf.int64),
                   tf.zeros([self._num_examples], self._dtype),
                   amplitude=0.0,
                   decay=0.0)
