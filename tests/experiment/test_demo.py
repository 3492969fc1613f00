"""The demo prints the hard examples' sampling mass and held-out accuracy."""

from tf_adasamp.experiment import demo
from tf_adasamp.experiment.training import datasets


def test_demo_compares_held_out_accuracy_with_uniform(capsys):
  demo.main(steps=10, seeds=2)
  out = capsys.readouterr().out
  assert "Q(wrong)" in out
  assert "uniform" in out and "adaptive - uniform" in out
  assert "95% interval" in out


def test_amplitude_zero_is_uniform_sampling_from_the_same_model():
  data = datasets.load_digits()
  # Same seed, amplitude 0 with either decay: the weights stay equal, so
  # the draws and hence the models are the same.
  assert demo.train(data, 0.0, 0.5, 3, steps=5) == demo.train(data,
                                                              0.0,
                                                              0.9,
                                                              3,
                                                              steps=5)
