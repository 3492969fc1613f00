"""The environment of the Python processes that tests start."""

import os
import sys


def environment(**overrides):
  """os.environ for a child Python process: TensorFlow's start-up logging
  quiet, this process's sys.path (so that it imports the same tf_adasamp and
  test helpers), then `overrides`."""
  return dict(os.environ,
              TF_CPP_MIN_LOG_LEVEL="2",
              PYTHONPATH=os.pathsep.join(filter(None, sys.path)),
              **overrides)
