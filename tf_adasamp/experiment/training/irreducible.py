"""The irreducible losses of --utility=reducible_loss (RHO-LOSS, Mindermann
et al., ICML 2022).

Before a new run trains, a model trained on its validation split alone
(`--irreducible_model`; by default the run's own `--model`, of the same
size) gives each training example its irreducible loss: its cross-entropy
there (`tf_adasamp.utilities.irreducible_losses`). The run's
`tf_adasamp.utilities.ReducibleLoss` keeps them and its checkpoint saves
them, so a resumed run reads them back instead of training that model again.

The model trains for `--irreducible_epochs` epochs over the split with Adam
(Keras's defaults: step size 0.001), in batches of `--batch_size`, a fresh
permutation of the split each epoch; its initial weights and permutations
come from `--seed`, so trial k's runs share its losses.
"""

import math

import numpy as np
import tensorflow as tf

from tf_adasamp import utilities
from tf_adasamp.experiment.training import models


def reducible_loss(config, data):
  """The ReducibleLoss of a run of `config` on `data` (a datasets.Dataset
  with a validation split), its irreducible losses all 0 until `fit` gives
  them; made under the run's strategy scope, so that each replica holds
  them."""
  bound = config.reducible_loss_bound or math.log(data.num_classes)
  return utilities.ReducibleLoss(np.zeros(data.num_train, np.float32),
                                 bound=bound,
                                 name="reducible_loss")


def fit(config, data):
  """The irreducible losses of `data`'s training examples: trains the
  irreducible model on its validation split alone, then returns that
  model's [n] cross-entropies on the training examples."""
  model = models.build(config.irreducible_model or config.model,
                       data.image_shape,
                       data.num_classes,
                       seed=config.seed,
                       l2=config.l2)
  optimizer = tf.keras.optimizers.Adam()

  @tf.function(reduce_retracing=True)
  def train_step(images, labels):
    with tf.GradientTape() as tape:
      logits = model(images, training=True)
      loss = tf.add_n([
          tf.reduce_mean(
              tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)),
          *model.losses
      ])
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))

  size = len(data.y_validation)
  batch_size = min(config.batch_size, size)
  steps = math.ceil(config.irreducible_epochs * size / batch_size)
  rng = np.random.default_rng(config.seed)
  order = np.concatenate([
      rng.permutation(size) for _ in range(math.ceil(steps * batch_size / size))
  ])
  for step in range(steps):
    batch = order[step * batch_size:(step + 1) * batch_size]
    train_step(data.x_validation[batch], data.y_validation[batch])
  return utilities.irreducible_losses(model, data.x_train, data.y_train)
