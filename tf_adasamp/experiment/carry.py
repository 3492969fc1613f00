"""A study's runs carried between machines that keep no files.

`pack` writes a runs directory as the few files a lent device gives back,
`unpack` puts them into a runs directory where the study resumes
(tf_adasamp.experiment.study.carry says what each archive holds). No
TensorFlow here.

  python -m tf_adasamp.experiment.carry pack --runs_dir=RUNS --carry_dir=OUT
      [--skip=FOLDER,...]
  python -m tf_adasamp.experiment.carry unpack --carry_dir=OUT --runs_dir=RUNS
      [--max_bytes=N]

A refusal is one line on stderr and exit status 1.
"""

import argparse
import sys

from tf_adasamp.experiment.study import carry


class _OneLineErrorParser(argparse.ArgumentParser):
  """Ends bad arguments in one line, naming the program, and exit status
  1, as every refusal here."""

  def error(self, message):
    self.exit(1, f"python -m tf_adasamp.experiment.carry: {message}\n")


def main(argv=None):
  """The command line (module docstring); `argv` as sys.argv[1:]."""
  parser = _OneLineErrorParser(prog="python -m tf_adasamp.experiment.carry",
                               description=__doc__.splitlines()[0])
  commands = parser.add_subparsers(dest="command",
                                   required=True,
                                   parser_class=_OneLineErrorParser)
  packing = commands.add_parser("pack", help=carry.pack.__doc__.splitlines()[0])
  packing.add_argument("--runs_dir", required=True)
  packing.add_argument("--carry_dir",
                       required=True,
                       help="the folder to write the archives to")
  packing.add_argument("--skip",
                       default="",
                       help="comma-separated folders of --runs_dir to leave "
                       "out (runs that never resume)")
  unpacking = commands.add_parser("unpack",
                                  help=carry.unpack.__doc__.splitlines()[0])
  unpacking.add_argument("--carry_dir",
                         required=True,
                         help="the folder to read the archives from")
  unpacking.add_argument("--runs_dir", required=True)
  unpacking.add_argument("--max_bytes",
                         type=int,
                         default=carry.MAX_UNPACKED_BYTES,
                         help="the most bytes the archives may expand to")
  args = parser.parse_args(argv)
  try:
    if args.command == "pack":
      cut = carry.pack(args.runs_dir,
                       args.carry_dir,
                       skip=tuple(filter(None, args.skip.split(","))))
      print(f"packed {args.runs_dir} into {args.carry_dir}, with the "
            f"checkpoints of {len(cut)} cut runs")
    elif carry.unpack(args.carry_dir, args.runs_dir, args.max_bytes):
      print(f"unpacked {args.carry_dir} into {args.runs_dir}")
    else:
      print(f"{args.runs_dir} already holds every run of {args.carry_dir}, "
            "as far on or further: left as it is")
  except (ValueError, OSError) as error:
    sys.exit(f"{parser.prog}: {error}")


if __name__ == "__main__":
  main()
