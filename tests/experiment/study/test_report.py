"""The summary and its figures (tf_adasamp.experiment.study.report)."""

import dataclasses
import json
import os

import numpy as np
import pytest

from claim_curves import peak_then_decline
from claim_curves import synthetic
from claim_curves import TRENDING
from claim_curves import trending
from claim_curves import with_kl
from heldout_curves import SETTINGS as HELDOUT_SETTINGS
from heldout_curves import study
from target_curves import curve as _curve
from target_curves import SETTINGS
from target_curves import study as _study
from tf_adasamp.experiment.study import claims
from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import heldout
from tf_adasamp.experiment.study import plots
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import report
from tf_adasamp.experiment.training import datasets
from tiny_settings import TINY

# TINY at a step size where no swept amplitude collapses in its 4 steps, so
# that the report draws the heaviest examples too.
TINY_STUDY = dataclasses.replace(TINY, sgd_learning_rate=1.0)


def _tiny_study(directory, data, stale_file=None):
  runs = design.plan(TINY_STUDY,
                     trials=1,
                     output_dir=str(directory / "runs"),
                     dataset="digits",
                     model="logistic")
  if stale_file:  # what a SIGKILL during write_atomically leaves
    os.makedirs(runs[0].config.output_dir)
    open(os.path.join(runs[0].config.output_dir, stale_file), "w").close()
  pool.run_all(runs, data)
  departures = presets.departures("digits", "logistic", TINY_STUDY, 1, 1500)
  report.report(runs, TINY_STUDY, 1, "tiny", str(directory / "report"), "cmd",
                departures)
  return runs


def test_a_tiny_study_twice_gives_byte_identical_summaries(tmp_path, capsys):
  data = datasets.load("digits")
  stale = ".metrics.jsonl.x1y2.tmp"
  runs = _tiny_study(tmp_path / "first", data, stale_file=stale)
  _tiny_study(tmp_path / "second", data)
  first = (tmp_path / "first" / "report" / "summary.md").read_bytes()
  assert first == (tmp_path / "second" / "report" / "summary.md").read_bytes()
  assert not os.path.exists(os.path.join(runs[0].config.output_dir, stale))
  summary = first.decode()
  for name in [
      "train_loss", "train_accuracy", "amplitude", "kl", "figure1", "heaviest"
  ]:
    assert (tmp_path / "first" / "report" / f"{name}.png").stat().st_size
  # The figure of the heaviest examples, named where the summary ends.
  assert summary.endswith("\n")
  assert summary.splitlines()[-3:-1] == ["## What the sampler looks at", ""]
  assert summary.splitlines()[-1].startswith("[heaviest.png](heaviest.png)")
  for algorithm in presets.ALGORITHMS:
    assert f"| {algorithm} |" in summary
  # The departures and the rules come first; one trial gives no verdict.
  assert (summary.index("## Departures") < summary.index("## Verdict rules") <
          summary.index("## The paper's claims"))
  assert "1 trials (a verdict needs 3)" in summary
  assert "Theorem 4's estimate from this single run" in summary
  capsys.readouterr()
  pool.run_all(runs, data)
  assert capsys.readouterr().out.count("skipped") == len(runs)
  # Every algorithm of a trial starts from the same model.
  curves, _ = design.collect(runs, TINY_STUDY)
  first_losses = [curve["train_loss"][:, 0] for curve in curves.values()]
  np.testing.assert_array_equal(np.ptp(first_losses, axis=0), 0)


def _heaviest_study(directory, records_of):
  """A planned study whose sweep runs of trial 0 hold the records
  `records_of(amplitude)`, and its sweep: amplitude 1 collapses (its KL
  leaves an effective support of exp(-5) n)."""
  runs = design.plan(TINY, 2, str(directory), "digits", model="logistic")
  for run in runs:
    if run.algorithm == TINY.sweep_algorithm and run.trial == 0:
      os.makedirs(run.config.output_dir)
      with open(os.path.join(run.config.output_dir, "metrics.jsonl"), "w") as f:
        f.writelines(
            json.dumps(record) + "\n" for record in records_of(run.amplitude))
  sweep = {
      "algorithm":
          TINY.sweep_algorithm,
      "amplitude": [0.0, 0.5, 1.0],
      "curves": [{
          "kl": np.full((2, 3), kl),
          "train_accuracy": np.full((2, 3), 0.9),
          "ess_fraction": np.full((2, 3), 0.5)
      } for kl in (0.0, 0.1, 5.0)]
  }
  return runs, sweep


def _records_with_heaviest(amplitude):
  weights = [[float(16 - rank) * amplitude for rank in range(16)],
             [2.0] * 16]  # a tie
  return [{
      "step": 0,
      "kl": 0.0,
      "heaviest": [[i, 1.0] for i in range(16)]
  }, {
      "step": 2,
      "kl": 0.3,
      "heaviest": [[100 + 3 * i, w] for i, w in enumerate(weights[0])]
  }, {
      "step": 4,
      "kl": 0.1,
      "heaviest": [[i * 7, w] for i, w in enumerate(weights[1])]
  }]


def test_heaviest_figure_shows_the_heaviest_images_at_the_kl_peak_and_end(
    tmp_path, monkeypatch):
  digits = datasets.load("digits")
  runs, sweep = _heaviest_study(tmp_path, _records_with_heaviest)
  drawn = []
  monkeypatch.setattr(plots, "heaviest_grid",
                      lambda rows, path, title: drawn.append(rows))
  lines = report.heaviest_figure(runs, TINY, sweep, str(tmp_path))
  # Amplitude 1 collapsed: only 0.5's rows, at the KL's peak then the end.
  [rows] = drawn
  assert [heading for heading, _, _ in rows] == [
      "amplitude 0.5, at the KL's peak (step 2, KL 0.3 nats)",
      "amplitude 0.5, at the end (step 4, KL 0.1 nats)"
  ]
  for (_, images, captions), indices, weights in zip(
      rows, ([100 + 3 * i for i in range(16)], [7 * i for i in range(16)]),
      ([8 - rank / 2 for rank in range(16)], [2.0] * 16)):
    np.testing.assert_array_equal(images, digits.x_train[indices])
    assert captions == [
        f"{label}\n{weight:.3g}×"
        for label, weight in zip(digits.y_train[indices], weights)
    ]
  assert lines[0] == "## What the sampler looks at"
  [text] = lines[2:]
  assert text.startswith("[heaviest.png](heaviest.png) shows the 16 training "
                         "images AdaSamp-01-SGD draws most in trial 0")
  assert "at amplitudes 0.5 (the swept ones that do not collapse)" in text
  assert "the largest n·q is 8 (amplitude 0.5, at the KL's peak)" in text
  assert text.endswith("At amplitude 0.5 a row's 16 weights tie, so it shows "
                       "16 of a larger set weighted alike.")
  monkeypatch.undo()
  report.heaviest_figure(runs, TINY, sweep, str(tmp_path))
  assert (tmp_path / "heaviest.png").stat().st_size


def test_heaviest_figure_is_left_out_for_runs_without_heaviest_examples(
    tmp_path):
  # Runs from before the trainer recorded their heaviest examples.
  def records_of(amplitude):
    return [{
        key: value for key, value in record.items() if key != "heaviest"
    } for record in _records_with_heaviest(amplitude)]

  runs, sweep = _heaviest_study(tmp_path, records_of)
  assert report.heaviest_figure(runs, TINY, sweep, str(tmp_path)) == []
  assert not (tmp_path / "heaviest.png").exists()


VERDICT_WORDS = ("supported", "contradicted", "not shown", "no verdict",
                 "Holm p")


def test_the_claims_table_shows_each_measure_by_amplitude():
  judged = claims.assess(synthetic(0.3, trials=10), TRENDING, 1.0, 0.5)
  text = "\n".join(report.claims_lines(judged))
  assert "| amplitude 0 | amplitude 0.5 | amplitude 1 | amplitude 2 |" in text
  assert "| tests worse | ρ(amplitude, final test loss) |" in text
  assert "### 4. supported" in text


def test_a_smoke_test_shows_the_claims_without_verdicts():
  curves = with_kl(synthetic(0.3, trials=10), peak_then_decline)
  sweep = trending(10)
  settings = presets.preset("digits", "cnn")
  smoke = report.summary_markdown(curves,
                                  sweep,
                                  settings,
                                  10,
                                  "synthetic",
                                  "cmd",
                                  dataset="digits")
  section = smoke[smoke.index("## The paper's claims"):smoke.
                  index("## Amplitude sweep")]
  assert "This regime is a smoke test, not evidence" in section
  assert presets.SMOKE_TESTS["digits"] in section
  assert not any(word in section for word in VERDICT_WORDS)
  assert "Kendall τ(epoch, KL)" in section  # the figures stay
  judged = report.summary_markdown(curves,
                                   sweep,
                                   settings,
                                   10,
                                   "synthetic",
                                   "cmd",
                                   dataset="fashion_mnist_5k")
  assert "### 4. supported" in judged
  assert "smoke test" not in judged


def test_the_sweep_shows_the_mechanism_beside_the_kl():
  # Amplitudes 0, 0.5, 1 and 2 at KL 0, 0.1, 0.2 and 0.3.
  lines = report.sweep_lines(trending(), num_classes=10)
  rows = [line.split(" | ") for line in lines if line.startswith("| ")][1:]
  focus = [float(row[3]) for row in rows]
  largest = [float(row[4]) for row in rows]
  np.testing.assert_allclose(focus, [1.0, 1.1, 1.2, 1.3], rtol=1e-3)
  np.testing.assert_allclose(largest, np.exp([0.0, 0.1, 0.2, 0.3]), rtol=5e-3)


def test_a_method_from_the_field_gets_its_own_line():
  # IS-SGD is 3x as fast as the uniform baselines, amplitude 1 only 1.2x.
  curves, sweep = _study({"IS-SGD": 3.0, 1.0: 1.2})
  summary = "\n".join(report.time_to_target_lines(curves, sweep, SETTINGS))
  assert "Headline" not in summary  # no setting picked after the fact
  line = next(
      text for text in summary.splitlines() if text.startswith("**IS-SGD**"))
  assert line.startswith("**IS-SGD** reaches Unif's final training loss in "
                         "0.33")
  assert "of Shuffle-SGD's example passes" in line


def test_the_summary_weighs_the_second_forward_pass_against_its_savings():
  curves, sweep = _study({})
  # The sweep under the other option: amplitude 1 at 'step' is twice as
  # fast in steps and forwards once; at 'updated' it forwards twice.
  sweep["other_utility_at"] = "step"
  sweep["other_curves"] = [_curve(1.0, seed=12), _curve(2.0, seed=13)]
  summary = "\n".join(report.time_to_target_lines(curves, sweep, SETTINGS))
  line = next(text for text in summary.splitlines()
              if text.startswith("**Where the utility"))
  cell = line.split("amplitude 1: ")[1]
  at_updated, at_step = (
      float(part.split()[0]) for part in cell.split(" against "))
  # 1 step-ratio x (2 + 2) / (1 + 2) passes, against 0.5 x 1.
  assert at_updated == pytest.approx(4 / 3, rel=0.05)
  assert at_step == pytest.approx(0.5, rel=0.05)


@pytest.mark.parametrize("tuning, chosen_by", [
    ("Tuning: Cross-validated as the paper says.", heldout.TUNED),
    ("Tuning: none; the preset's starting values.", heldout.UNTUNED),
    ("Tuning: Step sizes by hand.", heldout.UNTUNED),
])
def test_the_answer_says_how_its_setting_was_chosen(tuning, chosen_by):
  curves, sweep = study(2.0)
  summary = report.summary_markdown(curves, sweep, HELDOUT_SETTINGS, 6, "t",
                                    "cmd", [tuning])
  assert f"**Held-out answer** for {chosen_by}, AdaSamp-01-SGD" in summary
