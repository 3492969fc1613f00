"""The paper's experiment at its own scale: its CNN on all 60,000
Fashion-MNIST training images and 10,000 test images, compiled by XLA, on a
GPU. benchmarks/gpu_cnn_study.sh runs it there; docs/experiment/cnn/README.md
gives the budget.

  --stage=study      trains the runs (resumable: finished runs are skipped,
                     cut ones go on from their last checkpoint), then writes
                     raw_metrics.jsonl.gz (every run's metric records in one
                     gzip'd JSON-lines file, its first line the settings),
                     and from that file alone Figure 1 and summary.md.
  --stage=recompute  rewrites summary.md from raw_metrics.jsonl.gz alone (no
                     runs, no TensorFlow); --check compares it, byte for
                     byte, with the summary.md beside the archive instead.
  --stage=measure    steps per second of --workers processes sharing the
                     device, each training one run, against one process,
                     start-up and compilation included; written as JSON.

benchmarks/carry.py carries the runs directory off a lent device and back,
where --stage=study (or tuning) resumes them.

--scale=gpu is the paper's protocol (presets' ("fashion_mnist", "cnn"), 10
trials); --scale=cpu_smoke takes the same path at toy size on a CPU.
--tuned reads tf_adasamp.experiment.tuning's JSON for the step sizes,
amplitude and decay.
"""

import dataclasses
import gzip
import json
import os
import shutil
import sys
import tempfile
import time

from absl import flags
from absl import logging

from tf_adasamp import _validation
from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment import tuning
from tf_adasamp.experiment.flags import option
from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import report
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

PROGRAM = "tf-adasamp-cnn-study"
FLAGS = flags.FLAGS
ARCHIVE = "raw_metrics.jsonl.gz"
DATASET, MODEL = "fashion_mnist", "cnn"


@dataclasses.dataclass(frozen=True)
class Scale:
  """How big a study is: its data, trials and what it changes in the
  preset."""
  trials: int
  train_size: int | None  # training images (None: all 60,000)
  test_size: int | None  # test images (None: all 10,000)
  train_eval_size: int  # the fixed training subset every evaluation reads
  jit_compile: bool
  overrides: tuple = ()  # (Settings field, value) pairs


SCALES = {
    "gpu":
        Scale(trials=10,
              train_size=None,
              test_size=None,
              train_eval_size=10000,
              jit_compile=True),
    # The CNN costs ~0.3 s a step at batch 100 on one CPU core: batches of
    # 10, small evaluations and one sweep amplitude keep the whole path
    # within a test's time.
    "cpu_smoke":
        Scale(trials=2,
              train_size=2000,
              test_size=200,
              train_eval_size=200,
              jit_compile=False,
              overrides=(("steps", 100), ("eval_interval", 25),
                         ("batch_size", 10), ("sweep_amplitudes", (1.0,)))),
}


@dataclasses.dataclass(frozen=True)
class Options:
  stage: str = option("study",
                      "study, recompute or measure.",
                      choices=("study", "recompute", "measure"))
  scale: str = option("gpu", "gpu: the paper's protocol; cpu_smoke: the "
                      "same path at toy size.",
                      choices=tuple(SCALES))
  runs_dir: str = option("runs/cnn", "Directory of the runs.")
  report_dir: str = option(
      "runs/cnn/report", "Directory of the archive, "
      "figures and summary.md.")
  tuned: str | None = option(
      None, "tuning's JSON whose choices replace the "
      "preset's step sizes, amplitude and decay.")
  check: bool = option(
      False, "recompute: compare with the summary.md "
      "beside the archive; exit 1 if they differ.")
  epochs: int | None = option(
      None, "Training length in epochs (default: "
      "the scale's); shorter where a device call "
      "must.")
  workers: int = option(4, "Processes that train runs at once.")
  measure_steps: int = option(3000, "measure: steps of each run.")


def settings_for(scale, tuned=None, epochs=None, num_train=60000):
  """The preset of the paper's CNN on Fashion-MNIST at `scale`, `epochs`
  long if given (an evaluation each epoch), with the choices of tuning's
  JSON file `tuned` if given."""
  settings = dataclasses.replace(presets.preset(DATASET, MODEL),
                                 **dict(SCALES[scale].overrides))
  if epochs is not None:
    _validation.positive_int(epochs, "epochs")
    per_epoch = num_train // settings.batch_size
    settings = dataclasses.replace(settings,
                                   steps=epochs * per_epoch,
                                   eval_interval=per_epoch)
  if tuned is None:
    return settings
  with open(tuned) as f:
    settings = tuning.tuned_settings(settings, json.load(f))
  if settings.amplitude not in settings.sweep_amplitudes:
    raise ValueError(f"tuned amplitude {settings.amplitude:g} is not among "
                     f"the sweep's {settings.sweep_amplitudes}")
  return settings


def load_data(scale):
  """Fashion-MNIST, or the fixed subset of it that `scale` names."""
  spec = SCALES[scale]
  data = datasets.load_fashion_mnist()
  if spec.train_size is None:
    return data
  return datasets.subset(data, DATASET, spec.train_size, spec.test_size,
                         datasets.SUBSET_SEED)


def plan(scale, settings, runs_dir):
  """The study's runs at `scale`: design.plan's, compiled as the scale says
  and evaluated on its fixed training subset."""
  spec = SCALES[scale]
  return [
      dataclasses.replace(run,
                          config=dataclasses.replace(
                              run.config,
                              jit_compile=spec.jit_compile,
                              train_eval_size=spec.train_eval_size))
      for run in design.plan(settings, spec.trials, runs_dir, DATASET, MODEL)
  ]


def departures(scale, settings, num_train, tuned):
  """presets.departures, with this study's evaluation subset, and without
  the tuning it names where `tuned` (tuning's JSON) is None."""
  spec = SCALES[scale]
  lines = [
      line for line in presets.departures(DATASET, MODEL, settings, spec.trials,
                                          num_train)
      if not line.startswith("Evaluation:")
  ]
  if tuned is None:
    lines = [
        "Tuning: none; the preset's starting values (presets.PRESETS), not "
        "cross-validated." if line.startswith("Tuning:") else line
        for line in lines
    ]
  if spec.train_size is not None:
    lines.insert(
        0, f"Scale: a CPU smoke test, {spec.train_size} training "
        f"and {spec.test_size} test images, not the paper's protocol.")
  lines.append(
      f"Evaluation: every {settings.eval_interval} steps, on the whole test "
      f"set and on a fixed random {min(spec.train_eval_size, num_train)} of "
      f"the {num_train} training images (the same for every run, "
      "evaluator.train_eval_indices), in inference mode.")
  return lines


def write_archive(path, header, runs):
  """Every run's records in one gzip'd JSON-lines file, byte-stable: the
  header, then one line per run in `runs`' order."""
  lines = [json.dumps(header, sort_keys=True)]
  for run in runs:
    lines.append(
        json.dumps(
            {
                "algorithm": run.algorithm,
                "amplitude": run.amplitude,
                "trial": run.trial,
                "records": run_files.read_metrics(run.config.output_dir)
            },
            sort_keys=True))
  text = "\n".join(lines) + "\n"
  with open(path, "wb") as raw:
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
      f.write(text.encode("utf-8"))


def read_archive(path, directory):
  """(header, settings, runs) of an archive, each run's records written to
  its own folder under `directory` for design.collect."""
  with gzip.open(path, "rt", encoding="utf-8") as f:
    header, *entries = [json.loads(line) for line in f if line.strip()]
  fields = {
      name: tuple(value) if isinstance(value, list) else value
      for name, value in header["settings"].items()
  }
  settings = presets.Settings(**fields)
  runs = []
  for number, entry in enumerate(entries):
    run_dir = os.path.join(directory, str(number))
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, run_files.METRICS_FILE), "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in entry["records"])
    runs.append(
        design.Run(entry["algorithm"], entry["amplitude"], entry["trial"],
                   config_lib.TrainConfig(output_dir=run_dir)))
  return header, settings, runs


def summary_from_archive(path, figure_dir=None):
  """summary.md's text from an archive alone; draws Figure 1 into
  `figure_dir` if given."""
  with tempfile.TemporaryDirectory() as directory:
    header, settings, runs = read_archive(path, directory)
    curves, sweep = design.collect(runs, settings)
  if figure_dir:
    # pylint: disable=import-outside-toplevel
    from tf_adasamp.experiment.study import plots
    plots.figure1(curves, sweep, figure_dir, title=header["title"])
  return report.summary_markdown(curves, sweep, settings, header["trials"],
                                 header["title"], header["command"],
                                 header["departures"])


def run_study(options, command):
  """Trains the study's runs, then writes the archive, Figure 1 and
  summary.md; returns the summary's path."""
  data = load_data(options.scale)
  settings = settings_for(options.scale, options.tuned, options.epochs,
                          len(data.y_train))
  runs = plan(options.scale, settings, options.runs_dir)
  pool.run_all(runs, data, workers=options.workers)
  os.makedirs(options.report_dir, exist_ok=True)
  spec = SCALES[options.scale]
  header = {
      "scale":
          options.scale,
      "settings":
          dataclasses.asdict(settings),
      "trials":
          spec.trials,
      "title": (f"Adaptive vs uniform sampling, the paper's CNN on "
                f"Fashion-MNIST ({len(data.y_train)} training images), "
                f"{spec.trials} trials"),
      "command":
          command,
      "departures":
          departures(options.scale, settings, len(data.y_train), options.tuned),
  }
  archive = os.path.join(options.report_dir, ARCHIVE)
  write_archive(archive, header, runs)
  path = os.path.join(options.report_dir, "summary.md")
  with open(path, "w") as f:
    f.write(summary_from_archive(archive, options.report_dir))
  return path


def _second_half_seconds(run_dir, steps):
  """Seconds between a run's checkpoints at steps / 2 and at `steps` (the
  file times): its second half's steps, with neither start-up nor
  compilation."""
  checkpoints = os.path.join(run_dir, run_files.CHECKPOINTS_DIR)
  half = os.path.join(checkpoints, f"ckpt-{steps // 2}.index")
  end = os.path.join(checkpoints, f"ckpt-{steps}.index")
  return os.path.getmtime(end) - os.path.getmtime(half)


def _measure_runs(options, settings, processes):
  spec = SCALES[options.scale]
  runs = []
  for trial in range(processes):
    run_dir = os.path.join(options.runs_dir, "measure", f"p{processes}",
                           f"seed{trial}")
    config = design.run_config(settings,
                               "Unif-SGD",
                               0.0,
                               trial,
                               run_dir,
                               dataset=DATASET,
                               model=MODEL,
                               steps=options.measure_steps,
                               eval_interval=options.measure_steps // 2,
                               jit_compile=spec.jit_compile,
                               train_eval_size=spec.train_eval_size,
                               resume=False)
    runs.append(design.Run("Unif-SGD", 0.0, trial, config))
  return runs


def measure(options):
  """Steps per second of 1 process and of --workers processes at once, each
  training one uniform run of --measure_steps steps from scratch: over the
  runs' second halves (summed over the processes, whose second halves
  overlap), and over the whole wall time (start-up and compilation
  included); written to <report_dir>/throughput.json."""
  _validation.positive_int(options.measure_steps // 2, "measure_steps // 2")
  settings = settings_for(options.scale)
  data = load_data(options.scale)
  # A measurement starts from scratch: a cut one's runs are dropped.
  shutil.rmtree(os.path.join(options.runs_dir, "measure"), ignore_errors=True)
  rows = []
  for processes in sorted({1, options.workers}):
    runs = _measure_runs(options, settings, processes)
    start = time.time()
    pool.run_all(runs, data, workers=processes)
    wall = time.time() - start
    half = options.measure_steps // 2
    rows.append({
        "processes":
            processes,
        "steps_per_s_second_half":
            round(
                sum(half / _second_half_seconds(run.config.output_dir,
                                                options.measure_steps)
                    for run in runs), 1),
        "wall_s":
            round(wall, 2),
        "steps_per_s_wall":
            round(processes * options.measure_steps / wall, 1)
    })
  os.makedirs(options.report_dir, exist_ok=True)
  path = os.path.join(options.report_dir, "throughput.json")
  with open(path, "w") as f:
    json.dump({
        "what": " ".join(measure.__doc__.split()),
        "rows": rows
    },
              f,
              indent=1)
  return path


def recompute(options):
  archive = os.path.join(options.report_dir, ARCHIVE)
  text = summary_from_archive(archive)
  path = os.path.join(options.report_dir, "summary.md")
  if options.check:
    with open(path) as f:
      if f.read() != text:
        sys.exit(f"{PROGRAM}: {path} differs from the summary recomputed "
                 f"from {archive}")
    return f"{path} matches {archive}"
  with open(path, "w") as f:
    f.write(text)
  return f"wrote {path}"


def reproducing_command(options):
  """The study's command without the flags that only place its outputs or
  pace it (as reproduce's summaries name theirs): a call that resumes the
  study elsewhere writes the same summary."""
  arguments = [f"--scale={options.scale}"]
  if options.epochs is not None:
    arguments.append(f"--epochs={options.epochs}")
  if options.tuned:
    arguments.append(f"--tuned={options.tuned}")
  return " ".join(["python -m tf_adasamp.experiment.cnn_study", *arguments])


def main():
  if not FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  options = flags_lib.parse(PROGRAM, Options)
  try:
    if options.stage == "recompute":
      print(recompute(options))
    elif options.stage == "measure":
      print(f"wrote {measure(options)}")
    else:
      print(f"wrote {run_study(options, reproducing_command(options))}")
  except (TypeError, ValueError, OSError,
          datasets.DatasetUnavailableError) as error:
    sys.exit(f"{PROGRAM}: {error}")
  except KeyboardInterrupt:
    flags_lib.interrupted(PROGRAM, pool.INTERRUPTED)


def define_flags():
  flags_lib.define(Options)


def run():
  flags_lib.run(PROGRAM, define_flags, main)


if __name__ == "__main__":
  run()
