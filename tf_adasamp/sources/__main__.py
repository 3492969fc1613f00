"""Runs `python -m tf_adasamp.sources` (`_command.main`)."""

import sys

from tf_adasamp.sources._command import main

if __name__ == "__main__":
  sys.exit(main())
