"""What the trainer's and the experiment runner's entry points share."""

import sys

from absl import app
from absl import flags


def run(define_flags, main):
  """Defines the flags with `define_flags`, then runs `main` under absl.

  The flags are defined here, not at import, because the trainer and the
  experiment runner share flag names. absl's --help lists the flags of the
  module that sys.argv[0] names, which under a console script
  (tf-adasamp-train) is the script, not the module defining them: so they
  are registered for it too.
  """
  define_flags()
  for flag in flags.FLAGS.get_key_flags_for_module(define_flags.__module__):
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  app.run(main)
