"""`python -m tf_adasamp.sources INPUT.tfrecord... OUTPUT.array_record`."""

import argparse
import os
import signal
import stat
import sys

from tf_adasamp import _validation
from tf_adasamp.sources._lazy import tf
from tf_adasamp.sources._tfrecords import _is_url
from tf_adasamp.sources._writer import _refuse_writing_over_an_input
from tf_adasamp.sources._writer import write_array_record


class _OneLineErrorParser(argparse.ArgumentParser):
  """Ends bad arguments in one line and exit status 1."""

  def error(self, message):
    self.exit(1, f"error: {message}\n")


def _check_command(args):
  """Checks the command's arguments and files before TensorFlow loads.

  Raises:
    ValueError: naming the argument or file: a group_size below 1, an
      input that is not a regular file (a FIFO would wait for a writer),
      an output that is one of the inputs, is not a regular file, or whose
      directory is missing or not writable.
    OSError: an input that cannot be read.
  """
  _validation.positive_int(args.group_size, "group_size")
  for path in (path for path in args.inputs if not _is_url(path)):
    try:
      mode = os.stat(path).st_mode
    except OSError as error:
      raise OSError(
          f"cannot read {path!r}: {error.strerror or error}") from None
    if not stat.S_ISREG(mode):
      raise ValueError(f"the input {path!r} is not a regular file")
  _refuse_writing_over_an_input(args.inputs, args.output)
  target = os.path.realpath(args.output)
  if os.path.exists(target) and not os.path.isfile(target):
    raise ValueError(f"cannot write {args.output!r}: not a regular file")
  directory = os.path.dirname(target)
  if not os.path.isdir(directory):
    raise ValueError(f"cannot write {args.output!r}: its directory "
                     f"{directory!r} does not exist")
  if not os.access(directory, os.W_OK):
    raise ValueError(f"cannot write {args.output!r}: its directory "
                     f"{directory!r} is not writable")


class _Terminated(KeyboardInterrupt):
  """SIGTERM, which the command takes as Ctrl-C."""


def _terminated(signum, frame):
  del signum, frame
  raise _Terminated


def main(argv=None):
  """Runs `python -m tf_adasamp.sources INPUT.tfrecord... OUTPUT.array_record`.

  Args:
    argv: the command line's arguments; None for `sys.argv[1:]`.

  Returns:
    The exit status: 0 once the file is written, 1 on an error (printed in
    one line).
  """
  parser = _OneLineErrorParser(
      prog="python -m tf_adasamp.sources",
      description="Copies the records of TFRecord files, in order, into one "
      "ArrayRecord file that the adaptive stage reads by index.")
  parser.add_argument("inputs", nargs="+", help="TFRecord files")
  parser.add_argument("output", help="the ArrayRecord file to write")
  parser.add_argument("--compression",
                      default="",
                      choices=["", "GZIP", "ZLIB"],
                      help="the TFRecord files' compression")
  parser.add_argument("--group_size",
                      type=int,
                      default=1,
                      help="records a chunk (see write_array_record)")
  args = parser.parse_args(argv)
  # As Ctrl-C: the temporary file goes, the output stays as it was.
  previous = signal.signal(signal.SIGTERM, _terminated)
  try:
    _check_command(args)
    count = write_array_record(tf.data.TFRecordDataset(
        args.inputs, compression_type=args.compression),
                               args.output,
                               group_size=args.group_size)
  except (OSError, TypeError, ValueError) as error:
    print(f"error: {_first_line(error)}", file=sys.stderr)
    return 1
  except KeyboardInterrupt as stop:
    terminated = isinstance(stop, _Terminated)
    print(
        f"{'terminated' if terminated else 'interrupted'}: {args.output} "
        "is as it was",
        file=sys.stderr)
    return 128 + (signal.SIGTERM if terminated else signal.SIGINT)
  # Last: an except clause is read only as an error reaches it, and this
  # one loads TensorFlow, which raised it.
  except tf.errors.OpError as error:
    print(f"error: {_first_line(error)}", file=sys.stderr)
    return 1
  finally:
    signal.signal(signal.SIGTERM, previous)
  print(f"wrote {count} records to {args.output}")
  return 0


def _first_line(error):
  text = (getattr(error, "message", None) or str(error)).strip()
  return text.splitlines()[0] if text else type(error).__name__
