"""The command line `python -m tf_adasamp.sources` (sources._command)."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import child_process
from source_files import file_bytes
from source_files import write_tfrecord
from tf_adasamp import sources

pytest.importorskip("array_record")


def test_python_m_command_writes_an_array_record_file(tmp_path):
  tfrecord = write_tfrecord(tmp_path / "a.tfrecord", [b"1", b"2"])
  output = str(tmp_path / "out.array_record")
  subprocess.run([sys.executable, "-m", "tf_adasamp.sources", tfrecord, output],
                 env=child_process.environment(),
                 check=True,
                 timeout=300)
  assert len(sources.ArrayRecordSource(output)) == 2


def test_command_converts_tfrecord_files(tmp_path, capsys):
  first = write_tfrecord(tmp_path / "a.tfrecord", [b"1", b"2"])
  second = write_tfrecord(tmp_path / "b.tfrecord", [b"3"])
  output = str(tmp_path / "out.array_record")
  assert sources.main([first, second, output]) == 0
  assert "wrote 3 records" in capsys.readouterr().out
  source = sources.ArrayRecordSource(output)
  assert list(source.read_batch(np.array([2, 0, 1]))) == [b"3", b"1", b"2"]


@pytest.mark.parametrize("arguments", [
    ["{tmp}/missing.tfrecord", "{tmp}/out.array_record"],
    ["{tmp}/a.tfrecord", "{tmp}/no/such/dir/out.array_record"],
    ["{tmp}/a.tfrecord", "{tmp}/out.array_record", "--group_size=0"],
    ["{tmp}/out.array_record"],
])
def test_command_ends_bad_input_in_one_line(tmp_path, capsys, arguments):
  write_tfrecord(tmp_path / "a.tfrecord", [b"1"])
  arguments = [argument.format(tmp=tmp_path) for argument in arguments]
  try:
    status = sources.main(arguments)
  except SystemExit as exit_:
    status = exit_.code
  assert status == 1
  error = capsys.readouterr().err
  assert error.startswith("error: ") and error.count("\n") == 1


def command_error(arguments, capsys):
  """The one line of error that sources.main ends `arguments` with."""
  assert sources.main([str(argument) for argument in arguments]) == 1
  error = capsys.readouterr().err
  assert error.startswith("error: ") and error.count("\n") == 1, error
  return error


@pytest.mark.parametrize("spelling", [
    "same", "dot", "symlink", "hard_link", "linked_directory",
    "second_of_two_inputs"
])
def test_command_refuses_to_write_over_an_input_however_it_is_named(
    tmp_path, capsys, spelling):
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  tfrecord = write_tfrecord(data_dir / "a.tfrecord", [b"1", b"2"])
  other = write_tfrecord(data_dir / "b.tfrecord", [b"3"])
  inputs = [tfrecord]
  if spelling == "symlink":
    (data_dir / "link").symlink_to("a.tfrecord")
    output = data_dir / "link"
  elif spelling == "hard_link":
    os.link(tfrecord, data_dir / "hard")
    output = data_dir / "hard"
  elif spelling == "linked_directory":
    (tmp_path / "alias").symlink_to("data")
    output = tmp_path / "alias" / ".." / "data" / "a.tfrecord"
  elif spelling == "second_of_two_inputs":
    inputs = [other, tfrecord]
    output = f"{data_dir}/./a.tfrecord"
  else:
    output = tfrecord if spelling == "same" else f"{data_dir}/./a.tfrecord"
  before = file_bytes(data_dir)
  names = sorted(os.listdir(data_dir))
  error = command_error([*inputs, output], capsys)
  assert "is the input" in error and "a.tfrecord" in error
  assert file_bytes(data_dir) == before
  assert sorted(os.listdir(data_dir)) == names


def test_python_m_command_given_its_input_as_output_leaves_it_whole(tmp_path):
  tfrecord = write_tfrecord(tmp_path / "a.tfrecord", [b"1", b"2"])
  before = file_bytes(tmp_path)
  result = child_process.ran("tf_adasamp.sources",
                             tfrecord,
                             tfrecord,
                             timeout=300)
  assert result.returncode == 1
  assert result.stderr.splitlines()[-1].startswith("error: the output ")
  assert "wrote" not in result.stdout
  assert file_bytes(tmp_path) == before


@pytest.mark.parametrize("input_state", ["missing", "cut_short"])
@pytest.mark.parametrize("output_exists", [False, True])
def test_command_with_an_input_it_cannot_read_leaves_the_output_as_it_was(
    tmp_path, capsys, input_state, output_exists):
  tfrecord = tmp_path / "a.tfrecord"
  if input_state == "cut_short":
    write_tfrecord(tfrecord, [b"%d" % i for i in range(100)])
    os.truncate(tfrecord, tfrecord.stat().st_size - 3)
  output = tmp_path / "out.array_record"
  if output_exists:
    sources.write_array_record([b"old"] * 5, output)
  before = file_bytes(tmp_path)
  error = command_error([tfrecord, output], capsys)
  assert "a.tfrecord" in error or "truncated" in error, error
  assert file_bytes(tmp_path) == before


# The command, its write stopped by SIGTERM part way: after `sys.argv[1]`
# records, the process sends itself SIGTERM. The write is replaced where the
# command looks it up, in its own module (tf_adasamp/sources/_command.py).
TERMINATED = """
import os, signal, sys
from tf_adasamp import sources
from tf_adasamp.sources import _command
write = sources.write_array_record
stop_after = int(sys.argv.pop(1))

def terminated_part_way(records, path, **kwargs):
  def stream():
    for count, record in enumerate(records.as_numpy_iterator()):
      if count == stop_after:
        os.kill(os.getpid(), signal.SIGTERM)
      yield record
  return write(stream(), path, **kwargs)

_command.write_array_record = terminated_part_way
sys.exit(sources.main(sys.argv[1:]))
"""


def test_the_command_under_sigterm_leaves_the_output_as_it_was(tmp_path):
  tfrecord = write_tfrecord(tmp_path / "in.tfrecord",
                            [b"%d" % i for i in range(100)])
  output = tmp_path / "out.array_record"
  sources.write_array_record([b"old"], output)
  before = file_bytes(tmp_path)
  result = subprocess.run(
      [sys.executable, "-c", TERMINATED, "50", tfrecord,
       str(output)],
      env=child_process.environment(),
      capture_output=True,
      text=True,
      timeout=300)
  assert result.returncode == 128 + signal.SIGTERM, result.stderr
  assert result.stderr.splitlines()[-1] == (
      f"terminated: {output} is as it was")
  assert file_bytes(tmp_path) == before  # no temporary file left
