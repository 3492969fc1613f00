"""Constructing a sampler costs its state and no full-size copy beyond it
(issue 34): measured in a subprocess, whose peak resident memory is its own."""

import subprocess
import sys

import child_process

MEASURE = """
import resource, sys
from tf_adasamp import AdaptiveSampler
AdaptiveSampler(5, 0.1, 0.5, seed=0)  # TensorFlow and the ops, loaded
def resident():
  with open("/proc/self/status") as status:
    for line in status:
      if line.startswith("VmRSS:"):
        return int(line.split()[1]) * 1024
baseline = resident()
sampler = AdaptiveSampler(int(sys.argv[1]), 0.1, 0.5, seed=0)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(peak - baseline)
"""


def state_bytes(num_examples):
  """Tree and entropy tree (2 * capacity each), log weights, log-scale and
  the random state, in float64."""
  capacity = 1 << (num_examples - 1).bit_length()
  return 8 * (4 * capacity + num_examples + 1 + 3)


def test_construction_peaks_below_one_and_a_half_times_the_state():
  # Just past a power of two, where the padded trees are largest; big
  # enough (288 MiB of state) that a full-size copy stands out of the noise.
  num_examples = 2**22 + 1
  result = subprocess.run(
      [sys.executable, "-c", MEASURE,
       str(num_examples)],
      capture_output=True,
      text=True,
      timeout=300,
      check=True,
      env=child_process.environment(CUDA_VISIBLE_DEVICES=""))
  above_baseline = int(result.stdout.split()[-1])
  assert above_baseline <= 1.5 * state_bytes(num_examples)
