"""What every benchmark records about the machine its figures come from."""

import datetime
import os
import platform
import subprocess

import numpy as np
import tensorflow as tf


def gpus():
  """The names of the GPUs TensorFlow sees, e.g. ["NVIDIA H200"]."""
  return [
      tf.config.experimental.get_device_details(gpu).get("device_name", "GPU")
      for gpu in tf.config.list_physical_devices("GPU")
  ]


def machine():
  """The CPU, core count, GPUs, library versions and date, for the record."""
  model = "unknown"
  try:
    lscpu = subprocess.run(["lscpu"],
                           capture_output=True,
                           text=True,
                           check=False).stdout
    model = next(
        line.split(":", 1)[1].strip()
        for line in lscpu.splitlines()
        if line.startswith("Model name"))
  except (OSError, StopIteration):
    pass
  return {
      "cpu": model,
      "cores": os.cpu_count(),
      "gpus": gpus(),
      "platform": platform.platform(),
      "python": platform.python_version(),
      "numpy": np.__version__,
      "tensorflow": tf.__version__,
      "date": datetime.datetime.now().isoformat(timespec="seconds"),
  }


def load():
  """The 1-minute load average (the machine may be shared)."""
  return round(os.getloadavg()[0], 2)
