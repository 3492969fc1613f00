"""A one-minute look at adaptive sampling: the sampler finds the hard examples.

Trains a logistic regression to tell digits 0-4 from 5-9 (scikit-learn's
bundled digits), drawing each batch from an AdaptiveSampler with the zero-one
utility, and prints how much of the sampling mass sits on the examples the
model gets wrong, next to the share uniform sampling would give them (the
error rate) and KL(Q_t || uniform).

    python -m tf_adasamp.experiment.demo
"""

import numpy as np
from sklearn import datasets
import tensorflow as tf

import tf_adasamp


def main(steps=500, batch_size=32, amplitude=1.0, decay=0.9, seed=0):
  digits = datasets.load_digits()
  x = tf.constant(digits.data / 16.0, tf.float32)
  labels = (digits.target >= 5).astype(np.int32)
  y = tf.constant(labels)

  model = tf.keras.Sequential([tf.keras.layers.Dense(2, activation="softmax")])
  model.build([None, x.shape[1]])
  optimizer = tf.keras.optimizers.SGD(0.1)
  sampler = tf_adasamp.AdaptiveSampler(len(labels), amplitude, decay,
                                       seed=seed)

  @tf.function
  def step():
    indices = sampler.sample(batch_size)
    batch_x, batch_y = tf.gather(x, indices), tf.gather(y, indices)
    with tf.GradientTape() as tape:
      probs = model(batch_x)
      loss = tf.reduce_mean(
          tf.keras.losses.sparse_categorical_crossentropy(batch_y, probs))
    optimizer.apply_gradients(
        zip(tape.gradient(loss, model.trainable_variables),
            model.trainable_variables))
    sampler.update(indices, tf_adasamp.utilities.zero_one(batch_y,
                                                          model(batch_x)))
    return loss

  print(f"{'step':>5} {'loss':>6} {'error':>6} {'Q(wrong)':>9} {'KL':>6}")
  for t in range(1, steps + 1):
    loss = step()
    if t % 50 == 0:
      wrong = np.argmax(model(x), axis=1) != labels
      q = sampler.probabilities().numpy()
      print(f"{t:5d} {float(loss):6.3f} {wrong.mean():6.3f} "
            f"{q[wrong].sum():9.3f} {float(sampler.kl_divergence()):6.3f}")
  print("Q(wrong): the sampling mass on misclassified examples; uniform "
        "sampling would give them 'error'.")


def run():
  """Console-script entry point (tf-adasamp-demo)."""
  main()


if __name__ == "__main__":
  run()
