"""Adaptive sampling for `keras.Model.fit` (Keras 3, TensorFlow backend).

`AdaptiveSamplingModel` wraps a model, and its `fit` takes what
`keras.Model.fit` takes: it trains on batches drawn from an
`AdaptiveSampler`, computes each drawn example's utility and reweights it
(London, NIPS 2017, Algorithm 1; the utility of the step's own forward
pass, h_{t-1} with dropout on, or of the updated model h_t, `utility_at`),
and logs KL(Q_t || uniform) as the metric `kl` (the paper's Fig. 1e).
Loss, compiled metrics, callbacks, validation and saving work as usual; the
sampler's state is part of the model's weights.

Where the draws are made. Arrays, and a `tf.data.Dataset` of examples (read
into memory once), are drawn from inside the train step: Algorithm 1
exactly, with no lag, so a fit resumed from `BackupAndRestore` draws what
the uninterrupted one would. The stage's dataset (`stage.dataset(source)`,
for data read from disk by index) draws in the input pipeline instead,
ahead of the step by at most the stage's `max_lag`.

Training logs. The drawn batches over-represent the examples the model gets
wrong, so the loss and metrics measured on them (logged as `adaptive_loss`,
`adaptive_<metric>`) read worse than the same model on the training set.
`loss` and `<metric>` are the training set's under the uniform
distribution, estimated from the same batches with importance weights
1 / (n Q_t(i)) (unbiased for the loss; self-normalized for metrics), so they
compare with `val_loss` and `val_<metric>` as in uniform training. Each
epoch's logs, and the History, also hold the distribution's
`effective_sample_size` and `heaviest_share` (`tf_adasamp.diagnostics`).

The stage's update releases the pipeline's next draw, which XLA cannot
compile, so with `jit_compile=True` (or "auto" on a GPU) XLA compiles the
forward and backward pass and the update runs after it, outside the
compiled function; evaluation and prediction compile whole.

The modules:

  model         AdaptiveSamplingModel: the wrapper and its hooks
  callbacks     SamplingTensorBoard
  _arguments    what the wrapper and fit are given, checked
  _training     the train step's pieces, and the logs fit adds
  _saving       the config, and the sampler's state as weights
"""

from tf_adasamp.keras._arguments import KERAS_BATCH_SIZE
from tf_adasamp.keras._arguments import SAMPLER_OPTIONS
from tf_adasamp.keras._arguments import UTILITY_AT
from tf_adasamp.keras.callbacks import SamplingTensorBoard
from tf_adasamp.keras.model import AdaptiveSamplingModel

# The public API, in the order the API reference shows it.
__all__ = [
    "KERAS_BATCH_SIZE", "UTILITY_AT", "SAMPLER_OPTIONS",
    "AdaptiveSamplingModel", "SamplingTensorBoard"
]
