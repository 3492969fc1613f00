"""One way to define the command lines' absl flags: from dataclass fields.

Each CLI describes its options as a frozen dataclass whose flag fields are
made with `option(default, help)`; `define(cls)` defines one absl flag per
such field (its type from the annotation, choices from `option`; a `tuple`
is a comma-separated list of numbers, a `tuple[str, ...]` one of words), and
`parse(program, cls)` builds the dataclass from the parsed flags, so a bad
value is reported by the dataclass's own checks. `run` runs a CLI under
absl, and `interrupted` ends one for a Ctrl-C.
"""

import dataclasses
import os
import sys
import types
import typing

from absl import app
from absl import flags
from absl import logging

FLAGS = flags.FLAGS
# The flags `define` makes are key flags of the module that calls it (the
# command line's), as if it had called DEFINE_* itself: --help lists them.
flags.disclaim_key_flags()


def option(default, help, choices=None):
  """A dataclass field that is also a command-line flag."""
  return dataclasses.field(default=default,
                           metadata={
                               "help": help,
                               "choices": choices
                           })


def _flag_fields(cls):
  return [f for f in dataclasses.fields(cls) if "help" in f.metadata]


def _without_none(annotation):
  """`int` for `int`, `int | None`, `Optional[int]`."""
  if isinstance(annotation, str):
    raise TypeError(f"use real annotations, not the string {annotation!r}")
  if typing.get_origin(annotation) in (typing.Union, types.UnionType):
    (annotation,) = [
        a for a in typing.get_args(annotation) if a is not type(None)
    ]
  return annotation


def _base_type(annotation):
  """`int` for `int`, `int | None`, `Optional[int]`; `tuple` for tuples."""
  annotation = _without_none(annotation)
  return typing.get_origin(annotation) or annotation


def _holds_strings(annotation):
  """Whether a tuple field holds strings (`tuple[str, ...]`), not numbers
  (`tuple`)."""
  return typing.get_args(_without_none(annotation)) == (str, Ellipsis)


def define(cls, unset_defaults=False):
  """Defines a flag for each `option` field of dataclass `cls`.

  Args:
    cls: the dataclass.
    unset_defaults: give every flag the default None (for options whose
      default comes from elsewhere, e.g. a preset), saying so in its help.
  """
  definers = {
      int: flags.DEFINE_integer,
      float: flags.DEFINE_float,
      str: flags.DEFINE_string,
      bool: flags.DEFINE_bool,
      tuple: flags.DEFINE_list
  }
  for field in _flag_fields(cls):
    default = None if unset_defaults else field.default
    help_text = field.metadata["help"]
    if unset_defaults:
      help_text += " (default: the preset's)"
    if field.metadata["choices"]:
      flags.DEFINE_enum(field.name, default, field.metadata["choices"],
                        help_text)
    else:
      if isinstance(default, tuple):  # DEFINE_list parses strings.
        default = [v if isinstance(v, str) else f"{v:g}" for v in default]
      definers[_base_type(field.type)](field.name, default, help_text)


def parse(program, cls, **extra):
  """`cls` from the parsed flags (and `extra` fields); a bad value ends the
  program with one line naming `program`."""
  try:
    return cls(**{**values(cls), **extra})
  except (TypeError, ValueError) as error:
    sys.exit(f"{program}: {error}")


def values(cls, skip_unset=False):
  """{field name: parsed flag value} for the `option` fields of `cls`."""
  result = {}
  for field in _flag_fields(cls):
    value = FLAGS[field.name].value
    if value is None and skip_unset:
      continue
    if _base_type(field.type) is tuple and value is not None:
      value = tuple(value if _holds_strings(field.type) else (
          _number(v, field.name) for v in value))
    result[field.name] = value
  return result


def _number(text, name):
  try:
    return float(text)
  except ValueError as error:
    raise ValueError(f"--{name} takes numbers, got {text!r}") from error


def _check_flagfiles(program, arguments, seen=()):
  """Ends the program in one line if a --flagfile among `arguments` (or
  among those of a flagfile they name) is not a regular file: absl would
  wait forever for a FIFO's writer."""
  for at, argument in enumerate(arguments):
    name, equals, path = argument.lstrip("-").partition("=")
    if name != "flagfile" or not argument.startswith("-"):
      continue
    if not equals:  # --flagfile PATH
      path = arguments[at + 1] if at + 1 < len(arguments) else ""
    if not path or path in seen:
      continue  # absl says what is wrong with those
    if os.path.exists(path) and not os.path.isfile(path):
      sys.exit(f"{program}: --flagfile {path} is not a regular file")
    try:
      with open(path, encoding="utf-8", errors="replace") as f:
        lines = [line.strip() for line in f]
    except OSError:
      continue  # absl names the file and why
    _check_flagfiles(program, lines, (*seen, path))


def command(module, arguments):
  """The command line `python -m <module> --name=value ...` that a report
  names as the one that reproduces it; a tuple's items joined by commas."""
  return " ".join([f"python -m {module}"] + [
      f"--{name}=" +
      (",".join(map(str, value)) if isinstance(value, tuple) else str(value))
      for name, value in arguments.items()
  ])


def interrupted(program, outcome=None):
  """Ends the program for a Ctrl-C, with one line; `outcome` says what
  became of its work and how to go on."""
  print(f"\n{program}: interrupted" + (f"; {outcome}" if outcome else ""),
        file=sys.stderr)
  sys.exit(130)  # the shell's status for a run ended by Ctrl-C


def run(program, define_flags, main, quiet=False):
  """Defines the flags with `define_flags`, then runs `main` under absl.

  Flags are defined here, not at import, because the CLIs share flag names.
  absl's --help lists the flags of the module that sys.argv[0] names, which
  under a console script (tf-adasamp-train) is the script, not the module
  defining them: so they are registered for it too, and --help opens with
  that module's docstring, which absl takes from __main__. `main` takes no
  arguments; a flag that does not parse and stray positional arguments end
  the program with one line naming `program` (a --flagfile's stray lines
  counted, not shown), and so does a Ctrl-C that `main` leaves to it.
  Where `quiet`, absl logs warnings and errors alone unless --verbosity is
  given.
  """
  define_flags()
  for flag in FLAGS.get_key_flags_for_module(define_flags.__module__):
    FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  script = sys.modules["__main__"]
  if not script.__doc__:
    script.__doc__ = sys.modules[define_flags.__module__].__doc__

  def parse_flags(argv):
    _check_flagfiles(program, argv[1:])
    try:
      return FLAGS(argv)
    except flags.Error as error:
      # One line, where absl's own parser adds a second.
      sys.exit(
          f"{program}: Flags parsing error: {' '.join(str(error).split())}")

  def checked_main(argv):
    typed = [arg for arg in argv[1:] if arg in sys.argv[1:]]
    if typed:
      sys.exit(f"{program}: unexpected arguments {typed}")
    if len(argv) > 1:
      # Lines of a --flagfile that are not flags; not shown, as the file may
      # be anything (a secret, say).
      sys.exit(f"{program}: --flagfile holds {len(argv) - 1} lines that are "
               "not flags (--name=value, one a line); not shown")
    if quiet and not FLAGS["verbosity"].present:
      # Keeps TensorFlow's and tfds' INFO lines out of a progress bar and
      # a study's output.
      logging.set_verbosity(logging.WARNING)
    main()

  try:
    try:
      app.run(checked_main, flags_parser=parse_flags)
    except KeyboardInterrupt:
      interrupted(program)
    finally:
      sys.stdout.flush()  # here, not at exit, where the error is Python's
  except BrokenPipeError:
    # The reader of stdout left (`--help | head`): end quietly, as Python's
    # documentation advises (the signal module's note on SIGPIPE).
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(1)
