"""Adaptive against uniform reading of an on-disk source, the same reader.

Target: the stage's batches/s from a random-access source on disk
are >= 0.9x those of uniform random indices read by the same reader, so that
the sampler is never the data path's bottleneck.

Data (written once into --data_dir):
  fashion_mnist  60,000 28x28 uint8 images and labels from
                 /usr/share/datasets/fashion-mnist, as a memmap (two .npy
                 files, read without decoding) and as ArrayRecord
                 (`encode_image_example` records, decoded per record to
                 float32 images by `open_image_classification`)
  synthetic      10^7 records of 64 random bytes, as a memmap ([n, 64]
                 uint8) and as ArrayRecord (raw records, no decode, 64
                 records a chunk)
Pipelines, each of the form counter -> draw -> parallel read -> prefetch:
  uniform   indices from tf.random.Generator.uniform, read with the stage's
            own reader (`tf_adasamp.sources.index_reader`)
  adaptive  AdaptiveSampling(sampler, B).dataset(source), max_lag=None, no
            updates: the data path alone
Cache:
  warm  the files read once before; timed after --warmup batches
  cold  after the same warm-up, the files' pages unmapped (MADV_DONTNEED)
        and evicted (POSIX_FADV_DONTNEED, checked with fincore); the
        batches the prefetch buffer already holds are among those timed,
        so --cold_steps is kept well above its size
Runs alternate uniform/adaptive; each figure is the median of --repeats
runs of batches/s, and of the process's CPU time a batch (all threads), the
cost that decides the rate where the cores are shared.

  python -m benchmarks.random_access_reading [--repeats 5] [--output F]
  python -m benchmarks.random_access_reading --table F   # RESULTS.md's table
"""

import argparse
import gzip
import json
import mmap
import os
import statistics
import subprocess
import time

import numpy as np
import tensorflow as tf

from benchmarks.machine import load
from benchmarks.machine import machine
import tf_adasamp
from tf_adasamp import data
from tf_adasamp import sources

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
SYNTHETIC_RECORDS, SYNTHETIC_BYTES = 10**7, 64
# 4 KiB chunks: array-record's batched read costs time per chunk of the file.
SYNTHETIC_GROUP_SIZE = 64


def read_idx(path):
  """An idx file (the MNIST format) as a uint8 array."""
  with gzip.open(path, "rb") as idx:
    raw = idx.read()
  dims = raw[3]
  shape = np.frombuffer(raw, ">u4", dims, offset=4)
  return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def write_files(data_dir):
  """Writes the data sets once; returns {name: [files]} per source."""
  os.makedirs(data_dir, exist_ok=True)
  files = {}
  images = read_idx(f"{FASHION_MNIST}/train-images-idx3-ubyte.gz")[..., None]
  labels = read_idx(f"{FASHION_MNIST}/train-labels-idx1-ubyte.gz")
  files["fashion_mnist/memmap"] = [
      save_npy(f"{data_dir}/fmnist_images.npy", images),
      save_npy(f"{data_dir}/fmnist_labels.npy", labels.astype(np.int32))
  ]
  files["fashion_mnist/array_record"] = [
      write_records(f"{data_dir}/fmnist.array_record",
                    (sources.encode_image_example(image, label)
                     for image, label in zip(images, labels)))
  ]
  synthetic = f"{data_dir}/synthetic.npy"
  if not os.path.exists(synthetic):
    rng = np.random.default_rng(0)
    array = np.lib.format.open_memmap(synthetic, "w+", np.uint8,
                                      (SYNTHETIC_RECORDS, SYNTHETIC_BYTES))
    for start in range(0, SYNTHETIC_RECORDS, 10**6):
      array[start:start + 10**6] = rng.integers(0, 256,
                                                (10**6, SYNTHETIC_BYTES),
                                                np.uint8)
    array.flush()
    del array
  files["synthetic/memmap"] = [synthetic]
  rows = np.load(synthetic, mmap_mode="r")
  files["synthetic/array_record"] = [
      write_records(
          f"{data_dir}/synthetic_group{SYNTHETIC_GROUP_SIZE}."
          "array_record", (row.tobytes() for row in rows),
          group_size=SYNTHETIC_GROUP_SIZE)
  ]
  return files


def save_npy(path, array):
  if not os.path.exists(path):
    np.save(path, array)
  return path


def write_records(path, records, group_size=1):
  if not os.path.exists(path):
    sources.write_array_record(records,
                               path + ".partial",
                               group_size=group_size)
    os.rename(path + ".partial", path)
  return path


# Every memory map opened: TensorFlow keeps a dataset's numpy_function, so
# its source, after the dataset is gone, and mapped pages cannot be evicted.
MAPPED = []


def memory_map(path):
  array = np.load(path, mmap_mode="r")
  MAPPED.append(array)
  return array


def open_source(name, files):
  """A fresh reader (and fresh memory maps) over the files of `name`."""
  if name == "fashion_mnist/memmap":
    return sources.MemmapSource(tuple(memory_map(path) for path in files))
  if name == "synthetic/memmap":
    return sources.MemmapSource(memory_map(files[0]))
  if name == "fashion_mnist/array_record":
    return sources.open_image_classification(files[0])
  return sources.ArrayRecordSource(files[0])


def uniform_pipeline(source, batch_size):
  num_examples, gather = sources.index_reader(source)
  generator = tf.random.Generator.from_seed(0)

  def draw(_):
    return generator.uniform([batch_size], 0, num_examples, tf.int64)

  return (tf.data.Dataset.counter().map(draw).map(
      gather, num_parallel_calls=tf.data.AUTOTUNE,
      deterministic=True).prefetch(tf.data.AUTOTUNE))


def adaptive_pipeline(source, batch_size):
  with tf.device("/cpu:0"):
    sampler = tf_adasamp.AdaptiveSampler(len(source), 0.1, 0.5, seed=0)
  stage = data.AdaptiveSampling(sampler, batch_size, max_lag=None)
  return stage.dataset(source).prefetch(tf.data.AUTOTUNE)


PIPELINES = {"uniform": uniform_pipeline, "adaptive": adaptive_pipeline}


def evict(files):
  """Drops the files' pages from the page cache; returns the fraction of
  their pages still resident (fincore), 0 where all went."""
  for array in MAPPED:
    array._mmap.madvise(mmap.MADV_DONTNEED)
  resident = total = 0
  for path in files:
    descriptor = os.open(path, os.O_RDONLY)
    try:
      os.fsync(descriptor)
      os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
      os.close(descriptor)
    report = subprocess.run(["fincore", "-b", "-n", "-o", "RES,SIZE", path],
                            capture_output=True,
                            text=True,
                            check=True).stdout.split()
    resident += int(report[0])
    total += int(report[1])
  return resident / total


def warm_up(files):
  for path in files:
    with open(path, "rb") as f:
      while f.read(1 << 24):
        pass


def timed_run(pipeline, name, files, batch_size, cache, steps, warmup):
  """Batches/s of one fresh pipeline, and the resident fraction if cold."""
  dataset = PIPELINES[pipeline](open_source(name, files), batch_size)
  iterator = iter(dataset)
  for _ in range(warmup):
    next(iterator)
  resident = evict(files) if cache == "cold" else None
  start, start_cpu = time.perf_counter(), time.process_time()
  for _ in range(steps):
    element = next(iterator)
  tf.nest.flatten(element)[0].numpy()
  rate = steps / (time.perf_counter() - start)
  cpu_ms = 1000 * (time.process_time() - start_cpu) / steps
  del iterator, dataset
  return rate, cpu_ms, resident


def measure_case(name, files, batch_size, cache, args):
  rates = {pipeline: [] for pipeline in PIPELINES}
  cpu_ms = {pipeline: [] for pipeline in PIPELINES}
  resident = []
  steps = args.cold_steps if cache == "cold" else args.steps
  for repeat in range(args.repeats):
    order = list(PIPELINES) if repeat % 2 == 0 else list(PIPELINES)[::-1]
    for pipeline in order:
      rate, cpu, left = timed_run(pipeline, name, files, batch_size, cache,
                                  steps, args.warmup)
      rates[pipeline].append(rate)
      cpu_ms[pipeline].append(cpu)
      if left is not None:
        resident.append(left)
  median = {pipeline: statistics.median(rates[pipeline]) for pipeline in rates}
  median_cpu = {
      pipeline: statistics.median(cpu_ms[pipeline]) for pipeline in cpu_ms
  }
  return {
      "source": name,
      "batch_size": batch_size,
      "cache": cache,
      "steps": steps,
      "uniform_batches_per_s": rates["uniform"],
      "adaptive_batches_per_s": rates["adaptive"],
      "ratio": round(median["adaptive"] / median["uniform"], 3),
      "uniform_cpu_ms_per_batch": cpu_ms["uniform"],
      "adaptive_cpu_ms_per_batch": cpu_ms["adaptive"],
      # Uniform's CPU time a batch over adaptive's: the rate ratio at an
      # equal share of the cores.
      "cpu_ratio": round(median_cpu["uniform"] / median_cpu["adaptive"], 3),
      "max_resident_fraction_at_start": max(resident) if resident else None,
      "load": load(),
  }


def spread(values, digits=0):
  """min / median / max."""
  return " / ".join(f"{value:.{digits}f}"
                    for value in (min(values), statistics.median(values),
                                  max(values)))


def markdown_table(results):
  """The results as RESULTS.md's table."""
  lines = [
      "| source | B | cache | uniform batches/s | adaptive batches/s | "
      "rate ratio | CPU ms a batch, uniform | adaptive | CPU ratio |",
      "|---|---|---|---|---|---|---|---|---|",
  ]
  for result in results:
    lines.append(
        f"| {result['source']} | {result['batch_size']} | {result['cache']} "
        f"| {spread(result['uniform_batches_per_s'])} "
        f"| {spread(result['adaptive_batches_per_s'])} "
        f"| {result['ratio']:.2f}x "
        f"| {spread(result['uniform_cpu_ms_per_batch'], 2)} "
        f"| {spread(result['adaptive_cpu_ms_per_batch'], 2)} "
        f"| {result['cpu_ratio']:.2f}x |")
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--data_dir", default="/tmp/tf_adasamp_random_access")
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--cold_steps", type=int, default=60)
  parser.add_argument("--warmup", type=int, default=10)
  parser.add_argument("--batch_sizes", default="100,1024")
  parser.add_argument("--sources", default="")
  parser.add_argument("--output", help="a JSON file for the figures")
  parser.add_argument("--table",
                      help="print the table of this JSON file, run nothing")
  args = parser.parse_args()
  if args.table:
    with open(args.table, encoding="utf-8") as saved:
      print(markdown_table(json.load(saved)["results"]))
    return
  files = write_files(args.data_dir)
  names = args.sources.split(",") if args.sources else list(files)
  results = []
  for name in names:
    warm_up(files[name])
    for batch_size in (int(b) for b in args.batch_sizes.split(",")):
      for cache in ("warm", "cold"):
        result = measure_case(name, files[name], batch_size, cache, args)
        print(json.dumps(result), flush=True)
        results.append(result)
      warm_up(files[name])
  if args.output:
    with open(args.output, "w", encoding="utf-8") as out:
      json.dump({"machine": machine(), "results": results}, out, indent=1)


if __name__ == "__main__":
  main()
