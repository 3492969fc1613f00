"""A run directory against a second writer, edited checkpoints and records,
and bad data: each refused in one line naming the file and the reason, the
directory left as it was (issue 46)."""

import dataclasses
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import checkpoint_edits
from run_records import tiny_config
from tf_adasamp import sources
from tf_adasamp.experiment.training import disk_data
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import run_files

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEP_KEY = "step/.ATTRIBUTES/VARIABLE_VALUE"
ITERATIONS_KEY = "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"


@pytest.fixture
def run(digits, tmp_path):
  """The config of a finished 4-step run in tmp_path/run (records 0, 2, 4;
  checkpoints 2 and 4), to resume to step 6."""
  config = tiny_config(output_dir=str(tmp_path / "run"))
  loop.train(config, data=digits)
  return dataclasses.replace(config, resume=True, steps=6)


def snapshot(directory):
  """Every file under `directory`, by path, with its bytes (a FIFO with its
  mode)."""
  files = {}
  for folder, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(folder, name)
      if not os.path.isfile(path):  # a FIFO: opening it would wait
        files[os.path.relpath(path, directory)] = os.stat(path).st_mode
        continue
      with open(path, "rb") as f:
        files[os.path.relpath(path, directory)] = f.read()
  return files


def refused(config, digits, message):
  """Trains `config`: refused with a one-line RunError holding `message`,
  the run directory as it was."""
  before = snapshot(config.output_dir)
  with pytest.raises(run_files.RunError) as raised:
    loop.train(config, data=digits)
  assert message in str(raised.value)
  assert "\n" not in str(raised.value)
  assert snapshot(config.output_dir) == before
  return str(raised.value)


# One writer per run directory (item 7).

HOLD_LOCK = """
import sys
from tf_adasamp.experiment.training import run_files
with run_files.writer_lock(sys.argv[1]):
  print("held", flush=True)
  sys.stdin.read()
"""


@pytest.fixture
def held(run):
  """A process holding the writer lock of `run`'s directory."""
  holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, run.output_dir],
                            cwd=ROOT,
                            stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE,
                            text=True)
  assert holder.stdout.readline() == "held\n"
  yield holder
  if holder.poll() is None:
    holder.kill()
  holder.wait()


def test_a_second_writer_of_a_run_directory_is_refused_and_changes_nothing(
    run, digits, held):
  message = refused(run, digits, f"{run.output_dir} is in use")
  assert run_files.LOCK_FILE in message
  # A new run there too, whatever it would have done.
  with pytest.raises(run_files.RunInUseError):
    with run_files.writer_lock(run.output_dir):
      pass


def resume_from_the_command_line(run):
  """The trainer's command line resuming `run` for 6 steps, its result."""
  return subprocess.run([
      sys.executable, "-m", "tf_adasamp.experiment.train", "--model=logistic",
      "--steps=6", "--eval_interval=2", "--batch_size=16",
      "--learning_rate=0.1", "--noprogress", "--resume",
      f"--output_dir={run.output_dir}"
  ],
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                        timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def test_the_cli_refuses_a_second_trainer_in_one_line(run, held, tmp_path):
  before = snapshot(run.output_dir)
  result = resume_from_the_command_line(run)
  assert result.returncode == 1
  assert "Traceback" not in result.stderr
  assert (f"tf-adasamp-train: {run.output_dir} is in use: another trainer "
          "writes to it" in result.stderr)
  assert snapshot(run.output_dir) == before


def test_a_killed_writers_lock_file_is_not_a_held_lock(run, digits, held):
  held.send_signal(signal.SIGKILL)
  held.wait()
  # The killed writer could not remove its lock file; the kernel released
  # its lock.
  assert os.path.exists(os.path.join(run.output_dir, run_files.LOCK_FILE))
  records = loop.train(run, data=digits)
  assert [r["step"] for r in records] == [0, 2, 4, 6]
  assert not os.path.exists(os.path.join(run.output_dir, run_files.LOCK_FILE))


def test_the_writer_lock_is_released_however_the_run_ends(run, digits):
  with pytest.raises(run_files.RunExistsError):
    loop.train(dataclasses.replace(run, amplitude=2.0), data=digits)
  with pytest.raises(KeyboardInterrupt):
    loop.train(run, data=digits, stop_requested=lambda: True)
  with run_files.writer_lock(run.output_dir):
    pass
  assert not os.path.exists(os.path.join(run.output_dir, run_files.LOCK_FILE))


def test_a_lock_file_removed_by_its_releasing_holder_is_opened_again(
    tmp_path, monkeypatch):
  # A writer that opened the lock file while its holder held it, and locks
  # it after the holder removed it and let go, holds a file no other writer
  # opens: it opens the new one instead.
  path = str(tmp_path / run_files.LOCK_FILE)
  with run_files.writer_lock(str(tmp_path)):
    stale = os.open(path, os.O_RDWR)
  opened, real_open = [], os.open

  def first_the_stale_file(*args, **kwargs):
    opened.append(args)
    return os.dup(stale) if len(opened) == 1 else real_open(*args, **kwargs)

  monkeypatch.setattr(run_files.os, "open", first_the_stale_file)
  try:
    with run_files.writer_lock(str(tmp_path)):
      assert len(opened) == 2
      with pytest.raises(run_files.RunInUseError):
        with run_files.writer_lock(str(tmp_path)):
          pass
  finally:
    os.close(stale)


def test_a_lock_file_that_is_a_link_is_refused_not_followed(tmp_path):
  (tmp_path / run_files.LOCK_FILE).symlink_to(tmp_path / "elsewhere")
  with pytest.raises(run_files.RunError,
                     match=f"^cannot lock {tmp_path}: cannot open "):
    with run_files.writer_lock(str(tmp_path)):
      pass
  assert not (tmp_path / "elsewhere").exists()


# Edited checkpoints (items 8, 13 and 14).


def last_checkpoint(config):
  return tf.train.latest_checkpoint(
      os.path.join(config.output_dir, run_files.CHECKPOINTS_DIR))


@pytest.mark.parametrize("step", [-5, 10**6, 3])
def test_resume_refuses_a_checkpoint_whose_step_is_not_its_number(
    run, digits, step):
  path = last_checkpoint(run)  # ckpt-4
  checkpoint_edits.edited_checkpoint(path,
                                     STEP_KEY,
                                     lambda value: np.int64(step),
                                     copy=path)
  checkpoint_edits.forge_digest(path)
  refused(run, digits,
          f"cannot resume from {path}: its step {step} is not its number")


def test_resume_refuses_a_checkpoint_past_the_runs_length(run, digits):
  # Renamed and listed as the latest, its step its number: still past the
  # run's 6 steps.
  directory = os.path.join(run.output_dir, run_files.CHECKPOINTS_DIR)
  far = os.path.join(directory, "ckpt-1000000")
  checkpoint_edits.edited_checkpoint(last_checkpoint(run), STEP_KEY,
                                     lambda value: np.int64(10**6), far)
  checkpoint_edits.edited_checkpoint(far, ITERATIONS_KEY,
                                     lambda value: np.int64(10**6), far)
  checkpoint_edits.forge_digest(far)
  tf.compat.v1.train.update_checkpoint_state(directory, far)
  refused(run, digits, "its step 1000000 is past the run's 6 steps")


@pytest.mark.parametrize("iterations", [-1, 5])
def test_resume_refuses_a_checkpoint_whose_optimizer_updates_are_not_its_step(
    run, digits, iterations):
  path = last_checkpoint(run)
  checkpoint_edits.edited_checkpoint(path,
                                     ITERATIONS_KEY,
                                     lambda value: np.int64(iterations),
                                     copy=path)
  checkpoint_edits.forge_digest(path)
  refused(run, digits,
          f"its optimizer's updates, {iterations}, are not its step 4")


def test_resume_refuses_a_checkpoint_whose_files_are_not_those_it_wrote(
    run, digits):
  # A value the other checks cannot tell from the run's own: the random
  # state of the sampler's generator.
  path = last_checkpoint(run)
  checkpoint_edits.edited_checkpoint(path,
                                     "generator_state",
                                     lambda state: state + 1,
                                     copy=path)
  refused(
      run, digits, f"cannot resume from {path}: its files are not those the "
      f"run wrote (their SHA-256 is not the one in {path}.sha256)")


PERMUTATION_KEY = "sampler/permutation/.ATTRIBUTES/VARIABLE_VALUE"
DRAWS_KEY = "sampler/draws/.ATTRIBUTES/VARIABLE_VALUE"


@pytest.mark.parametrize("key,edit,message", [
    (PERMUTATION_KEY, lambda p: p * 0, "permutation is not that of its epoch"),
    (PERMUTATION_KEY, lambda p: p + 1500, "permutation is not that of"),
    (DRAWS_KEY, lambda d: np.int64(-5), "draws -5 and epoch 0 must be >= 0"),
])
def test_resume_refuses_a_reshuffling_state_that_no_run_reaches(
    digits, tmp_path, key, edit, message):
  config = tiny_config(sampling="reshuffle", output_dir=str(tmp_path / "run"))
  loop.train(config, data=digits)
  resumed = dataclasses.replace(config, resume=True, steps=6)
  path = last_checkpoint(resumed)
  checkpoint_edits.edited_checkpoint(path, key, edit, copy=path)
  checkpoint_edits.forge_digest(path)
  refused(
      resumed, digits,
      f"cannot resume from {path}: it does not hold this trainer's state "
      f"(the reshuffling sampler's {message}")


@pytest.mark.parametrize("spelling", ["absolute", "relative", "in the list"])
def test_resume_refuses_a_checkpoint_state_that_names_another_runs_checkpoint(
    run, digits, tmp_path, spelling):
  other = tiny_config(output_dir=str(tmp_path / "other"), seed=1)
  loop.train(other, data=digits)
  directory = os.path.join(run.output_dir, run_files.CHECKPOINTS_DIR)
  theirs = os.path.join(other.output_dir, run_files.CHECKPOINTS_DIR, "ckpt-4")
  ours = last_checkpoint(run)
  if spelling == "relative":
    theirs = os.path.relpath(theirs, directory)  # ../../other/checkpoints/..
  latest, listed = (ours,
                    [theirs, ours]) if spelling == "in the list" else (theirs,
                                                                       [theirs])
  with open(os.path.join(directory, "checkpoint"), "w") as f:
    f.write(f'model_checkpoint_path: "{latest}"\n' + "".join(
        f'all_model_checkpoint_paths: "{path}"\n' for path in listed))
  refused(run, digits, f"{os.path.join(directory, 'checkpoint')} names ")
  refused(run, digits, f"outside {directory}: a run resumes its own")


def test_resume_refuses_an_older_checkpoint_than_the_records(run, digits):
  # The checkpoint state names ckpt-2 as the latest; records go to step 4.
  directory = os.path.join(run.output_dir, run_files.CHECKPOINTS_DIR)
  older = os.path.join(directory, "ckpt-2")
  tf.compat.v1.train.update_checkpoint_state(
      directory, older, [older, last_checkpoint(run)])
  refused(run, digits, "metrics.jsonl records step 4, past its step 2")


def _truncate(data_file):
  os.truncate(data_file, os.path.getsize(data_file) // 2)


def _zero(data_file):
  with open(data_file, "r+b") as f:
    f.write(bytes(os.path.getsize(data_file)))


@pytest.mark.parametrize("damage", [_truncate, _zero])
def test_resume_refuses_a_damaged_data_file_in_one_line(run, digits, damage):
  path = last_checkpoint(run)
  damage(f"{path}.data-00000-of-00001")
  refused(run, digits, f"cannot resume from {path}: its files are not those")
  checkpoint_edits.forge_digest(path)
  refused(run, digits, f"cannot resume from {path}: it does not hold")


def test_resume_refuses_a_corrupt_object_graph_in_one_line(run, digits):
  path = last_checkpoint(run)
  checkpoint_edits.edited_checkpoint(path,
                                     "_CHECKPOINTABLE_OBJECT_GRAPH",
                                     lambda value: b"\n\xff\xff garbage",
                                     copy=path)
  checkpoint_edits.forge_digest(path)
  refused(run, digits, f"cannot resume from {path}: it does not hold")


# Settings and records (items 15, 16 and 20).


def test_resume_refuses_a_run_without_its_config_json(run, digits):
  os.unlink(os.path.join(run.output_dir, run_files.CONFIG_FILE))
  refused(dataclasses.replace(run, amplitude=2.0), digits,
          "config.json is missing")


def test_a_length_past_2_to_the_53_steps_writes_nothing(run, digits, tmp_path):
  new = tiny_config(epochs=1e300, output_dir=str(tmp_path / "new"))
  with pytest.raises(run_files.RunError, match="more steps than the 2"):
    loop.train(new, data=digits)
  assert not os.path.exists(new.output_dir)
  refused(dataclasses.replace(run, epochs=1e300), digits,
          "more steps than the 2**53")


@pytest.mark.parametrize("steps", [[4, 2, 0], [0, 2, 2, 4], [-2, 0]])
def test_metrics_whose_steps_do_not_increase_are_refused(tmp_path, steps):
  path = tmp_path / run_files.METRICS_FILE
  path.write_text("".join(f'{{"step": {step}}}\n' for step in steps))
  with pytest.raises(run_files.RunError,
                     match=f"^{path} line [0-9]+ records step -?[0-9]+ .*"
                     "increasing steps"):
    run_files.read_metrics(str(tmp_path))


def test_resume_refuses_reversed_metrics(run, digits):
  path = os.path.join(run.output_dir, run_files.METRICS_FILE)
  with open(path) as f:
    lines = f.readlines()
  with open(path, "w") as f:
    f.writelines(reversed(lines))
  refused(run, digits, f"{path} line 2 records step 2 after step 4")


# Bad training records past record 0 (item 9) and a model too large (13).


def write_images(path, images, labels):
  """Writes (image, label) records, and a bytes image as the record."""
  sources.write_array_record([
      image if isinstance(image, bytes) else sources.encode_image_example(
          image, label) for image, label in zip(images, labels)
  ], str(path))
  return str(path)


@pytest.fixture
def image_files(tmp_path):
  """A 40-record training file and a 10-record test file of 8x8 images."""
  pytest.importorskip("array_record")
  rng = np.random.default_rng(0)
  images = list(rng.integers(0, 256, [40, 8, 8, 1], dtype=np.uint8))
  labels = [int(label) for label in rng.integers(0, 10, 40)]
  train = write_images(tmp_path / "train.array_record", images, labels)
  test = write_images(tmp_path / "test.array_record", images[:10], labels[:10])
  return images, labels, train, test


@pytest.mark.parametrize("record,message", [
    ((None, 15), "record 37 holds label 15, outside [0, num_classes=10)"),
    ((None, -2), "record 37 holds label -2"),
    ((np.zeros([14, 14, 1], np.uint8), 3),
     "record 37 holds an image of shape (14, 14, 1), record 0 one of "
     "(8, 8, 1)"),
    ((b"\x00undecodable", None), "record 37 of ArrayRecord file"),
])
def test_a_bad_training_record_past_record_0_is_refused_before_any_write(
    image_files, digits, tmp_path, record, message):
  images, labels, _, test = image_files
  image, label = record
  images[37] = images[37] if image is None else image
  labels[37] = labels[37] if label is None else label
  bad = write_images(tmp_path / "bad.array_record", images, labels)
  with pytest.raises(run_files.RunError) as raised:
    disk_data.load(bad, test, 10)
  assert str(raised.value).startswith(f"data_path {bad!r}")
  assert message in str(raised.value)
  config = tiny_config(data_path=bad,
                       test_data_path=test,
                       num_classes=10,
                       output_dir=str(tmp_path / "run"))
  with pytest.raises(run_files.RunError, match=f"^data_path {bad!r}"):
    loop.train(config)
  assert not os.path.exists(config.output_dir)


def test_a_model_too_large_for_memory_is_one_line(image_files, tmp_path):
  _, _, train, test = image_files
  config = tiny_config(data_path=train,
                       test_data_path=test,
                       num_classes=2_000_000_000,
                       output_dir=str(tmp_path / "run"))
  with pytest.raises(run_files.RunError,
                     match="out of memory .* 2000000000 classes"):
    loop.train(config)
  assert not os.path.exists(
      os.path.join(config.output_dir, run_files.CHECKPOINTS_DIR))


# The data a run trains on (issue 53, item 8).


def test_resume_refuses_a_data_path_replaced_by_other_data_of_its_length(
    image_files, tmp_path):
  images, labels, train, test = image_files
  config = tiny_config(data_path=train,
                       test_data_path=test,
                       num_classes=10,
                       batch_size=8,
                       output_dir=str(tmp_path / "run"))
  loop.train(config)
  resumed = dataclasses.replace(config, resume=True, steps=6)
  # As many records, of the same sizes: other images, other labels.
  write_images(train, images[::-1], labels[::-1])
  before = snapshot(config.output_dir)
  with pytest.raises(run_files.RunError) as raised:
    loop.train(resumed)
  message = str(raised.value)
  assert message.startswith(f"cannot resume the run in {config.output_dir}: "
                            "its data changed since it began (data_path "
                            "mtime_ns: ")
  assert "data_path sha256_of_its_ends: " in message
  assert "; put back the data it trained on, or start over" in message
  assert "\n" not in message and "test_data_path" not in message
  assert snapshot(config.output_dir) == before
  # The command line says so before TensorFlow loads, in one line.
  result = subprocess.run([
      sys.executable, "-c", LOADED_TENSORFLOW, "--model=logistic", "--steps=6",
      "--eval_interval=2", "--batch_size=8", "--learning_rate=0.1",
      "--noprogress", "--resume", f"--data_path={train}",
      f"--test_data_path={test}", "--num_classes=10",
      f"--output_dir={config.output_dir}"
  ],
                          cwd=ROOT,
                          capture_output=True,
                          text=True,
                          timeout=300)
  assert result.returncode == 1
  assert result.stderr.splitlines() == [f"tf-adasamp-train: {message}"]
  assert result.stdout.split() == ["False"]  # TensorFlow not loaded


# The trainer's command line, then whether TensorFlow had loaded.
LOADED_TENSORFLOW = """
import sys
from tf_adasamp.experiment import train
sys.argv[0] = train.PROGRAM
try:
  train.run()
finally:
  print("tensorflow" in sys.modules)
"""


def test_a_data_file_touched_since_names_the_time_to_give_back(
    image_files, tmp_path):
  _, _, train, test = image_files
  config = tiny_config(data_path=train,
                       test_data_path=test,
                       num_classes=10,
                       batch_size=8,
                       output_dir=str(tmp_path / "run"))
  loop.train(config)
  mtime_ns = os.stat(test).st_mtime_ns
  os.utime(test, ns=(mtime_ns + 10**9, mtime_ns + 10**9))
  resumed = dataclasses.replace(config, resume=True, steps=6)
  with pytest.raises(run_files.RunError,
                     match=r"\(test_data_path mtime_ns: \d+ then, \d+ now\); "
                     r"if the file holds the same records, give it back its "
                     rf"time \(touch -d @{mtime_ns / 1e9:.9f} FILE\)"):
    loop.train(resumed)
  os.utime(test, ns=(mtime_ns, mtime_ns))
  assert loop.train(resumed)[-1]["step"] == 6


def test_resume_refuses_other_in_memory_data_under_the_same_name(run, digits):
  relabelled = dataclasses.replace(digits, y_train=(digits.y_train + 1) % 10)
  before = snapshot(run.output_dir)
  with pytest.raises(run_files.RunError,
                     match=r"its data changed since it began \(train sha256: "
                     r"[0-9a-f]{64} then, [0-9a-f]{64} now\)"):
    loop.train(run, data=relabelled)
  assert snapshot(run.output_dir) == before
  records = loop.train(run, data=digits)
  assert records[-1]["step"] == 6


def test_a_run_from_before_data_identities_resumes_and_records_one(run, digits):
  os.remove(os.path.join(run.output_dir, run_files.DATA_FILE))
  loop.train(run, data=digits)
  with open(os.path.join(run.output_dir, run_files.DATA_FILE)) as f:
    assert json.load(f) == json.loads(json.dumps(digits.identity()))


@pytest.mark.parametrize("name", [
    "metrics.jsonl", "config.json", "data.json", "checkpoints/checkpoint",
    "checkpoints/ckpt-4.index", "checkpoints/ckpt-4.sha256"
])
def test_a_fifo_among_a_runs_files_is_refused_without_waiting(run, name):
  # Opening a FIFO to read waits for a writer: in a subprocess, to end.
  path = os.path.join(run.output_dir, name)
  os.remove(path)
  os.mkfifo(path)
  before = snapshot(run.output_dir)
  result = resume_from_the_command_line(run)
  assert result.returncode == 1
  assert f"{path} is not a regular file" in result.stderr.splitlines()[-1] or (
      f"cannot read {path}: not a regular file"
      in result.stderr.splitlines()[-1]), result.stderr
  assert snapshot(run.output_dir) == before
