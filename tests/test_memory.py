"""Constructing a sampler costs its state and no full-size copy beyond it:
measured in a subprocess, whose peak memory is its own."""

import subprocess
import sys

import child_process

# Anonymous resident memory (the allocations; not TensorFlow's code pages,
# which a loaded machine evicts and the construction faults back in), polled
# while the sampler is built: a full-size copy takes far longer to write than
# the millisecond between polls.
MEASURE = """
import sys, threading
from tf_adasamp import AdaptiveSampler
AdaptiveSampler(5, 0.1, 0.5, seed=0)  # TensorFlow and the ops, loaded
def anonymous():
  with open("/proc/self/status") as status:
    for line in status:
      if line.startswith("RssAnon:"):
        return int(line.split()[1]) * 1024
baseline = peak = anonymous()
building = True
def poll():
  global peak
  while building:
    peak = max(peak, anonymous())
poller = threading.Thread(target=poll)
sys.setswitchinterval(1e-4)
poller.start()
sampler = AdaptiveSampler(int(sys.argv[1]), 0.1, 0.5, seed=0)
building = False
poller.join()
print(max(peak, anonymous()) - baseline)
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
