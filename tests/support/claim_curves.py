"""Synthetic trials and amplitude sweeps for the four claims, whose answers
are known (tests/experiment/study/test_claims.py, test_report.py)."""

import numpy as np

from tf_adasamp.experiment.study import presets


def synthetic(effect, trials=5, noise=0.01, final_error=0.01, seed=0):
  """Curves of `trials` trials over 20 epochs where adaptive sampling is
  better (effect > 0), worse (< 0) or no different (0) than uniform, with
  a trial-to-trial spread shared by a trial's algorithms; uniform runs end
  at training error `final_error`; the KL rises, then decays."""
  rng = np.random.default_rng(seed)
  epochs = np.arange(0, 21, 1.0)
  base = np.exp(-epochs / 4.0)
  shared = rng.normal(0, 0.2, size=(trials, 1))
  curves = {}
  for name in presets.RUNS:
    adaptive = name in presets.ADAPTIVE
    own = rng.normal(0, noise, size=(trials, 1))
    shift = (effect if adaptive else 0.0) + own
    loss = np.clip(base * (1 + shared) - shift * base, 1e-3, None)
    error = final_error + (1 - final_error) * np.minimum(loss, 2) / 2
    kl = np.tile(epochs * np.exp(-epochs / 2.0), (trials, 1)) * adaptive
    kl = kl * (1 + rng.uniform(0, 0.1, size=kl.shape))
    curves[name] = {
        "step": epochs * 10,
        "epoch": epochs,
        "train_loss": loss,
        "train_accuracy": 1 - error,
        "test_loss": loss,
        "test_accuracy": 0.9 - loss / 4,
        "kl": kl,
        "ess_fraction": np.exp(-kl),
        **_clocks(epochs, trials),
    }
  return curves


def _clocks(epochs, trials):
  """The runs' work and seconds, one pass of a 10-example batch a step."""
  steps = np.tile(epochs * 10, (trials, 1))
  return {
      "examples_forwarded": steps * 10,
      "examples_backpropagated": steps * 10,
      "train_seconds": steps * 1e-3,
  }


def sweep_of(speed_by_amplitude,
             test_by_amplitude,
             kl_by_amplitude,
             trials=5,
             jitter=0.001):
  """A sweep whose training loss falls at the given speeds (amplitude 0,
  the uniform run, first) and whose test accuracy, test loss and KL are
  flat at the given values, each with a little per-trial noise."""
  rng = np.random.default_rng(3)
  epochs = np.arange(0, 21, 1.0)
  amplitudes = [0.0, 0.5, 1.0, 2.0][:len(speed_by_amplitude)]
  shape = (trials, len(epochs))
  curves = []
  for speed, test, kl in zip(speed_by_amplitude, test_by_amplitude,
                             kl_by_amplitude):
    noise = rng.normal(0, jitter, size=(trials, 1))
    loss = np.exp(-speed * (1 + noise) * epochs / 5)
    curves.append({
        "step": epochs * 10,
        "epoch": epochs,
        "train_loss": loss,
        "train_accuracy": 1 - loss / 2,
        "test_loss": np.full(shape, 1 - test) + noise,
        "test_accuracy": np.full(shape, test) - noise,
        "kl": np.full(shape, kl),
        "ess_fraction": np.full(shape, np.exp(-kl)),
        # Of 100 examples, the heaviest exp(kl) times uniform's 1/100; the
        # misclassified ones drawn 1 + kl times their share.
        "max_probability": np.full(shape,
                                   np.exp(kl) / 100),
        "misclassified_mass": (1 + kl) * loss / 2,
        **_clocks(epochs, trials),
    })
  return {
      "algorithm": "AdaSamp-01-SGD",
      "amplitude": amplitudes,
      "curves": curves
  }


def trending(trials=5):
  """A sweep where a larger amplitude trains faster and tests worse."""
  return sweep_of([1.0, 1.2, 1.4, 1.6], [0.9, 0.85, 0.8, 0.75],
                  [0.0, 0.1, 0.2, 0.3],
                  trials=trials)


TRENDING = trending()


def with_kl(curves, kl_of_epoch, noise=0.005, seed=1, names=None):
  """`curves` with the adaptive variants' (or `names`') KL set to
  kl_of_epoch(epochs) plus independent noise at each evaluation."""
  rng = np.random.default_rng(seed)
  for name in names or presets.ADAPTIVE:
    epochs = curves[name]["epoch"]
    trials = len(curves[name]["kl"])
    curves[name]["kl"] = np.clip(
        kl_of_epoch(epochs) + rng.normal(0, noise, (trials, len(epochs))), 0,
        None)
  return curves


def peak_then_decline(epochs):
  return epochs * np.exp(-epochs / 2)
