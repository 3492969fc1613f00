"""The paper's CNN on all of Fashion-MNIST, on a GPU: its scales, its
runs, the length that fits a device's time (`epochs_that_fit`), the
throughput measurement, and the one archive its summary is recomputed from
(tf_adasamp.experiment.cnn_study is the command line)."""

import dataclasses
import gzip
import json
import os
import shutil
import tempfile
import time

import numpy as np

from tf_adasamp import _validation
from tf_adasamp.experiment.flags import option
from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import report
from tf_adasamp.experiment.study import tuning
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

ARCHIVE = "raw_metrics.jsonl.gz"
THROUGHPUT_FILE = "throughput.json"
LENGTH_FILE = "length.json"
# The lengths --fit_seconds may cut the study to, longest first: the gpu
# scale's 20 epochs, then shorter.
EPOCH_LADDER = (20, 15, 12, 10, 8, 6, 5, 4, 3, 2, 1)
# A study step's cost against the measured Unif-SGD step's: 8 of a trial's
# 11 runs are adaptive, and Algorithm 1's utility at h_t forwards each of
# their batches a second time (about 4/3 the arithmetic).
STUDY_STEP_COST = 1.25
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
              overrides=(("steps", 100), ("eval_interval",
                                          25), ("early_evaluations", 2),
                         ("batch_size", 10), ("sweep_amplitudes", (1.0,)))),
}


@dataclasses.dataclass(frozen=True)
class Options:
  stage: str = option("study",
                      "study, report, recompute or measure.",
                      choices=("study", "report", "recompute", "measure"))
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
  fit_seconds: int | None = option(
      None, "study: cut the length to the "
      "most epochs of EPOCH_LADDER that report_dir's throughput.json "
      "predicts to finish in this many seconds (kept in length.json for "
      "the calls that resume the study); not with --epochs.")
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


def departures(scale, settings, num_train, tuned, length=None):
  """presets.departures, with this study's evaluation subset, without the
  tuning it names where `tuned` (tuning's JSON) is None, and saying how
  the length was cut where `length` (length.json's dict) is given."""
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
  if length is not None:
    lines.append(
        f"Length cut to {length['epochs']} epochs (the scale's: "
        f"{EPOCH_LADDER[0]}) to fit the device's time: the longest of "
        f"{', '.join(map(str, EPOCH_LADDER))} epochs that the throughput "
        f"measured first predicted to finish within {length['fit_seconds']} "
        f"s ({length['predicted_seconds']:.0f} s), chosen before the "
        "study's first run.")
  early = sorted({
      settings.eval_interval >> k
      for k in range(1, settings.early_evaluations + 1)
  } - {0})
  lines.append(
      f"Evaluation: every {settings.eval_interval} steps"
      f"{' and at steps ' + ', '.join(map(str, early)) if early else ''}, "
      f"on the whole test set and on a fixed random "
      f"{min(spec.train_eval_size, num_train)} of the {num_train} training "
      "images (the same for every run, evaluator.train_eval_indices), in "
      "inference mode.")
  return lines


def predicted_seconds(row, measure_steps, num_runs, steps, evaluations):
  """Seconds that `num_runs` runs of `steps` steps and `evaluations`
  evaluations each take on row["processes"] processes sharing the device,
  by a throughput.json row: each run pays the measured runs' start-up
  (their wall time less their steps and 3 evaluations), its steps at the
  shared rate times STUDY_STEP_COST, and its evaluations; the runs go in
  rounds of one a process."""
  processes = row["processes"]
  step_seconds = processes / row["steps_per_s_training"]
  start_up = max(
      0.0,
      row["wall_s"] - measure_steps * step_seconds - 3 * row["evaluation_s"])
  per_run = (start_up + steps * step_seconds * STUDY_STEP_COST +
             evaluations * row["evaluation_s"])
  return -(-num_runs // processes) * per_run


def epochs_that_fit(throughput, workers, num_runs, seconds, settings,
                    num_train):
  """(epochs, predicted seconds): the most epochs of EPOCH_LADDER whose
  study `predicted_seconds` puts within `seconds` on `workers` processes
  (the ladder's last if none), by throughput.json's dict `throughput`."""
  rows = [row for row in throughput["rows"] if row["processes"] == workers]
  if not rows:
    raise ValueError(f"throughput.json has no row of {workers} processes; "
                     "measure with the study's --workers")
  per_epoch = num_train // settings.batch_size
  for epochs in EPOCH_LADDER:
    evaluations = epochs + 1 + settings.early_evaluations
    predicted = predicted_seconds(rows[0], throughput["measure_steps"],
                                  num_runs, epochs * per_epoch, evaluations)
    if predicted <= seconds:
      break
  return epochs, predicted


def fitted_length(options, settings, num_runs, num_train):
  """length.json's dict: the one an earlier call wrote in report_dir, else
  `epochs_that_fit` options.fit_seconds, written there."""
  path = os.path.join(options.report_dir, LENGTH_FILE)
  if os.path.exists(path):
    with open(path) as f:
      return json.load(f)
  throughput_path = os.path.join(options.report_dir, THROUGHPUT_FILE)
  if not os.path.exists(throughput_path):
    raise ValueError(f"--fit_seconds needs {throughput_path}: run "
                     "--stage=measure first")
  with open(throughput_path) as f:
    throughput = json.load(f)
  epochs, predicted = epochs_that_fit(throughput, options.workers, num_runs,
                                      options.fit_seconds, settings, num_train)
  length = {
      "epochs": epochs,
      "fit_seconds": options.fit_seconds,
      "predicted_seconds": round(predicted, 1),
      "workers": options.workers
  }
  os.makedirs(options.report_dir, exist_ok=True)
  run_files.write_atomically(path, json.dumps(length, indent=1) + "\n")
  return length


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
    # The archive keeps no configs; design.collect groups the runs by their
    # utility option, the settings' (the study sweeps no other).
    config = config_lib.TrainConfig(output_dir=run_dir,
                                    utility_at=settings.utility_at)
    runs.append(
        design.Run(entry["algorithm"], entry["amplitude"], entry["trial"],
                   config))
  return header, settings, runs


def summary_from_archive(path, figure_dir=None):
  """summary.md's text from an archive alone; draws Figure 1 into
  `figure_dir` if given."""
  with tempfile.TemporaryDirectory() as directory:
    header, settings, runs = read_archive(path, directory)
    curves, sweep = design.collect(runs, settings)
  if figure_dir:
    from tf_adasamp.experiment.study import heldout
    from tf_adasamp.experiment.study import plots
    plots.figure1(curves, sweep, figure_dir, title=header["title"])
    plots.heldout_figure(heldout.figure_lines(curves, sweep, settings),
                         figure_dir, header["title"])
  return report.summary_markdown(curves, sweep, settings, header["trials"],
                                 header["title"], header["command"],
                                 header["departures"])


def run_study(options):
  """Trains the study's runs, then writes the archive, Figure 1 and
  summary.md; returns the summary's path."""
  options, length, data, settings, runs = _study(options)
  pool.run_all(runs, data, workers=options.workers)
  return _write_report(options, length, len(data.y_train), settings, runs,
                       SCALES[options.scale].trials)


def report_finished_trials(options):
  """Writes the archive, Figure 1 and summary.md of the study's trials
  whose runs all finished, training nothing; returns the summary's path.

  Raises:
    ValueError: no trial finished.
  """
  options, length, data, settings, runs = _study(options)
  finished = sorted({run.trial for run in runs} - {
      run.trial
      for run in runs
      if not run_files.is_complete(run.config.output_dir, run.config.steps)
  })
  if not finished:
    raise ValueError(f"no trial of {options.runs_dir} has finished all its "
                     "runs")
  return _write_report(options, length, len(data.y_train), settings,
                       [run for run in runs if run.trial in finished],
                       len(finished))


def _study(options):
  """(options, length, data, settings, runs) of the study `options` name:
  options with the epochs that --fit_seconds chose (length.json's dict, or
  None where no fit chose them)."""
  if options.fit_seconds is not None and options.epochs is not None:
    raise ValueError("--fit_seconds chooses the epochs: drop --epochs")
  data = load_data(options.scale)
  length = None
  if options.fit_seconds is not None:
    _validation.positive_int(options.fit_seconds, "fit_seconds")
    settings = settings_for(options.scale, options.tuned)
    length = fitted_length(options, settings,
                           len(plan(options.scale, settings, options.runs_dir)),
                           len(data.y_train))
    options = dataclasses.replace(options,
                                  epochs=length["epochs"],
                                  fit_seconds=None)
  settings = settings_for(options.scale, options.tuned, options.epochs,
                          len(data.y_train))
  return (options, length, data, settings,
          plan(options.scale, settings, options.runs_dir))


def _write_report(options, length, num_train, settings, runs, trials):
  """Writes the archive of `runs` (`trials` of them a run), Figure 1 and
  summary.md; returns the summary's path."""
  os.makedirs(options.report_dir, exist_ok=True)
  planned = SCALES[options.scale].trials
  lines = departures(options.scale, settings, num_train, options.tuned, length)
  if trials < planned:
    lines.insert(
        0, f"Trials: {trials} of the {planned} planned (those whose runs all "
        "finished in the device's time; the others were cut).")
  header = {
      "scale": options.scale,
      "settings": dataclasses.asdict(settings),
      "trials": trials,
      "title": (f"Adaptive vs uniform sampling, the paper's CNN on "
                f"Fashion-MNIST ({num_train} training images), {trials} "
                "trials"),
      "command": reproducing_command(options),
      "departures": lines,
  }
  archive = os.path.join(options.report_dir, ARCHIVE)
  write_archive(archive, header, runs)
  path = os.path.join(options.report_dir, "summary.md")
  with open(path, "w") as f:
    f.write(summary_from_archive(archive, options.report_dir))
  return path


def _second_half(run_dir, steps):
  """(wall seconds, training seconds) of a run's second half: between its
  checkpoints at steps / 2 and at `steps` (the file times: the steps and
  the evaluation and checkpoint at the end, with neither start-up nor
  compilation), and in its trainer's clock (the steps alone)."""
  checkpoints = os.path.join(run_dir, run_files.CHECKPOINTS_DIR)
  half = os.path.join(checkpoints, f"ckpt-{steps // 2}.index")
  end = os.path.join(checkpoints, f"ckpt-{steps}.index")
  clock = {
      record["step"]: record["train_seconds"]
      for record in run_files.read_metrics(run_dir)
  }
  return (os.path.getmtime(end) - os.path.getmtime(half),
          clock[steps] - clock[steps // 2])


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
                               early_evaluations=0,
                               jit_compile=spec.jit_compile,
                               train_eval_size=spec.train_eval_size,
                               resume=False)
    runs.append(design.Run("Unif-SGD", 0.0, trial, config))
  return runs


def measure(options):
  """Steps per second of 1 process and of --workers processes at once, each
  training one uniform run of --measure_steps steps from scratch (summed
  over the processes, whose second halves overlap): over the runs' second
  halves, by the wall clock and by the trainer's (the steps alone), and
  over the whole wall time (start-up and compilation included); and the
  seconds of the last evaluation and checkpoint (the median over the runs
  of their second half's wall less training seconds). Written to
  <report_dir>/throughput.json."""
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
    halves = [
        _second_half(run.config.output_dir, options.measure_steps)
        for run in runs
    ]
    rows.append({
        "processes":
            processes,
        "steps_per_s_second_half":
            round(sum(half / wall_s for wall_s, _ in halves), 1),
        "steps_per_s_training":
            round(sum(half / train_s for _, train_s in halves), 1),
        "evaluation_s":
            round(
                float(
                    np.median([wall_s - train_s for wall_s, train_s in halves
                              ])), 3),
        "wall_s":
            round(wall, 2),
        "steps_per_s_wall":
            round(processes * options.measure_steps / wall, 1)
    })
  os.makedirs(options.report_dir, exist_ok=True)
  path = os.path.join(options.report_dir, THROUGHPUT_FILE)
  with open(path, "w") as f:
    json.dump(
        {
            "what": " ".join(measure.__doc__.split()),
            "measure_steps": options.measure_steps,
            "rows": rows
        },
        f,
        indent=1)
  return path


def recompute(options):
  """Rewrites summary.md from the archive alone, or with options.check
  compares them (ValueError where they differ); returns what it did."""
  archive = os.path.join(options.report_dir, ARCHIVE)
  text = summary_from_archive(archive)
  path = os.path.join(options.report_dir, "summary.md")
  if options.check:
    with open(path) as f:
      if f.read() != text:
        # The command line ends on it, in one line, exit status 1.
        raise ValueError(f"{path} differs from the summary recomputed "
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


def check_options(options):
  """Checks every flag and path before anything loads or trains.

  Raises:
    ValueError: naming the flag (run_files.RunError, a ValueError, for a
      path): workers past pool.max_workers(), epochs, fit_seconds or
      measure_steps below what a stage takes, flags of another stage, a
      --tuned file that is not tuning's JSON, directories that cannot be
      written, or (recompute) an archive that is not there.
  """
  pool.check_workers(options.workers)
  for name in ("epochs", "fit_seconds"):
    if getattr(options, name) is not None:
      _validation.positive_int(getattr(options, name), name)
  if options.fit_seconds is not None and options.epochs is not None:
    raise ValueError("--fit_seconds chooses the epochs: drop --epochs")
  _validation.positive_int(options.measure_steps // 2, "measure_steps // 2")
  if options.check and options.stage != "recompute":
    raise ValueError("--check is for --stage=recompute")
  if options.stage == "recompute":
    archive = os.path.join(options.report_dir, ARCHIVE)
    if not os.path.isfile(archive):
      raise ValueError(f"--stage=recompute reads {archive}, which is not "
                       "there")
    return
  # Every run's settings as its TrainConfig checks them, the tuning's
  # choices included.
  try:
    plan(
        options.scale,
        settings_for(options.scale, options.tuned, options.epochs,
                     SCALES[options.scale].train_size or 60000),
        options.runs_dir)
  except OSError as error:
    raise ValueError(f"cannot read --tuned {options.tuned}: "
                     f"{error.strerror or error}") from None
  except (KeyError, TypeError, ValueError) as error:
    if options.tuned is None:
      raise
    raise ValueError(f"--tuned {options.tuned} is not tuning's JSON, or "
                     f"chooses values a run refuses ({type(error).__name__}: "
                     f"{error})") from None
  run_files.ensure_writable_dir(options.runs_dir, "runs_dir")
  run_files.ensure_writable_dir(options.report_dir, "report_dir")
