"""Where a GPU sampler step's time goes: host dispatch or device latency.

The script of runs 3 and 4 (RESULTS.md), as run but for its loop, now
gpu_steps.range_loop (it had a copy): us per iteration of tf.range loops,
timed when the call returns and after syncing with the device. Run 3 ran it
without the two "old_" loops, which in run 4 were the ops with their
constants placed by TensorFlow, as the sampler makes them. From the root:
    SIZES=50000 NOTRACE=1 PYTHONPATH=. \
        python3 benchmarks/results/gpu_h200_run4/probe.py 500
"""
import glob, json, os, shutil, sys, time
import numpy as np
import tensorflow as tf

from benchmarks import gpu_steps
from tf_adasamp.sampler import AdaptiveSampler

OUT = os.environ.get("OUT", "/tmp/probe_out")
os.makedirs(OUT, exist_ok=True)
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 200


def loops_for(n, batch_size=100):
  sampler = AdaptiveSampler(n, amplitude=1.0, decay=0.5, seed=0)
  rng = np.random.default_rng(0)
  utilities = tf.constant(rng.random(batch_size))
  indices = tf.constant(rng.integers(n, size=batch_size))
  empty_indices = tf.constant([], tf.int64)
  empty_utilities = tf.constant([], tf.float64)
  counter = tf.Variable(0, dtype=tf.int64)
  counter2 = tf.Variable(0, dtype=tf.int64)

  def loop(body):
    return gpu_steps.range_loop(body, counter.read_value)

  from tf_adasamp import ops

  def old_update():  # constants placed with the op, as before
    ops.adaptive_reweight(sampler.tree.variable.handle,
                          sampler._entropy_tree.handle,
                          sampler.log_weights.handle, sampler._log_scale.handle,
                          indices, utilities, tf.constant(1.0, tf.float64),
                          tf.constant(0.5, tf.float64))

  def old_draw():
    return ops.sum_tree_draw(sampler.tree.variable.handle,
                             sampler.generator.state.handle,
                             tf.constant(batch_size, tf.int64),
                             T=tf.float64)

  return {
      "old_update":
          loop(old_update),
      "old_draw":
          loop(old_draw),
      "empty":
          loop(lambda: counter.assign_add(1)),
      "two_assigns":
          loop(lambda: (counter.assign_add(1), counter2.assign_add(1))),
      "sampler":
          loop(lambda: sampler.update(sampler.sample(batch_size), utilities)),
      "draw":
          loop(lambda: sampler.sample(batch_size)),
      "draw_1":
          loop(lambda: sampler.sample(1)),
      "update":
          loop(lambda: sampler.update(indices, utilities)),
      "update_empty":
          loop(lambda: sampler.update(empty_indices, empty_utilities)),
  }


def measure(loops, steps, repeats=5):
  count = tf.constant(steps, tf.int64)
  for loop in loops.values():
    loop(count).numpy()
  res = {}
  for name, loop in loops.items():
    hosts, totals = [], []
    for _ in range(repeats):
      start = time.perf_counter()
      r = loop(count)
      mid = time.perf_counter()
      r.numpy()
      end = time.perf_counter()
      hosts.append((mid - start) / steps * 1e6)
      totals.append((end - start) / steps * 1e6)
    res[name] = (float(np.median(hosts)), float(np.median(totals)))
  return res


results = {}
SIZES = [int(x) for x in os.environ.get("SIZES", "1000 50000 1000000").split()]
for n in SIZES:
  loops = loops_for(n)
  with tf.device("/CPU:0"):
    cpu = loops_for(n)
  loops["sampler_on_cpu"] = cpu["sampler"]
  loops["empty_on_cpu"] = cpu["empty"]
  r = measure(loops, STEPS)
  results[n] = r
  print(f"n={n}: name: host-returned us/iter, synced us/iter")
  for name, (h, t) in r.items():
    print(f"  {name:14s} {h:8.1f} {t:8.1f}")
  sys.stdout.flush()

if os.environ.get("MLP"):
  from benchmarks import gpu_steps
  r = measure(gpu_steps.mlp_loops(128), STEPS)
  results["mlp"] = r
  print("MLP:", r)
if os.environ.get("NOTRACE"):
  with open(os.path.join(OUT,
                         os.environ.get("LABEL", "probe") + ".json"), "w") as f:
    json.dump({str(k): v for k, v in results.items()}, f, indent=1)
  sys.exit(0)
# Host trace of the sampler and update loops at n = 50000.
loops = loops_for(50000)
count = tf.constant(50, tf.int64)
for name in ("sampler", "update", "empty"):
  loops[name](count).numpy()
logdir = os.path.join("/tmp", "probe_trace")
shutil.rmtree(logdir, ignore_errors=True)
tf.profiler.experimental.start(logdir,
                               options=tf.profiler.experimental.ProfilerOptions(
                                   host_tracer_level=3, device_tracer_level=1))
for name in ("empty", "update", "sampler"):
  loops[name](count).numpy()
tf.profiler.experimental.stop()
for i, path in enumerate(glob.glob(logdir + "/**/*.xplane.pb", recursive=True)):
  shutil.copy(path, os.path.join(OUT, f"trace{i}.xplane.pb"))
with open(os.path.join(OUT, "probe.json"), "w") as f:
  json.dump({str(k): v for k, v in results.items()}, f, indent=1)
print("probe done")
