"""Adaptive sampling under label noise, and the controls that limit it.

A mislabelled example stays misclassified, so under the zero-one utility
its log weight sits at the cap amplitude / (1 - decay) and Algorithm 1
spends its draws on it. This study flips a fraction of the main regime's
training labels (`datasets.with_label_noise`: the same examples in every
run, the test labels clean) and runs, per trial, uniform sampling, Algorithm
1 at several amplitudes, and Algorithm 1 with each control of
`AdaptiveSampler` (a uniform floor, a final uniform phase, importance
weights). `plan` lists the runs, `summary_markdown` judges them: time to
Unif's final clean-label training loss (`targets`), final and best test
accuracy paired against Unif-SGD with Holm's correction within each
question (`verdicts`), and the share of the draws on flipped labels.
"""

import dataclasses
import os

import numpy as np

from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import heldout
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import text
from tf_adasamp.experiment.study import verdicts

DATASET, MODEL = "fashion_mnist_5k", "mlp"
NOISE_LEVELS = (0.2, 0.4)
BASELINE = "Unif-SGD"
# Name -> (algorithm, amplitude, TrainConfig fields): the variants of a
# trial. The controls ride on amplitude 1, where the main regime's draws
# concentrate most without collapsing.
VARIANTS = {
    "Unif-SGD": ("Unif-SGD", 0.0, {}),
    "AdaSamp-01-SGD, amplitude 0.3": ("AdaSamp-01-SGD", 0.3, {}),
    "AdaSamp-01-SGD, amplitude 1": ("AdaSamp-01-SGD", 1.0, {}),
    "AdaSamp-01-SGD, amplitude 3": ("AdaSamp-01-SGD", 3.0, {}),
    "amplitude 1, uniform floor 0.5": ("AdaSamp-01-SGD", 1.0, {
        "epsilon": 0.5
    }),
    "amplitude 1, final uniform 1/8": ("AdaSamp-01-SGD", 1.0, {
        "amplitude_schedule": "final_uniform",
        "schedule_fraction": 0.125
    }),
    "amplitude 1, importance weights (beta 1)": ("AdaSamp-01-SGD", 1.0, {
        "beta": 1.0
    }),
}


@dataclasses.dataclass(frozen=True)
class Run(design.Run):
  """A run of the study: a variant at a noise level in a trial."""
  variant: str = ""
  noise: float = 0.0


def plan(trials, output_dir, settings=None):
  """Every run of the study.

  Args:
    trials: trials per variant and noise level (seeds 0..trials-1).
    output_dir: the runs' directory.
    settings: the presets.Settings of the runs; the main regime's if None.

  Returns:
    [Run].
  """
  settings = settings or presets.preset(DATASET, MODEL)
  runs = []
  for noise in NOISE_LEVELS:
    for trial in range(trials):
      for name, (algorithm, amplitude, fields) in VARIANTS.items():
        folder = name.replace(", ", "-").replace(" ", "_").replace("/", "of")
        run_dir = os.path.join(output_dir, f"noise{noise:g}", folder,
                               f"seed{trial}")
        config = design.run_config(settings,
                                   algorithm,
                                   amplitude,
                                   trial,
                                   run_dir,
                                   dataset=DATASET,
                                   model=MODEL,
                                   label_noise=noise,
                                   **fields)
        runs.append(Run(name, amplitude, trial, config, name, noise))
  return runs


def collect(runs):
  """The runs' curves: {noise: {variant: curves}}, as `design.collect`'s."""
  by_key = {}
  for run in runs:
    by_key.setdefault((run.noise, run.variant), []).append(run)
  metrics = design.CURVE_METRICS + ("clean_train_loss", "clean_train_accuracy",
                                    "flipped_mass")
  return {
      noise: {
          name: design.curves_of(by_key[(noise, name)], metrics)
          for name in VARIANTS
      } for noise in NOISE_LEVELS
  }


def _test_accuracy_family(curves, measure):
  """Each variant minus Unif-SGD in `measure` ("final" or "best" test
  accuracy), paired per trial, Holm-adjusted over the variants."""
  pick = {"final": lambda a: a[:, -1], "best": lambda a: a.max(axis=1)}[measure]
  baseline = pick(curves[BASELINE]["test_accuracy"])
  names = [name for name in VARIANTS if name != BASELINE]
  tests = [
      verdicts.paired_test(pick(curves[name]["test_accuracy"]) - baseline)
      for name in names
  ]
  return dict(zip(names, zip(tests, verdicts.holm([t.p for t in tests]))))


def _verdict_word(test, adjusted_p):
  if test.why_not or not adjusted_p < verdicts.ALPHA:
    return "no difference shown"
  return "better" if test.mean > 0 else "worse"


def recommendation(families):
  """What a user with noisy labels should run, from one noise level's
  paired final test accuracies ({variant: (Test, Holm p)})."""
  better = [
      name for name, (test, p) in families.items()
      if _verdict_word(test, p) == "better"
  ]
  if better:
    best = max(better, key=lambda name: families[name][0].mean)
    return (f"**{best}**: its final test accuracy beats Unif-SGD's "
            f"({text.interval_text(families[best][0])}, Holm p "
            f"{text.p_text(families[best][1])}).")
  harmless = [
      name for name, (test, p) in families.items()
      if name.startswith(("AdaSamp",
                          "amplitude")) and _verdict_word(test, p) != "worse"
  ]
  if harmless:
    best = max(harmless, key=lambda name: families[name][0].mean)
    return (
        f"no adaptive setting beats uniform sampling here; the least "
        f"harmful is **{best}** ({text.interval_text(families[best][0])} in "
        f"final test accuracy, not shown to differ from Unif-SGD).")
  return ("**do not use adaptive sampling**: every adaptive setting ends "
          "with a lower test accuracy than Unif-SGD.")


def summary_markdown(collected, settings, trials, command):
  """The study's summary.md.

  Args:
    collected: `collect`'s curves.
    settings: the runs' presets.Settings.
    trials: trials per variant and noise level.
    command: the command that reproduces it.

  Returns:
    The markdown.
  """
  lines = [
      f"# Adaptive sampling under label noise: {DATASET} ({MODEL}), "
      f"{trials} trials", "", f"Produced by `{command}`.", "",
      f"The main regime ({settings.steps} steps of batch "
      f"{settings.batch_size}, SGD {settings.sgd_learning_rate:g} / (1 + "
      f"{settings.sgd_lr_decay:g} t), decay {settings.decay:g}, utility "
      f"zero-one at '{settings.utility_at}') with " +
      " and ".join(f"{100 * noise:g}%" for noise in NOISE_LEVELS) +
      " of the training labels flipped to another class at random (the "
      "same examples in every run; test labels clean). Paired per trial "
      "against Unif-SGD; Holm's correction over the variants within each "
      "question; 95% t-intervals.", ""
  ]
  for noise, curves in collected.items():
    final = _test_accuracy_family(curves, "final")
    best = _test_accuracy_family(curves, "best")
    clean_loss, held_out = noise_targets(curves)
    lines += [
        f"## {100 * noise:g}% of the labels flipped", "",
        f"What to use: {recommendation(final)}", "",
        "| run | final test accuracy − Unif's | Holm p | best test accuracy "
        "− Unif's | Holm p | steps to Unif's final clean-label train loss, "
        "vs Unif | example passes, vs Unif | steps to Unif's final test "
        "accuracy, vs Unif | share of draws on flipped labels, end "
        f"(uniform: {noise:g}) |", "|---|---|---|---|---|---|---|---|---|"
    ]
    for name in VARIANTS:
      flipped = curves[name]["flipped_mass"][:, -1].mean()
      if name == BASELINE:
        lines.append(f"| {name} | – | – | – | – | 1 | 1 | 1 | {flipped:.3f} |")
        continue
      row = targets.compare(curves[name], curves[BASELINE], clean_loss)
      to_held_out = targets.compare(curves[name], curves[BASELINE], held_out)
      (f_test, f_p), (b_test, b_p) = final[name], best[name]
      lines.append(
          f"| {name} | {text.interval_text(f_test)} | {text.p_text(f_p)} | "
          f"{text.interval_text(b_test)} | {text.p_text(b_p)} | "
          f"{text.ratio_text(row.steps)} | {text.ratio_text(row.passes)} "
          f"| {text.ratio_text(to_held_out.steps)} | {flipped:.3f} |")
    lines += ["", *_heldout_lines(curves)]
  return "\n".join(lines).rstrip("\n") + "\n"


def _heldout_lines(curves):
  """A noise level's held-out measures (`heldout`), each variant against
  Unif-SGD."""
  rows = heldout.rows(curves, [(name, curves[name], VARIANTS[name][0])
                               for name in VARIANTS
                               if name != BASELINE])
  lines = [
      "Held-out accuracy, variant minus Unif-SGD, at a quarter and a half "
      "of Unif-SGD's budget of example passes, and example passes to 95% of "
      "its best and to its final held-out accuracy (smoothed, "
      "`heldout.ladder`), as ratios to its:", "",
      "| run | at 25% of the budget | at 50% | passes to 95% of the best | "
      "passes to the final |", "|---|---|---|---|---|"
  ]
  for row in rows:
    budget = {b.fraction: b for b in row.budget}
    rungs = {rung.label: rung for rung in row.ladder}
    lines.append(f"| {row.name} | "
                 f"{text.interval_text(budget[0.25].accuracy)} | "
                 f"{text.interval_text(budget[0.5].accuracy)} | "
                 f"{text.ratio_text(rungs['95% of the best'].passes)} | "
                 f"{text.ratio_text(rungs['the final'].passes)} |")
  return lines + [""]


def noise_targets(curves):
  """The targets of a noise level: Unif-SGD's final clean-label training
  loss and its final test accuracy, per trial."""
  baseline = curves[BASELINE]
  return (targets.Target("Unif's final clean-label train loss",
                         "clean_train_loss", True,
                         baseline["clean_train_loss"][:, -1]),
          targets.Target("Unif's final test accuracy", "test_accuracy", False,
                         baseline["test_accuracy"][:, -1]))


def wall_time_markdown(collected, trials):
  """The study's wall_time.md: training seconds to each target, from the
  runs' clocks.

  Beside summary.md, not in it: seconds are measured, so a rerun on new runs
  differs. The study trains its runs two at a time, side by side (the main
  regime's one-at-a-time pass is its wall_time.md).
  """
  lines = [
      f"# Training seconds to target under label noise: {DATASET} ({MODEL}), "
      f"{trials} trials", "",
      "From each run's own clock (`train_seconds`: the training calls "
      "alone, the sampler's work included), interpolated where the run "
      "first reaches the target, as a ratio to Unif-SGD's in the same "
      "trial: geometric mean [95% t-interval]. The study trains its runs "
      "two at a time side by side, so a slow spell falls on adaptive and "
      "uniform runs alike but adds noise.", ""
  ]
  for noise, curves in collected.items():
    clean_loss, held_out = noise_targets(curves)
    lines += [
        f"## {100 * noise:g}% of the labels flipped", "",
        "| run | seconds to Unif's final clean-label train loss, vs Unif | "
        "seconds to Unif's final test accuracy, vs Unif |", "|---|---|---|"
    ]
    for name in VARIANTS:
      if name == BASELINE:
        continue
      rows = [
          targets.compare(curves[name], curves[BASELINE], target)
          for target in (clean_loss, held_out)
      ]
      lines.append(f"| {name} | " +
                   " | ".join(text.ratio_text(row.seconds) for row in rows) +
                   " |")
    lines.append("")
  return "\n".join(lines).rstrip("\n") + "\n"


def plot_flipped_share(collected, path):
  """The share of Q_t on flipped labels over epochs, per variant and noise
  level (mean over trials), to `path`."""
  from tf_adasamp.experiment.study import plots
  plt = plots.plt
  figure, axes = plt.subplots(1,
                              len(collected),
                              figsize=(6 * len(collected), 4),
                              squeeze=False)
  for ax, (noise, curves) in zip(axes[0], collected.items()):
    for name, curve in curves.items():
      ax.plot(curve["epoch"],
              np.nanmean(curve["flipped_mass"], axis=0),
              label=name,
              linewidth=1.4)
    ax.axhline(noise, color="grey", linestyle=":", linewidth=1)
    ax.set_title(f"{100 * noise:g}% of the labels flipped")
    ax.set_xlabel("epoch")
    ax.set_ylabel("Q_t's mass on flipped labels")
    ax.grid(True, alpha=0.3)
  axes[0][-1].legend(fontsize="x-small")
  figure.tight_layout()
  figure.savefig(path, dpi=120)
  plt.close(figure)
