"""Each command line, given bad flag values, exits 1 with a one-line error.

Never a Python traceback: the table covers values caught by the options'
own checks, by absl's flag parsing, and at run time (an unwritable
directory, a diverging run).
"""

import dataclasses
import importlib
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import checkpoint_edits
from command_lines import assert_fails_in_one_line
from command_lines import run_cli
from command_lines import UNWRITABLE
from tf_adasamp.experiment import bounds_table
from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment import noise_study
from tf_adasamp.experiment import reproduce
from tf_adasamp.experiment import wall_time
from tf_adasamp.experiment.study import cnn
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import tuning_options
from tf_adasamp.experiment.training import config as config_lib

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Data files that exist but are not ArrayRecord files (run_cli's {tmp}/file).
DATA_FILES = ["--data_path={tmp}/file", "--test_data_path={tmp}/file"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--output_dir={tmp}/file"], "is a file, not a directory"),
        (["--output_dir={tmp}/file/run"], "Not a directory"),
        ([f"--output_dir={UNWRITABLE}"], "cannot write to output_dir"),
        (["--epochs=inf"], "epochs must be finite and > 0, got inf"),
        (["--epochs=nan"], "epochs must be finite and > 0, got nan"),
        (["--seed=-1"], "seed must be in [0, 2**32), got -1"),
        (["--seed=4294967296"], "seed must be in [0, 2**32)"),
        (["--l2=inf"], "l2 must be finite and > 0, got inf"),
        (["--learning_rate=inf"], "learning_rate must be finite and > 0"),
        (["--batch_size=99999999999"], "is larger than the 1500 training"),
        (["--steps=0"], "steps must be"),
        (["--amplitude=nan"], "amplitude must be"),
        (["--steps_per_execution=0"], "steps_per_execution must be"),
        (["--early_evaluations=-2"], "early_evaluations must be an int in"),
        (["--batch_size=abc"], "Flags parsing error"),
        (["--lr_schedule=step"
         ], "should be one of <inverse_time|linear|cosine>"),
        (["--utility=reducible_loss"], "needs a validation_size > 0"),
        (["--irreducible_model=resnet"], "should be one of <"),
        ([
            "--utility=reducible_loss", "--validation_size=10",
            "--reducible_loss_bound=nan"
        ], "reducible_loss_bound must be finite"),
        (["--validation_size=-1"], "validation_size must be an int >= 0"),
        (["--validation_size=1500"], "validation size 1500 leaves no training"),
        (["--steps=" + str(10**23)], "steps must be at most 2**53"),
        (["--eval_interval=" + str(2**60)], "eval_interval must be at most"),
        (["--epochs=1e300"], "more steps than the 2**53 at most"),
        (["--amplitude=1e308"], "amplitude / (1 - decay) must be at most"),
        (["--learning_rate=1e39"], "learning_rate must be at most 3.403e+38"),
        (["--data_path={tmp}/file"], "missing test_data_path, num_classes"),
        (["--num_classes=10"], "missing data_path, test_data_path"),
        (["--data_path=", "--test_data_path={tmp}/file", "--num_classes=2"
         ], "data_path is empty"),
        (DATA_FILES + ["--num_classes=1"], "num_classes must be at least 2"),
        (DATA_FILES + ["--num_classes=0"], "num_classes must be >= 1"),
        (DATA_FILES + ["--num_classes=2", "--jit_compile"],
         "jit_compile cannot read data_path"),
        (DATA_FILES + ["--num_classes=2", "--dataset=digits"],
         "--data_path replaces --dataset"),
        ([
            "--data_path={tmp}/none", "--test_data_path={tmp}/file",
            "--num_classes=2"
        ], "/none' is not a file"),
        (DATA_FILES + ["--num_classes=2"], "cannot read ArrayRecord file"),
        # Runs, and diverges: the updated model's NaN outputs give the
        # sampler NaN utilities.
        ([
            "--learning_rate=1e30", "--utility=l1", "--utility_at=updated",
            "--steps=4", "--eval_interval=2"
        ], "the run diverged at step 1"),
    ])
def test_train_rejects_bad_flags_in_one_line(tmp_path, args, message):
  result = run_cli("train", ["--output_dir={tmp}/run", "--noprogress", *args],
                   tmp_path)
  assert_fails_in_one_line(result, message)


@pytest.mark.parametrize("args,message", [
    (["--output_dir={tmp}/file"], "output_dir {tmp}/file is a file"),
    ([f"--report_dir={UNWRITABLE}"], "cannot write to report_dir"),
    (["--steps=1"], "fewer than 2 evaluations"),
    (["--trials=0"], "trials must be >= 1"),
    (["--sweep_amplitudes=1,x"], "--sweep_amplitudes takes numbers"),
    (["--baseline_lr_schedules=linear,step"
     ], "IS-SGD's lr_schedule must be one of"),
])
def test_reproduce_rejects_bad_flags_in_one_line(tmp_path, args, message):
  result = run_cli("reproduce", ["--output_dir={tmp}/runs", *args], tmp_path)
  assert_fails_in_one_line(result, message.format(tmp=tmp_path))
  # Failed up front: no run started.
  assert not (tmp_path / "runs").exists() or not os.listdir(tmp_path / "runs")


@pytest.mark.parametrize("args,message", [
    (["--trials=0"], "trials must be >= 1, got 0"),
    (["--wall_time_trials=-1"], "wall_time_trials must be >= 1, got -1"),
    (["--workers=0"], "workers must be >= 1, got 0"),
    (["--stage=report"], "should be one of <all|tuning|study|wall_time>"),
    (["--scale=tiny"], "should be one of <full|smoke>"),
    (["--trials=x"], "Flags parsing error"),
    (["--stage=study"], "tuning.json does not exist: run --stage=tuning first"),
    (["--output_dir={tmp}/file"], "output_dir {tmp}/file is a file"),
    ([f"--report_dir={UNWRITABLE}"], "cannot write to report_dir"),
])
def test_budget_study_rejects_bad_flags_in_one_line(tmp_path, args, message):
  result = run_cli("budget_study", ["--output_dir={tmp}/runs", *args], tmp_path)
  assert_fails_in_one_line(result, message.format(tmp=tmp_path))
  assert not (tmp_path / "runs").exists() or not os.listdir(tmp_path / "runs")


@pytest.mark.parametrize("args,message", [
    (["--epochs=inf"], "--epochs must be finite and > 0, got inf"),
    (["--epochs=nan"], "--epochs must be finite and > 0, got nan"),
    (["--epochs=10", "--batch_size=0"], "--batch_size must be >= 1, got 0"),
    (["--T=0"], "--T must be >= 1"),
    (["--n=0", "--T=5"], "--n must be >= 1"),
    ([], "set exactly one of --T and --epochs"),
])
def test_bounds_table_rejects_bad_flags_in_one_line(tmp_path, args, message):
  assert_fails_in_one_line(run_cli("bounds_table", args, tmp_path), message)


# Run with a command line's module name, then its arguments: whether
# TensorFlow had loaded when the program exited.
_LOADED_TENSORFLOW = """
import importlib
import sys
program = importlib.import_module("tf_adasamp.experiment." + sys.argv.pop(1))
sys.argv[0] = program.PROGRAM
try:
  program.run()
finally:
  print("tensorflow" in sys.modules)
"""


@pytest.mark.parametrize("module,args", [
    ("train", ["--help"]),
    ("train", ["--seed=-1"]),
    ("train", ["--model=x"]),
    ("train", [f"--output_dir={UNWRITABLE}"]),
    ("train", ["--utility=reducible_loss"]),
    ("reproduce", ["--help"]),
    ("reproduce", ["--trials=0"]),
    ("tuning", ["--help"]),
    ("tuning", ["--workers=x"]),
    ("tuning", ["--lr_schedules=inverse_time,step"]),
    ("tuning", ["--adaptive=AdaSamp-01-SGD,x"]),
    ("budget_study", ["--help"]),
    ("budget_study", ["--trials=0"]),
    ("budget_study", ["--stage=study", f"--report_dir={UNWRITABLE}"]),
    ("demo", ["--help"]),
    ("wall_time", ["--help"]),
    ("wall_time", ["--trials=0"]),
])
def test_command_lines_answer_help_and_bad_flags_before_tensorflow_loads(
    module, args):
  result = subprocess.run(
      [sys.executable, "-c", _LOADED_TENSORFLOW, module, *args],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=300)
  assert result.returncode == 1, result.stderr
  assert result.stdout.splitlines()[-1] == "False", result.stderr
  if args == ["--help"]:  # as a console script: what the program does
    doc = importlib.import_module(f"tf_adasamp.experiment.{module}").__doc__
    assert result.stdout.startswith(doc), result.stdout


# What --resume, TF_CONFIG and I/O failures do to the trainer's command line.

TINY_RUN = [
    "--model=logistic", "--steps=4", "--eval_interval=2", "--batch_size=16",
    "--noprogress"
]


@pytest.fixture
def stopped_run(tmp_path):
  """A finished 4-step run in tmp_path/run: records 0, 2, 4."""
  result = run_cli("train", [*TINY_RUN, "--output_dir={tmp}/run"], tmp_path)
  assert result.returncode == 0, result.stderr
  return tmp_path / "run"


def resume_stopped_run(tmp_path, *args):
  return run_cli(
      "train",
      [*TINY_RUN, "--steps=6", "--resume", "--output_dir={tmp}/run", *args],
      tmp_path)


def break_checkpoint_state(run, how):
  checkpoints = run / "checkpoints"
  if how == "state file deleted":
    (checkpoints / "checkpoint").unlink()
  elif how == "state file garbage":
    (checkpoints / "checkpoint").write_bytes(b"\x00garbage {{{\n")
  elif how == "checkpoint files deleted":
    for path in checkpoints.glob("ckpt-*"):
      path.unlink()


@pytest.mark.parametrize(
    "how",
    ["state file deleted", "state file garbage", "checkpoint files deleted"])
def test_resume_without_a_readable_checkpoint_refuses_and_keeps_the_metrics(
    tmp_path, stopped_run, how):
  metrics = (stopped_run / "metrics.jsonl").read_bytes()
  break_checkpoint_state(stopped_run, how)
  result = resume_stopped_run(tmp_path)
  assert_fails_in_one_line(result, "has no readable checkpoint")
  assert (stopped_run / "metrics.jsonl").read_bytes() == metrics


@pytest.mark.parametrize("damage", checkpoint_edits.SAVE_COUNTER_DAMAGE)
def test_resume_refuses_a_checkpoint_with_a_corrupt_save_counter(
    tmp_path, stopped_run, damage):
  metrics = (stopped_run / "metrics.jsonl").read_bytes()
  path = tf.train.latest_checkpoint(str(stopped_run / "checkpoints"))
  checkpoint_edits.corrupt_save_counter(path, damage)
  checkpoint_edits.forge_digest(path)
  result = resume_stopped_run(tmp_path)
  assert_fails_in_one_line(
      result, f"cannot resume from {path}: it does not hold this trainer's")
  assert (stopped_run / "metrics.jsonl").read_bytes() == metrics


@pytest.mark.parametrize("replacement", ["file", "dangling link"])
def test_resume_refuses_checkpoints_that_are_not_a_directory(
    tmp_path, stopped_run, replacement):
  metrics = (stopped_run / "metrics.jsonl").read_bytes()
  checkpoints = stopped_run / "checkpoints"
  os.rename(checkpoints, tmp_path / "moved")
  if replacement == "file":
    checkpoints.write_text("")
  else:
    checkpoints.symlink_to(tmp_path / "nowhere")
  result = resume_stopped_run(tmp_path)
  assert_fails_in_one_line(
      result, "is a dangling link"
      if replacement == "dangling link" else "is not a directory")
  assert (stopped_run / "metrics.jsonl").read_bytes() == metrics


def test_resume_refuses_to_add_deterministic(tmp_path, stopped_run):
  result = resume_stopped_run(tmp_path, "--deterministic")
  assert_fails_in_one_line(result, "deterministic: False there, True here")


def test_resume_refuses_another_length_under_a_budget_schedule(tmp_path):
  run = [*TINY_RUN, "--lr_schedule=linear", "--output_dir={tmp}/run"]
  assert run_cli("train", run, tmp_path).returncode == 0
  metrics = (tmp_path / "run" / "metrics.jsonl").read_bytes()
  result = run_cli("train", [*run, "--steps=6", "--resume"], tmp_path)
  assert_fails_in_one_line(
      result, "with another length (steps 4 there, steps 6 here): its "
      "lr_schedule 'linear' follows the run's length")
  assert (tmp_path / "run" / "metrics.jsonl").read_bytes() == metrics


def test_resume_names_a_metrics_file_it_cannot_read(tmp_path, stopped_run):
  (stopped_run / "metrics.jsonl").unlink()
  (stopped_run / "metrics.jsonl").symlink_to(tmp_path)
  result = resume_stopped_run(tmp_path)
  assert_fails_in_one_line(
      result, f"cannot read {stopped_run / 'metrics.jsonl'}: Is a directory")


@pytest.mark.parametrize("blocked,message", [
    ("config.json", "cannot write {run}/config.json: Is a directory"),
    ("tensorboard/validation", "cannot write to {run}/tensorboard"),
])
def test_a_path_that_cannot_be_written_is_named_in_one_line(
    tmp_path, blocked, message):
  run = tmp_path / "run"
  (run / blocked).parent.mkdir(parents=True, exist_ok=True)
  if blocked == "config.json":
    (run / blocked).mkdir()
  else:
    (run / blocked).write_text("")  # a file where the run's directory goes
  result = run_cli("train", [*TINY_RUN, "--output_dir={tmp}/run"], tmp_path)
  assert_fails_in_one_line(result, message.format(run=run))


# The trainer's command line under a file size limit of argv[1] bytes, which
# stands in for a full disk: a write past it fails (EFBIG).
FILE_SIZE_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv.pop(1))
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from tf_adasamp.experiment import train
sys.argv[0] = train.PROGRAM
train.run()
"""


def test_a_first_checkpoint_that_cannot_be_written_says_why_and_blocks_nothing(
    tmp_path):
  run = tmp_path / "run"
  # The settings fit, the first checkpoint (the sampler's ~100 KB) does not.
  result = subprocess.run([
      sys.executable, "-c", FILE_SIZE_LIMIT, "16384", *TINY_RUN,
      f"--output_dir={run}"
  ],
                          cwd=ROOT,
                          capture_output=True,
                          text=True,
                          timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert_fails_in_one_line(
      result, f"cannot write to {run}/checkpoints: File too large ({run}/"
      "checkpoints/ckpt-0_temp/")
  assert ("the run stops, before its first checkpoint: run it again without "
          "--resume" in result.stderr)
  assert not (run / "checkpoints").exists()
  assert_fails_in_one_line(resume_stopped_run(tmp_path), "holds no run")
  result = run_cli("train", [*TINY_RUN, "--output_dir={tmp}/run"], tmp_path)
  assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("args,message", [
    (["--output_dir="], "output_dir is empty"),
    (["--resume", "--output_dir={tmp}/missing"], "{tmp}/missing does not "
     "exist; leave out --resume"),
    (["--resume", "--output_dir={tmp}/empty"], "holds no run"),
])
def test_train_output_dir_that_cannot_be_meant_is_refused(
    tmp_path, args, message):
  (tmp_path / "empty").mkdir()
  result = run_cli("train", ["--noprogress", *args], tmp_path)
  assert_fails_in_one_line(result, message.format(tmp=tmp_path))
  assert not (tmp_path / "missing").exists()
  assert not os.listdir(tmp_path / "empty")


@pytest.mark.parametrize("tf_config,message", [
    (None, "TF_CONFIG names no chief or worker"),
    ("{}", "TF_CONFIG names no chief or worker"),
    ("[]", "TF_CONFIG names no chief or worker"),
    ('{"cluster": 5}', "TF_CONFIG is not a cluster spec"),
    ('{"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}}',
     "TF_CONFIG names no chief or worker"),
    ('{"cluster": {"worker": ["nohostport"]}, '
     '"task": {"type": "worker", "index": 0}}', "give it as host:port"),
])
def test_multi_worker_refuses_a_tf_config_without_a_cluster(
    tmp_path, tf_config, message):
  environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  environment.pop("TF_CONFIG", None)
  if tf_config is not None:
    environment["TF_CONFIG"] = tf_config
  result = subprocess.run([
      sys.executable, "-m", "tf_adasamp.experiment.train", *TINY_RUN,
      "--strategy=multi_worker", f"--output_dir={tmp_path / 'run'}"
  ],
                          cwd=ROOT,
                          capture_output=True,
                          text=True,
                          timeout=300,
                          env=environment)
  assert_fails_in_one_line(result, message)
  assert not run_files_exist(tmp_path / "run")


def run_files_exist(run):
  return (run / "metrics.jsonl").exists() or (run / "checkpoints").exists()


# Every flag of every command line, walked with bad values (issue 53).

# Run with a command line's module and a JSON list of argument lists: runs
# the command once for each, in a child forked from this process (which has
# imported the command's module, not TensorFlow), and prints a JSON list of
# [exit status, stderr, TensorFlow loaded, seconds] for each. A child still
# running after its time limit is killed (status None).
_WALK = """
import importlib, json, os, signal, sys, tempfile, time, traceback
module = importlib.import_module(sys.argv[1])
cases, limit = json.loads(sys.argv[2]), float(sys.argv[3])

def run(argv):
  if module.__name__.endswith(".refresh"):
    return module.main([module.PROGRAM, *argv])
  if hasattr(module, "PROGRAM"):  # absl's command lines
    sys.argv = [module.PROGRAM, *argv]
    module.run()
    return 0
  return module.main(argv)

results = []
for argv in cases:
  with tempfile.TemporaryFile("w+") as err, tempfile.TemporaryFile("w+") as out:
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
      os.dup2(err.fileno(), 2)
      code = 1
      try:
        code = run(argv) or 0
      except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (
            print(exit_.code, file=sys.stderr) or 1)
      except BaseException:
        traceback.print_exc()
      finally:
        sys.stderr.flush()
        out.write(json.dumps("tensorflow" in sys.modules))
        out.flush()
        os._exit(code if isinstance(code, int) else 1)
    while True:
      done, status = os.waitpid(pid, os.WNOHANG)
      if done:
        break
      if time.monotonic() - start > limit:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status = None
        break
      time.sleep(0.02)
    seconds = time.monotonic() - start
    err.seek(0)
    out.seek(0)
    loaded = out.read()
    results.append([None if status is None else os.waitstatus_to_exitcode(
        status), err.read(), json.loads(loaded) if loaded else None, seconds])
print(json.dumps(results))
"""
# What a bad value of each kind of flag is: one that no flag of that kind
# takes. A path that cannot be made or read: under /sys, not even by root.
_BAD_VALUES = {
    int: ["x", "-1"],
    float: ["x", "nan", "-1", "inf"],
    bool: ["maybe"],
    tuple: ["x", "nan", "-1"],
    str: [UNWRITABLE + "/x"],
    "choice": ["nonesuch"],
}
# Each command line: its module, the dataclasses of its flags, and flags
# that keep a value that slips through cheap (it would train otherwise).
_ABSL_COMMANDS = {
    "train": ([config_lib.TrainConfig], ["--steps=2", "--noprogress"]),
    "reproduce": ([reproduce.Options, presets.Settings], ["--trials=1"]),
    "tuning": ([tuning_options.Options], []),
    "noise_study": ([noise_study.Options], ["--trials=1"]),
    "wall_time": ([wall_time.Options], ["--trials=1"]),
    "cnn_study": ([cnn.Options], ["--scale=cpu_smoke"]),
    "bounds_table": ([bounds_table.Options], ["--T=5"]),
}


def _flag_cases(settings, base, tmp):
  """[arguments] of each flag of the dataclasses `settings`, with each bad
  value of its kind, after `base`."""
  cases = []
  for field in (f for cls in settings for f in dataclasses.fields(cls)):
    if "help" not in field.metadata:
      continue
    kind = ("choice"
            if field.metadata["choices"] else flags_lib._base_type(field.type))
    for value in _BAD_VALUES[kind]:
      cases.append(
          [f"--output_dir={tmp}/runs", *base, f"--{field.name}={value}"]
          if field.name != "output_dir" else [*base, f"--output_dir={value}"])
  return cases


def _walked(module, cases, limit=60):
  """[(arguments, status, stderr, TensorFlow loaded, seconds)] of `cases`."""
  result = subprocess.run(
      [sys.executable, "-c", _WALK, module,
       json.dumps(cases),
       str(limit)],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=60 + limit * len(cases),
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, result.stderr[-3000:]
  return [(case, *outcome)
          for case, outcome in zip(cases, json.loads(result.stdout))]


def _assert_each_ends_in_one_line_before_tensorflow(walked):
  failures = []
  for case, status, stderr, loaded, seconds in walked:
    lines = stderr.strip().splitlines()
    if (status in (0, None) or loaded or len(lines) != 1 or
        "Traceback" in stderr or seconds > 20):
      failures.append(f"{case}: status {status}, TensorFlow loaded "
                      f"{loaded}, {seconds:.1f} s, stderr {stderr[-500:]!r}")
  assert not failures, "\n".join(failures)


@pytest.mark.parametrize("command", sorted(_ABSL_COMMANDS))
def test_every_flag_of_a_command_line_refuses_bad_values_before_tensorflow(
    tmp_path, command):
  settings, base = _ABSL_COMMANDS[command]
  cases = _flag_cases(settings, base, tmp_path)
  # Values of their kind that these flags refuse too.
  cases += {
      "train": [["--data_dir=" + UNWRITABLE]],
      "reproduce": [["--trials=1000000000"], ["--workers=1000000"],
                    ["--sweep_amplitudes="]],
      "tuning": [["--seeds="], ["--seeds=1,1"], ["--seeds=1.5"],
                 ["--amplitudes="], ["--decays=0.5,0.5"],
                 ["--adaptive_lr_factors=1"], ["--workers=1000000"],
                 ["--steps=0"], [f"--report={tmp_path}"], ["--stage2_seeds=9"]],
      "noise_study": [["--trials=0"], ["--trials=1000000000"],
                      ["--workers=1000000"]],
      "wall_time": [["--amplitudes="], ["--amplitudes=1,1"],
                    [f"--report={tmp_path}"], ["--trials=1000000000"]],
      "cnn_study": [["--workers=1000000"], ["--epochs=0"], ["--fit_seconds=0"],
                    ["--epochs=2", "--fit_seconds=60"], [f"--tuned={tmp_path}"],
                    ["--check"],
                    ["--stage=recompute", f"--report_dir={tmp_path}/none"]],
      "bounds_table": [["--T=0"], ["--n=0"]],
  }[command]
  walked = _walked(f"tf_adasamp.experiment.{command}", cases)
  _assert_each_ends_in_one_line_before_tensorflow(walked)
  # Nothing was written where a run would go.
  assert not os.path.exists(tmp_path / "runs") or not os.listdir(
      tmp_path / "runs")


def test_the_other_command_lines_refuse_bad_arguments_before_tensorflow(
    tmp_path):
  tfrecord = tmp_path / "a.tfrecord"
  tfrecord.write_bytes(b"")
  (tmp_path / "runs").mkdir()
  walked = []
  for module, cases in {
      "tf_adasamp.experiment.demo": [["--bogus"], ["stray"]],
      "tf_adasamp.experiment.refresh": [["--bogus"], ["--check", "x"]],
      "tf_adasamp.sources": [
          [],
          [str(tfrecord)],
          ["--bogus", str(tfrecord), "o.ar"],
          [str(tmp_path / "none"),
           str(tmp_path / "o.ar")],
          [str(tmp_path), str(tmp_path / "o.ar")],
          [str(tfrecord), str(tfrecord)],
          [str(tfrecord), str(tmp_path)],
          [str(tfrecord), UNWRITABLE + "/o.ar"],
          [str(tfrecord),
           str(tmp_path / "o.ar"), "--group_size=0"],
          [str(tfrecord),
           str(tmp_path / "o.ar"), "--group_size=x"],
          [str(tfrecord),
           str(tmp_path / "o.ar"), "--compression=LZ4"],
      ],
      "tf_adasamp.experiment.carry": [
          [],
          ["pack"],
          [
              "pack", f"--runs_dir={tmp_path}/none",
              f"--carry_dir={tmp_path}/out"
          ],
          ["pack", "--runs_dir=", f"--carry_dir={tmp_path}/out"],
          [
              "pack", f"--runs_dir={tmp_path}/runs",
              f"--carry_dir={tmp_path}/out", "--skip=../x"
          ],
          [
              "unpack", f"--carry_dir={tmp_path}/none",
              f"--runs_dir={tmp_path}/runs"
          ],
          [
              "unpack", f"--carry_dir={tmp_path}", f"--runs_dir={tmp_path}/r",
              "--max_bytes=-1"
          ],
          [
              "unpack", f"--carry_dir={tmp_path}", f"--runs_dir={tmp_path}/r",
              "--max_bytes=x"
          ],
          ["bogus"],
      ],
  }.items():
    walked += _walked(module, cases)
  _assert_each_ends_in_one_line_before_tensorflow(walked)
  assert sorted(os.listdir(tmp_path)) == ["a.tfrecord", "runs"]
