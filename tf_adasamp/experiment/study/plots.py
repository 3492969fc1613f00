"""The five panels of the paper's Figure 1 (London, NIPS 2017, Experiments).

  train_loss.png      training cross-entropy over epochs (log scale)
  train_accuracy.png  training accuracy
  test_accuracy.png   test accuracy
  amplitude.png       effect of the amplitude alpha on train and test accuracy
  kl.png              KL(Q_t || P_t) of the adaptive sampling distribution
  figure1.png         all five, (a)-(e)

Curves are the mean over trials with a band of +-1 standard deviation.
Colour says the utility (uniform sampling in grey), line style the update
rule. Beside them, `heaviest_grid` draws the training images the sampler
favours (heaviest.png).
"""

import functools
import os

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
from matplotlib import ticker
import matplotlib.pyplot as plt
import numpy as np

from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import presets

_COLOURS = {
    "Unif": "0.35",
    "AdaSamp-01": "tab:blue",
    "AdaSamp-L1": "tab:red",
    "Shuffle": "k",
    "IS": "tab:green"
}
_LINESTYLES = {"SGD": "-", "AdaGrad": "--"}

# (metric, y label, file name, log-scale y).
CURVE_PANELS = [
    ("train_loss", "train cross-entropy", "train_loss", True),
    ("train_accuracy", "train accuracy", "train_accuracy", False),
    ("test_accuracy", "test accuracy", "test_accuracy", False),
]
KL_PANEL = ("kl", r"KL$(Q_t \,\|\, P_t)$ (nats)", "kl", False)


def style(algorithm):
  """Colour and line style of an algorithm named like 'AdaSamp-01-SGD'."""
  sampling, _, rule = algorithm.rpartition("-")
  return {
      "color": _COLOURS.get(sampling, "k"),
      "linestyle": _LINESTYLES.get(rule, "-")
  }


def plot_curves(ax, curves, metric, ylabel, log_scale=False):
  """Mean +- std over trials of `metric` for each algorithm.

  Args:
    ax: matplotlib Axes.
    curves: {algorithm: {"epoch": [E], metric: [trials, E]}}.
    metric: which metric to draw.
    ylabel: its label.
    log_scale: log-scale y axis.
  """
  for algorithm, curve in curves.items():
    values = np.asarray(curve[metric])
    mean, std = values.mean(axis=0), values.std(axis=0)
    line_style = style(algorithm)
    ax.plot(curve["epoch"], mean, label=algorithm, linewidth=1.6, **line_style)
    lower = mean - std
    if log_scale:  # a band below zero has no place on a log axis
      lower = np.maximum(lower, mean / 10)
    ax.fill_between(curve["epoch"],
                    lower,
                    mean + std,
                    alpha=0.15,
                    color=line_style["color"],
                    linewidth=0)
  ax.set_xlabel("epoch")
  ax.set_ylabel(ylabel)
  if log_scale:
    ax.set_yscale("log")
    # Plain numbers (0.01, 0.1, 1) at the decades only.
    ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
  ax.grid(True, alpha=0.3)
  ax.legend(fontsize="small")


def plot_amplitude(ax, sweep):
  """Train accuracy (mean over the first half of training) and final test
  accuracy against the amplitude, mean +- std over trials.

  Args:
    ax: matplotlib Axes.
    sweep: {"algorithm": name, "amplitude": [A] (0 is uniform sampling),
      "curves": [A] curves, as design.collect gives them}.
  """
  positions = np.arange(len(sweep["amplitude"]))
  half = sweep["curves"][0]["epoch"][-1] / 2
  train = [
      design.mean_over(c["epoch"], c["train_accuracy"], half)
      for c in sweep["curves"]
  ]
  test = [c["test_accuracy"][:, -1] for c in sweep["curves"]]
  for values, label, colour, marker in [
      (train, "train accuracy, mean over 1st half", "tab:blue", "o"),
      (test, "test accuracy, final", "tab:orange", "s")
  ]:
    values = np.asarray(values)
    ax.errorbar(positions,
                values.mean(axis=1),
                yerr=values.std(axis=1),
                color=colour,
                marker=marker,
                capsize=3,
                label=label)
  ax.set_xticks(positions)
  ax.set_xticklabels(
      [f"{a:g}" if a else "0\n(unif)" for a in sweep["amplitude"]])
  ax.set_xlabel(rf"amplitude $\alpha$ ({sweep['algorithm']})")
  ax.set_ylabel("accuracy")
  ax.grid(True, alpha=0.3)
  ax.legend(fontsize="small")


def _panels(curves, sweep):
  """(file name, title, draw(ax)) for each of the five panels."""
  adaptive = {
      name: curve for name, curve in curves.items() if name in presets.ADAPTIVE
  }
  panels = [(file_name, title,
             functools.partial(plot_curves,
                               curves=curves,
                               metric=metric,
                               ylabel=title,
                               log_scale=log_scale))
            for metric, title, file_name, log_scale in CURVE_PANELS]
  panels.append(("amplitude", r"effect of the amplitude $\alpha$",
                 functools.partial(plot_amplitude, sweep=sweep)))
  metric, title, file_name, log_scale = KL_PANEL
  panels.append((file_name, title,
                 functools.partial(plot_curves,
                                   curves=adaptive,
                                   metric=metric,
                                   ylabel=title,
                                   log_scale=log_scale)))
  return panels


def figure1(curves, sweep, out_dir, title=""):
  """Writes the five panels and figure1.png to `out_dir`; returns the paths.

  Args:
    curves: {algorithm: {"epoch": [E], metric: [trials, E]}}, metrics
      train_loss, train_accuracy, test_accuracy and kl.
    sweep: the amplitude sweep, as for plot_amplitude.
    out_dir: directory for the PNG files.
    title: suptitle of figure1.png (e.g. data set and trials).
  """
  os.makedirs(out_dir, exist_ok=True)
  paths = []
  panels = _panels(curves, sweep)
  for file_name, title_text, draw in panels:
    fig, ax = plt.subplots(figsize=(6, 4.5), constrained_layout=True)
    draw(ax)
    ax.set_title(title_text)
    paths.append(os.path.join(out_dir, f"{file_name}.png"))
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
  # Two rows of three; the sixth cell stays empty.
  fig, axes = plt.subplots(2, 3, figsize=(18, 10), constrained_layout=True)
  axes = axes.ravel()
  for ax, (_, title_text, draw), letter in zip(axes, panels, "abcde"):
    draw(ax)
    ax.set_title(f"({letter}) {title_text}")
  axes[-1].axis("off")
  if title:
    fig.suptitle(title)
  paths.append(os.path.join(out_dir, "figure1.png"))
  fig.savefig(paths[-1], dpi=100)
  plt.close(fig)
  return paths


def heaviest_grid(rows, path, title=""):
  """Draws rows of training images, each tile under its caption, to `path`.

  Args:
    rows: [(heading, images, captions)]: each row's heading, its images
      ([k, H, W, C] floats in [0, 1], C 1 or 3) and one caption per image.
    path: the PNG file to write.
    title: the figure's title.
  """
  columns = max(len(images) for _, images, _ in rows)
  fig = plt.figure(figsize=(0.95 * columns + 0.3, 1.65 * len(rows) + 0.5),
                   constrained_layout=True)
  for subfigure, (heading, images,
                  captions) in zip(np.atleast_1d(fig.subfigures(len(rows), 1)),
                                   rows):
    subfigure.suptitle(heading, x=0.005, ha="left", fontsize="medium")
    axes = subfigure.subplots(1, columns, squeeze=False)[0]
    for ax, image, caption in zip(axes, images, captions):
      ax.imshow(np.squeeze(image, -1) if image.shape[-1] == 1 else image,
                cmap="gray_r" if image.shape[-1] == 1 else None,
                vmin=0,
                vmax=1,
                interpolation="nearest")
      ax.set_title(caption, fontsize="x-small", linespacing=1.1)
    for ax in axes:
      ax.axis("off")
  if title:
    fig.suptitle(title)
  fig.savefig(path, dpi=100)
  plt.close(fig)


HELDOUT_FIGURE = "heldout.png"

# The clocks of the held-out figure: (curves' key, axis label).
PASSES_AND_STEPS = (("passes", "example passes"), ("step", "steps"))
SECONDS = (("train_seconds", "training seconds"),)


def heldout_figure(lines,
                   out_dir,
                   title="",
                   clocks=PASSES_AND_STEPS,
                   name=HELDOUT_FIGURE,
                   split="test"):
  """Writes the held-out figure `name` to `out_dir`: held-out accuracy and
  loss against each of `clocks`, mean +- std over trials, each run's curve
  read at a common grid up to the shortest run's end; returns its path.

  Args:
    lines: [(label, curves)], curves as `design.collect` gives them with
      "passes" [trials, E] (`heldout.passes`) added.
    out_dir: directory for the PNG file.
    title: the figure's title.
    clocks: (curves' key, axis label) of each column.
    name: the file's name.
    split: the held-out split drawn, "test" or "validation".
  """
  noun = "held-out" if split == "test" else split
  fig, axes = plt.subplots(2,
                           len(clocks),
                           figsize=(6.5 * len(clocks), 9),
                           squeeze=False,
                           constrained_layout=True)
  for row, (metric,
            name_text) in enumerate([(f"{split}_accuracy", f"{noun} accuracy"),
                                     (f"{split}_loss", f"{noun} loss")]):
    for column, (clock, clock_name) in enumerate(clocks):
      ax = axes[row, column]
      for number, (label, curve) in enumerate(lines):
        trials = len(curve[metric])
        # Steps are one row for every trial.
        times = np.broadcast_to(curve[clock], (trials, len(curve["step"])))
        grid = np.linspace(0, times[:, -1].min(), 200)
        values = np.array(
            [np.interp(grid, c, v) for c, v in zip(times, curve[metric])])
        mean, std = values.mean(axis=0), values.std(axis=0)
        colour = f"C{number}"
        ax.plot(grid, mean, color=colour, label=label, linewidth=1.6)
        ax.fill_between(grid,
                        mean - std,
                        mean + std,
                        color=colour,
                        alpha=0.15,
                        linewidth=0)
      ax.set_xlabel(clock_name)
      ax.set_ylabel(name_text)
      ax.grid(True, alpha=0.3)
      if metric.endswith("_loss"):
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(ticker.FormatStrFormatter("%g"))
      ax.legend(fontsize="small")
      letter = "abcd"[len(clocks) * row + column]
      ax.set_title(f"({letter}) {name_text} against {clock_name}")
  if title:
    fig.suptitle(title)
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, name)
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path
