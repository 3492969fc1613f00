"""A one-minute look at adaptive sampling, and what it does to accuracy.

Trains a logistic regression on scikit-learn's digits (1500 training, 297
held-out images, 10 classes) twice from the same initial weights: once
drawing batches uniformly, once from an AdaptiveSampler with the zero-one
utility and the library's defaults (`tf_adasamp.defaults`). While training
it prints, for the adaptive run, how much sampling mass sits on the training
examples the model gets wrong ("Q(wrong)") beside the share uniform sampling
gives them (the training error); at the end, the held-out accuracy of both
runs, over several seeds, with the paired difference and its 95% interval.

    python -m tf_adasamp.experiment.demo
"""

import numpy as np

import tf_adasamp
from tf_adasamp import defaults
from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment.study import verdicts
from tf_adasamp.experiment.training import datasets

PROGRAM = "tf-adasamp-demo"


def train(data,
          amplitude,
          decay,
          seed,
          steps,
          batch_size=32,
          learning_rate=0.1,
          log_every=None):
  """Trains one logistic regression with `AdaptiveSamplingModel.fit`;
  returns its held-out accuracy.

  amplitude 0 is uniform sampling: the weights stay equal, and with the same
  seed the draws are those of the adaptive run until it first reweights
  (the stage's `max_lag=0` draws exactly Algorithm 1's sequence).
  """
  # Here, not at the top: --help, and a Ctrl-C while TensorFlow loads
  # (seconds), get their answers before it.
  import keras

  x = data.x_train.reshape(len(data.y_train), -1)
  keras.utils.set_random_seed(seed)
  model = keras.Sequential([
      keras.Input(x.shape[1:]),
      keras.layers.Dense(data.num_classes, activation="softmax")
  ])
  sampler = tf_adasamp.AdaptiveSampler(len(data.y_train),
                                       amplitude,
                                       decay,
                                       seed=seed)
  stage = tf_adasamp.data.AdaptiveSampling(sampler, batch_size, max_lag=0)
  trainer = tf_adasamp.keras.AdaptiveSamplingModel(model,
                                                   stage,
                                                   utility="zero_one")
  trainer.compile(optimizer=keras.optimizers.SGD(learning_rate),
                  loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
  callbacks = [
      keras.callbacks.LambdaCallback(
          on_train_batch_end=lambda batch, logs: _print_diagnostics(
              trainer, x, data.y_train, batch + 1, log_every))
  ] if log_every else []
  trainer.fit(x,
              data.y_train,
              steps_per_epoch=steps,
              callbacks=callbacks,
              verbose=0)
  _, accuracy = trainer.evaluate(data.x_test.reshape(len(data.y_test), -1),
                                 data.y_test,
                                 verbose=0)
  return accuracy


def _print_diagnostics(trainer, x, y, step, every):
  """Every `every` steps, prints the training error, the sampling mass on
  the misclassified examples and KL(Q_t || uniform)."""
  if step % every:
    return
  wrong = np.argmax(trainer.predict(x, verbose=0), axis=1) != y
  values = tf_adasamp.diagnostics.compute(trainer.stage.sampler,
                                          misclassified=wrong)
  print(f"{step:5d} {wrong.mean():8.3f} "
        f"{float(values['misclassified_mass']):9.3f} "
        f"{float(values['kl_divergence']):7.3f}")


def main(steps=500,
         amplitude=defaults.AMPLITUDE,
         decay=defaults.DECAY,
         seeds=5):
  data = datasets.load_digits()
  print(f"Adaptive sampling (amplitude {amplitude:g}, decay {decay:g}, "
        "zero-one utility), seed 0:")
  print(f"{'step':>5} {'error':>8} {'Q(wrong)':>9} {'KL':>7}")
  adaptive = [train(data, amplitude, decay, 0, steps, log_every=steps // 5)]
  print("error: the share of training examples the model gets wrong, which "
        "is the sampling mass uniform sampling puts on them; Q(wrong): the "
        "mass adaptive sampling puts on them; KL: KL(Q_t || uniform).\n")
  adaptive += [
      train(data, amplitude, decay, seed, steps) for seed in range(1, seeds)
  ]
  uniform = [train(data, 0.0, decay, seed, steps) for seed in range(seeds)]
  test = verdicts.paired_test(np.subtract(adaptive, uniform))
  mean, low, high = test.mean, test.low, test.high
  print(f"Held-out accuracy after {steps} steps, {seeds} seeds (the same "
        "initial model per seed):")
  print(f"  uniform  {np.mean(uniform):.4f}   adaptive {np.mean(adaptive):.4f}"
        f"   adaptive - uniform {mean:+.4f} (95% interval [{low:+.4f}, "
        f"{high:+.4f}])")
  if low > 0:
    print("  Adaptive sampling held out better in these runs.")
  elif high < 0:
    print("  Adaptive sampling held out worse in these runs.")
  else:
    print("  No difference shown: focusing on the hard examples did not "
          "change held-out accuracy here.")


def run():
  """Console-script entry point (tf-adasamp-demo). No flags of its own:
  --help says what it does, and a stray argument is refused."""
  flags_lib.run(PROGRAM, lambda: None, main)


if __name__ == "__main__":
  run()
