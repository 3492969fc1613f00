"""One adaptive distribution across replicas and workers, with tf.distribute.

Under `MirroredStrategy` or `MultiWorkerMirroredStrategy` the global batch of
London (NIPS 2017), Algorithm 1 in mini-batch form, is still B independent
draws from one Q_t, and each unique index is still reweighted once:

- every replica holds a bit-identical copy of the sampler's state (its
  variables are MirroredVariables; inside `strategy.run`, `variable.handle` is
  the replica's own copy, so the sampler's ops read and write that copy);
- each replica draws its share of the batch from its copy with its own random
  stream: a `tf.random.Generator` made under a strategy folds the global
  replica id into its key, while the copies of its state advance together;
- after the step, `AdaptiveSampler.update` (which dispatches on the
  replica context) all-gathers every replica's indices and utilities, in
  replica order, and applies the whole global batch to every copy. Same
  input, same deterministic op: the copies stay identical, and an index that
  two replicas drew is reweighted once, with its first utility in replica
  order, exactly as one device would.

docs/distribute.md measures this against a single owner of the tree and says
why the copies were chosen. The sampler stays an ordinary `AdaptiveSampler`,
so its checkpoints restore under any strategy, or none.
"""

import tensorflow as tf

from tf_adasamp import _validation
from tf_adasamp import defaults
from tf_adasamp.sampler import AdaptiveSampler


def create_sampler(strategy: tf.distribute.Strategy,
                   num_examples: int,
                   amplitude: float = defaults.AMPLITUDE,
                   decay: float = defaults.DECAY,
                   **kwargs) -> AdaptiveSampler:
  """Creates an `AdaptiveSampler` with one copy of its state per replica.

  Example, a step of a custom training loop:
    sampler = distribute.create_sampler(strategy, len(x), seed=0)

    @tf.function
    def train_step():
      def replica_step():
        indices = sampler.sample(per_replica_batch_size)  # this replica's share
        ... forward/backward on tf.gather(x, indices), utilities ...
        sampler.update(indices, utilities)  # all replicas' draws, every copy
      strategy.run(replica_step)

  Args:
    strategy: a `tf.distribute.Strategy`; the default strategy gives a plain
      sampler.
    num_examples: as for `AdaptiveSampler`.
    amplitude: as for `AdaptiveSampler`.
    decay: as for `AdaptiveSampler`.
    **kwargs: the other arguments of `AdaptiveSampler` (seed, stratified,
      dtype, name, epsilon, beta).

  Returns:
    The sampler. In replica context its `sample` methods draw the replica's
    share, and `update` applies every replica's draws to every copy.
    `strategy.run(sampler.reset)` resets all.

  Raises:
    TypeError: if `strategy` is not a `tf.distribute.Strategy`, or as
      `AdaptiveSampler` does.
    ValueError: as `AdaptiveSampler` does.
  """
  if not isinstance(strategy, tf.distribute.Strategy):
    raise TypeError(
        f"strategy must be a tf.distribute.Strategy, got {strategy!r}")
  samplers = []

  def build():
    samplers.append(AdaptiveSampler(num_examples, amplitude, decay, **kwargs))

  # Built in replica context, where the sampler's initial tree build can
  # reach a copy's handle: the strategy hands the variables replica 0 creates
  # to the other replicas (matched by name), and each builds its own copy.
  strategy.run(build)
  return samplers[0]


def sample_share(sampler: AdaptiveSampler, batch_size: int, share: int,
                 num_shares: int) -> tuple[tf.Tensor, tf.Tensor]:
  """Draws one of `num_shares` disjoint shares of a batch from Q_t.

  For input pipelines, one per worker (`input_pipeline_id` and
  `num_input_pipelines` of a `tf.distribute.InputContext`), which run outside
  replica context: it reads this worker's first copy of the tree, in any
  context. Each call draws the same `num_shares * batch_size` uniforms on
  every worker (the copies of the generator advance in step, as long as every
  pipeline draws once per element and nothing else draws between) and keeps
  slice `share`: the shares of one call are disjoint pieces of one random
  stream, so together they are `num_shares * batch_size` independent draws
  from Q_t (stratified as one batch, for a stratified sampler). With one
  share it is `sampler.sample_with_probabilities(batch_size)`.

  Args:
    sampler: the `AdaptiveSampler` to draw from, made by `create_sampler`
      or without a strategy.
    batch_size: the draws of one share, an int >= 1.
    share: which share this caller keeps, an int in [0, num_shares).
    num_shares: how many shares each call draws, an int >= 1.

  Returns:
    (indices, probabilities): int64 [batch_size] and [batch_size] Q_t(i)
    (with the sampler's floor, the mixture's probabilities).

  Raises:
    TypeError: if `batch_size`, `share` or `num_shares` is not an int.
    ValueError: if `batch_size` or `num_shares` is < 1, or `share` is out
      of range.
  """
  batch_size = _validation.positive_int(batch_size, "batch_size")
  num_shares = _validation.positive_int(num_shares, "num_shares")
  if isinstance(share, bool) or not isinstance(share, int):
    raise TypeError(f"share must be an int, got {share!r}")
  if not 0 <= share < num_shares:
    raise ValueError(f"share must be in [0, {num_shares}), got {share}")
  uniforms = sampler.uniforms(num_shares * batch_size)
  tree = sampler.tree.variable
  strategy = sampler.strategy
  if strategy is not None:
    # Outside replica context a mirrored variable has no handle of its own.
    tree = strategy.experimental_local_results(tree)[0]
  return sampler._sample_from(
      tree, uniforms[share * batch_size:(share + 1) * batch_size])
