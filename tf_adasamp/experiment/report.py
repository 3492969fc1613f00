"""The experiment's report: Figure 1's panels and summary.md with a verdict
on each of the paper's four claims."""

import os

import numpy as np

from tf_adasamp.experiment import plots
from tf_adasamp.experiment.study import collect
from tf_adasamp.experiment.study import counterpart
from tf_adasamp.experiment.study import mean_over


def _spearman(x, y):
  """Spearman's rank correlation of two 1-D sequences without ties."""
  x_ranks, y_ranks = (np.argsort(np.argsort(v)) for v in (x, y))
  return float(np.corrcoef(x_ranks, y_ranks)[0, 1])


def _against_uniform(names, values, lower_is_better):
  """Compares each algorithm's per-trial `values` with its uniform
  counterpart's; returns (all better on average, evidence lines)."""
  sign, word = (1, "lower") if lower_is_better else (-1, "higher")
  supported, evidence = True, []
  for name in names:
    ours, theirs = values[name], values[counterpart(name)]
    supported &= bool(sign * ours.mean() < sign * theirs.mean())
    evidence.append(f"{name} {ours.mean():.4f} vs {counterpart(name)} "
                    f"{theirs.mean():.4f} ({word} in "
                    f"{(sign * ours < sign * theirs).sum()}/{len(ours)} "
                    "trials)")
  return supported, evidence


def assess_claims(curves, sweep, steps):
  """Says, for each of the paper's four claims, whether these runs support it.

  Returns a list of (claim, supported, evidence) triples; supported is None
  where the runs cannot tell (a sweep of fewer than 3 amplitudes).
  """
  half = steps / 2
  adaptive = [name for name in curves if not name.startswith("Unif")]
  claims = []

  train_loss = {name: mean_over(c["step"], c["train_loss"], half)
                for name, c in curves.items()}
  claims.append(("Adaptive sampling reduces empirical risk faster: every "
                 "AdaSamp variant's training cross-entropy, averaged over the "
                 "first half of training, is below its uniform "
                 "counterpart's.",
                 *_against_uniform(adaptive, train_loss,
                                   lower_is_better=True)))

  test_accuracy = {name: mean_over(c["step"], c["test_accuracy"], half)
                   for name, c in curves.items()}
  claims.append(("AdaGrad with adaptive sampling gains test accuracy early: "
                 "each AdaSamp-*-AdaGrad's test accuracy, averaged over the "
                 "first half of training, is above Unif-AdaGrad's.",
                 *_against_uniform(
                     [name for name in adaptive if name.endswith("AdaGrad")],
                     test_accuracy, lower_is_better=False)))

  train_speed = [np.mean(v) for v in sweep["train_accuracy"]]
  test_final = [np.mean(v) for v in sweep["test_accuracy"]]
  rho_train = _spearman(sweep["amplitude"], train_speed)
  rho_test = _spearman(sweep["amplitude"], test_final)
  supported = None
  if len(sweep["amplitude"]) >= 3:
    supported = rho_train > 0 and rho_test < 0
  claims.append((
      "A larger amplitude trains faster but tests worse: over the sweep of "
      f"{sweep['algorithm']}, first-half train accuracy rises with the "
      "amplitude and final test accuracy falls (Spearman rank correlation "
      "> 0 and < 0).", supported,
      [f"amplitudes {sweep['amplitude']}: train accuracy (1st half) "
       f"{np.round(train_speed, 4).tolist()}, rho {rho_train:+.2f}; final "
       f"test accuracy {np.round(test_final, 4).tolist()}, rho "
       f"{rho_test:+.2f}"]))

  evidence, supported = [], True
  for name in adaptive:
    kl = curves[name]["kl"].mean(axis=0)
    peak = int(np.argmax(kl))
    rises_early = curves[name]["step"][peak] <= half
    decays = kl[-1] < 0.2 * kl[peak]
    supported &= bool(rises_early and decays)
    evidence.append(f"{name}: peak {kl[peak]:.3f} at step "
                    f"{curves[name]['step'][peak]}, final {kl[-1]:.4f}")
  claims.append(("The conditional KL(Q_t || P_t) rises early, then decays "
                 "toward 0: for every AdaSamp variant the mean KL peaks in "
                 "the first half of training and ends below 20% of its "
                 "peak.", supported, evidence))
  return claims


def _mean_std(values, digits=4):
  values = np.asarray(values)
  return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"


def summary_markdown(curves, sweep, settings, trials, dataset, model,
                     command):
  """The experiment's summary as markdown: settings, tables, claims."""
  steps = settings.steps
  half = steps / 2
  lines = [
      f"# Adaptive vs uniform sampling on {dataset} ({model}), "
      f"{trials} trials",
      "",
      f"Produced by `{command}`.",
      "",
      f"Settings: {steps} steps of batch {settings.batch_size}, evaluation "
      f"every {settings.eval_interval} steps; SGD step size "
      f"{settings.sgd_learning_rate:g} / (1 + {settings.sgd_lr_decay:g} t), "
      f"AdaGrad step size {settings.adagrad_learning_rate:g}; amplitude "
      f"{settings.amplitude:g}, decay {settings.decay:g}, utility at "
      f"'{settings.utility_at}'. Trial k runs every algorithm with seed k "
      "(same initial model).",
      "",
      f"## Algorithms (mean ± std over {trials} trials)",
      "",
      "'1st half', '2nd half' and 'AUC' are time averages (area under the "
      f"curve divided by its length) over steps [0, {half:g}], "
      f"[{half:g}, {steps}] and [0, {steps}].",
      "",
      "| algorithm | final train loss | final train acc | final test acc | "
      "train loss, 1st half | train loss, 2nd half | train loss, AUC | "
      "test acc, 1st half | test acc, AUC |",
      "|---|---|---|---|---|---|---|---|---|",
  ]
  for name, c in curves.items():
    cells = [c["train_loss"][:, -1], c["train_accuracy"][:, -1],
             c["test_accuracy"][:, -1],
             mean_over(c["step"], c["train_loss"], half),
             mean_over(c["step"], c["train_loss"], since=half),
             mean_over(c["step"], c["train_loss"]),
             mean_over(c["step"], c["test_accuracy"], half),
             mean_over(c["step"], c["test_accuracy"])]
    lines.append(f"| {name} | " + " | ".join(_mean_std(v) for v in cells) +
                 " |")
  lines += [
      "",
      f"## Amplitude sweep ({sweep['algorithm']}; 0 is "
      f"{counterpart(sweep['algorithm'])})",
      "",
      "| amplitude | train acc, 1st half | train loss, 1st half | "
      "final test acc | max KL |",
      "|---|---|---|---|---|",
  ]
  for i, amplitude in enumerate(sweep["amplitude"]):
    lines.append(f"| {amplitude:g} | {_mean_std(sweep['train_accuracy'][i])}"
                 f" | {_mean_std(sweep['train_loss'][i])} | "
                 f"{_mean_std(sweep['test_accuracy'][i])} | "
                 f"{_mean_std(sweep['kl_max'][i], 3)} |")
  lines += ["", "## The paper's claims", ""]
  for number, (claim, supported, evidence) in enumerate(
      assess_claims(curves, sweep, steps), 1):
    verdict = {True: "supported", False: "NOT supported",
               None: "not assessed"}[supported]
    lines.append(f"{number}. {claim} **{verdict}.**")
    lines += [f"   - {line}" for line in evidence]
  return "\n".join(lines) + "\n"


def report(runs, settings, trials, dataset, model, report_dir, command):
  """Draws Figure 1 and writes summary.md to `report_dir`; returns paths."""
  curves, sweep = collect(runs, settings)
  title = f"{dataset}, {model}, mean ± std over {trials} trials"
  paths = plots.figure1(curves, sweep, report_dir, title=title)
  paths.append(os.path.join(report_dir, "summary.md"))
  with open(paths[-1], "w") as f:
    f.write(summary_markdown(curves, sweep, settings, trials, dataset, model,
                             command))
  return paths
