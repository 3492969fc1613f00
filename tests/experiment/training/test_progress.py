"""The progress of a run (tf_adasamp.experiment.training.progress)."""

import pytest

from run_records import tiny_config
from tf_adasamp.experiment.training import loop


@pytest.mark.parametrize("sampling", ["uniform", "adaptive"])
def test_progress_bar_names_the_batches_it_measures(digits, capsys, sampling):
  loop.train(tiny_config(sampling=sampling), data=digits, progress=True)
  shown = capsys.readouterr().out
  assert f"{sampling} batch loss" in shown
  assert f"{sampling} batch accuracy" in shown


def test_progress_off_a_terminal_is_plain_lines(digits, capsys):
  loop.train(tiny_config(), data=digits, progress=True)
  shown = capsys.readouterr().out
  # No terminal control codes (Keras's bar redraws with them), and the last
  # step's line.
  assert not set("\x1b\r\b") & set(shown)
  assert "step 4/4 - adaptive batch loss: " in shown
