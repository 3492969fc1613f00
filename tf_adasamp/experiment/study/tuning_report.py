"""The tuning's report: its stages' tables and its choice in Markdown,
with the same numbers as JSON beside it."""

import json
import os

import numpy as np

from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import text
from tf_adasamp.experiment.study import tuning
from tf_adasamp.experiment.study import tuning_options
from tf_adasamp.experiment.study import verdicts
from tf_adasamp.experiment.training import run_files

ADAPTIVE = presets.ADAPTIVE
ALTERNATIVES = presets.ALTERNATIVES


def write(results, report, command):
  """Writes tune's `results` as the markdown report `report` (with
  `command`, which produced it) and as JSON beside it; returns the JSON's
  path."""
  os.makedirs(os.path.dirname(os.path.abspath(report)), exist_ok=True)
  run_files.write_atomically(report, markdown(results, command))
  path = os.path.splitext(report)[0] + ".json"
  run_files.write_atomically(path, json.dumps(results, indent=1))
  return path


def _interval(values):
  return text.interval_text(verdicts.paired_test(values))


def markdown(results, command):
  """The tuning report as markdown."""
  options, settings = results["options"], results["settings"]
  seeds = [int(s) for s in tuning_options.floats(options["seeds"])]
  # Options a tuning before them did not record: their defaults.
  held_out = (
      f" holds out the same {options['validation_size']:g} training examples,"
      " the trainer's fixed validation split (the one the study's runs hold "
      "out)" if options.get("fixed_validation") else
      f" holds out {options['validation_size']:g} random training examples "
      "(drawn with that seed)")
  score = ("the final validation accuracy" if options.get("score") == "final"
           else "the time-averaged validation accuracy")
  lines = [
      f"# Tuning on {options['dataset']} ({options['model']}): validation "
      "splits of the training data",
      "",
      f"Produced by `{command}`.",
      "",
      f"Each of the {len(seeds)} tuning seeds ({', '.join(map(str, seeds))})"
      f"{held_out}, trains on the rest and measures accuracy on "
      "the held-out ones; the test split is not read. Runs of "
      f"{settings['steps']} steps of batch {settings['batch_size']}, "
      f"evaluated every {settings['eval_interval']} steps. 'time-averaged' "
      "is the area under the validation-accuracy curve divided by its "
      "length (it rewards learning early as well as ending high). Step "
      f"sizes are ranked by {score}.",
      "",
      "## Stage 1: step sizes (uniform sampling and the baselines)",
      "",
      "| algorithm | update rule | eta | gamma | schedule | validation "
      "accuracy, time-averaged | final validation accuracy |",
      "|---|---|---|---|---|---|---|",
  ]
  for row in results["step_sizes"]:
    schedule = row.get("schedule", "inverse_time")
    cells = [
        row["algorithm"], row["rule"], f"{row['eta']:g}", f"{row['gamma']:g}",
        schedule,
        text.mean_std(row["auc"]),
        text.mean_std(row["final"])
    ]
    if [row["eta"], row["gamma"],
        schedule] == _stage1_winner(results, row["algorithm"]):
      cells = [f"**{cell}**" for cell in cells]
    lines.append("| " + " | ".join(cells) + " |")
  lines += [
      "",
      "(mean ± std over the seeds; the winner of each algorithm in bold:"
      " inverse_time is eta / (1 + gamma t), linear eta (1 - t / T) and "
      "cosine eta (1 + cos(pi t / T)) / 2 over the run's T steps. The "
      "adaptive algorithms start from their uniform counterpart's; the "
      "baselines keep their own.)",
      "",
      "## Stage 2: amplitude, decay and utility option (adaptive minus "
      "uniform, same seed)",
      "",
      "Differences in validation accuracy, adaptive minus its uniform "
      "counterpart at the winning step sizes, mean over tuning seeds "
      f"{', '.join(map(str, results['stage2_seeds']))} with a 95% "
      "t-interval; positive favours adaptive sampling. The time average of "
      "an adaptive run is taken over its uniform counterpart's budget of "
      "example passes (a backward pass counted as "
      f"{targets.BACKWARD_COST:g} forward ones), so the utility at 'updated' "
      "pays for its second forward pass.",
      "",
      "| amplitude | decay | utility at | algorithm | Δ validation accuracy, "
      "time-averaged | Δ final validation accuracy | max KL(Q_t ‖ P_t) |",
      "|---|---|---|---|---|---|---|",
  ]
  for row in results["amplitude_decay"]:
    lines.append(f"| {row['amplitude']:g} | {row['decay']:g} | "
                 f"{row.get('utility_at') or '–'} | {row['algorithm']} | "
                 f"{_interval(row['auc_difference'])} | "
                 f"{_interval(row['final_difference'])} | "
                 f"{np.mean(row['max_kl']):.3f} |")
  lines += _choice_lines(results)
  lines += _stage3_lines(results)
  return "\n".join(lines) + "\n"


def _stage1_winner(results, algorithm):
  """Stage 1's [eta, gamma, schedule] for `algorithm`."""
  if algorithm in ALTERNATIVES:
    key = algorithm
    step_size = results["chosen_baseline_step_sizes"][algorithm]
  else:
    key = presets.RUNS[algorithm][2]
    step_size = results["chosen_step_sizes"][key]
  # None in results of a tuning before the schedules were tuned.
  schedules = results.get("chosen_lr_schedules", {})
  return [*step_size, schedules.get(key, "inverse_time")]


def _choice_lines(results):
  summary = tuning.setting_summary(results)
  choice = tuning.chosen(results)
  best, within = tuning._within_one_se(summary)
  floor = summary[best]["mean"] - summary[best]["se"]
  lines = [
      "",
      "## Choice",
      "",
      "Per seed, the Δ time-averaged validation accuracy averaged over the "
      "adaptive algorithms tuned; its mean and standard error (SE) over the "
      "seeds. Rule (`tuning.chosen`), fixed before the runs: among the "
      "settings with no algorithm worse than uniform at 95% (time-averaged "
      "or final), the smallest amplitude whose mean is within one SE of the "
      "best mean (at the best's decay; of two utility options, the higher "
      "mean): the one-standard-error rule. Uniform sampling is the setting "
      "of gain 0: where it is within one SE of the best, it is the "
      "recommendation." +
      ("" if any(not entry["worse"] for entry in summary.values()) else
       " No setting is free of an algorithm worse than uniform: the rule "
       "ran over all of them."),
      "",
      "| amplitude | decay | utility at | mean Δ time-averaged (4 "
      "algorithms) | SE | worse than uniform at 95% | within 1 SE of the "
      "best |",
      "|---|---|---|---|---|---|---|",
  ]
  for key, entry in summary.items():
    cells = [
        f"{key[0]:g}", f"{key[1]:g}", key[2] or "–", f"{entry['mean']:+.4f}",
        f"{entry['se']:.4f}", ", ".join(entry["worse"]) or "none",
        ("best" if key == best else "yes") if key in within else "no"
    ]
    if key == choice:
      cells = [f"**{cell}**" for cell in cells]
    lines.append("| " + " | ".join(cells) + " |")
  advice = tuning.recommended(results)
  return lines + [
      "",
      f"- Best mean: {_setting_text(best)} ({summary[best]['mean']:+.4f}, "
      f"SE {summary[best]['se']:.4f}; within one SE: at least "
      f"{floor:+.4f}).",
      f"- Chosen (in bold), the setting the experiment runs: "
      f"{_setting_text(choice)}.",
      "- Recommended: " +
      ("**uniform sampling**: a gain of 0 is within one SE of the best, so "
       "the one-standard-error rule takes no adaptive setting."
       if advice == tuning.UNIFORM else
       f"{_setting_text(choice)}: the best's gain is more than "
       "one SE above 0."),
  ]


def _setting_text(key):
  return (f"amplitude {key[0]:g}, decay {key[1]:g}" +
          (f", utility at '{key[2]}'" if key[2] else ""))


def _stage3_lines(results):
  setting = (*results["stage3_setting"], None)[:3]
  lines = [
      "",
      "## Stage 3: each adaptive algorithm's step size",
      "",
      f"At {_setting_text(setting)} (stage 2's choice); "
      "validation accuracy, mean ± std over the stage-2 seeds; "
      "the winner of each algorithm in bold.",
      "",
      "| algorithm | step size | validation accuracy, time-averaged | "
      "final validation accuracy |",
      "|---|---|---|---|",
  ]
  chosen_etas = dict(zip(ADAPTIVE, results["chosen_adaptive_learning_rates"]))
  for row in results["adaptive_step_sizes"]:
    # A tuning before stage 3 recorded the final accuracy did not rank by it.
    final = text.mean_std(row["final"]) if "final" in row else "–"
    cells = [
        row["algorithm"], f"{row['eta']:g}",
        text.mean_std(row["auc"]), final
    ]
    if chosen_etas[row["algorithm"]] == row["eta"]:
      cells = [f"**{cell}**" for cell in cells]
    lines.append("| " + " | ".join(cells) + " |")
  return lines
