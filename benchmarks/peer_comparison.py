"""Our sampler against its peers, each side in a process of its own.

A speed ratio against a peer is measured the way each library's users meet
it (DESIGN.md, "Claims we make"): every side of benchmarks.peer_sides (ours
through the public API in a tf.function, ours with jit_compile=True,
flashbax, cpprb, NumPy, tf.random.categorical) runs its users' loop in a
fresh process. For each n and B there are --rounds rounds; in each, every side
runs once, the sides one after the other in an order that rotates by one each
round, so that a slow spell of a shared machine falls on every side alike.

Per side and workload: the median over its processes of each process's median
rate, their range, the rate per CPU-second of the process (all its threads)
and the threads it had. Then our rate over each peer's, by wall time and by
CPU time, with the range of the rounds' own ratios, and the targets.
These are the ratios to quote; benchmarks.sum_tree_throughput times the raw
ops alone.

  python -m benchmarks.peer_comparison [--sizes 50000 1000000]
      [--batch-sizes 4096 128] [--rounds 3] [--sides ours ours_xla flashbax
      cpprb numpy categorical] [--repeats 5] [--min-seconds 0.2]
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

from benchmarks import peer_sides

OURS = ("ours", "ours_xla")
# Which of a peer's workloads compare with which of ours: draws with draws,
# a step (draw, then write the drawn leaves) with a step.
COUNTERPARTS = {
    "draw": ("draw", "searchsorted"),
    "step": ("step",),
    "tree_step": ("step",),
}
# The targets: our draws over flashbax's in-jit draws, wall time.
TARGETS = [(50000, 4096, 2.0), (10**6, 4096, 1.5), (50000, 128, 3.0),
           (10**6, 128, 3.0)]
SIDE_TIMEOUT_SECONDS = 600
# The checkout's root, where `python -m benchmarks.peer_sides` resolves.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def host():
  """The machine, for the record, without importing any side's library."""
  model = "unknown"
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      model = next(
          line.split(":", 1)[1].strip()
          for line in f
          if line.startswith("model name"))
  except (OSError, StopIteration):
    pass
  return {
      "cpu":
          model,
      "cores":
          os.cpu_count(),
      "platform":
          platform.platform(),
      "python":
          platform.python_version(),
      "date":
          datetime.datetime.now(datetime.timezone.utc
                               ).isoformat(timespec="seconds"),
  }


def load():
  """The 1-minute load average."""
  return round(os.getloadavg()[0], 2)


def run_side(side, num_leaves, batch_size, args):
  """One fresh process of `side`: its JSON record."""
  command = [
      sys.executable, "-m", "benchmarks.peer_sides", side, "--num-leaves",
      str(num_leaves), "--batch-size",
      str(batch_size), "--repeats",
      str(args.repeats), "--min-seconds",
      str(args.min_seconds), "--dtype", args.dtype
  ]
  environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  finished = subprocess.run(command,
                            capture_output=True,
                            text=True,
                            env=environment,
                            cwd=ROOT,
                            timeout=SIDE_TIMEOUT_SECONDS,
                            check=False)
  if finished.returncode != 0:
    raise RuntimeError(f"{' '.join(command[2:])} exited "
                       f"{finished.returncode}: {finished.stderr[-2000:]}")
  return json.loads(finished.stdout.strip().splitlines()[-1])


def rotated(sides, round_index):
  shift = round_index % len(sides)
  return sides[shift:] + sides[:shift]


def measure_row(num_leaves, batch_size, args):
  """{side: [a record per round]} at n, B, the sides alternating."""
  records = {side: [] for side in args.sides}
  for round_index in range(args.rounds):
    for side in rotated(list(args.sides), round_index):
      records[side].append(run_side(side, num_leaves, batch_size, args))
  return records


def summary(records, workload, batch_size):
  """Rates (draws/s) of one side's workload: the median of each process's
  median by wall and CPU time, one per process, and the threads seen."""
  wall, cpu = [], []
  for record in records:
    times = record["workloads"][workload]
    wall.append(batch_size / statistics.median(times["wall"]))
    cpu.append(batch_size / statistics.median(times["cpu"]))
  return {
      "wall": wall,
      "cpu": cpu,
      "median": statistics.median(wall),
      "cpu_median": statistics.median(cpu),
      "cores_busy": statistics.median(w / c for w, c in zip(wall, cpu)),
      "threads": sorted({record["threads"] for record in records}),
      "batches_per_call": records[0]["workloads"][workload]["batches_per_call"],
  }


def summarize_row(records, batch_size):
  """{side: {workload: summary}}."""
  return {
      side: {
          workload: summary(side_records, workload, batch_size)
          for workload in side_records[0]["workloads"]
      } for side, side_records in records.items()
  }


def ratio(ours, theirs):
  """Our rate over theirs (medians, wall and CPU) and the range of the
  rounds' own wall ratios."""
  rounds = [a / b for a, b in zip(ours["wall"], theirs["wall"])]
  return {
      "wall": ours["median"] / theirs["median"],
      "cpu": ours["cpu_median"] / theirs["cpu_median"],
      "rounds": [min(rounds), max(rounds)],
  }


def ratios(rates):
  """{(ours, workload, peer, peer_workload): ratio} of one row."""
  result = {}
  for side in OURS:
    for workload, summary_ in rates.get(side, {}).items():
      for peer, peer_rates in rates.items():
        if peer in OURS:
          continue
        for peer_workload in COUNTERPARTS[workload]:
          if peer_workload in peer_rates:
            result[(side, workload, peer,
                    peer_workload)] = ratio(summary_, peer_rates[peer_workload])
  return result


def millions(rate):
  return f"{rate / 1e6:.3g}"


def print_rates(rows):
  print("\nRates, M draws/s (a step: M draws written back/s); median over "
        "the processes [their range]; per CPU-second; cores busy (CPU/wall); "
        "threads in the process:\n")
  print("| n | B | side | workload | wall M/s | CPU M/s | cores busy | "
        "threads | load |")
  print("|---|---|---|---|---|---|---|---|---|")
  for row in rows:
    for side, workloads in row["rates"].items():
      for workload, s in workloads.items():
        print(f"| {row['n']} | {row['batch_size']} | {side} | {workload} | "
              f"{millions(s['median'])} [{millions(min(s['wall']))}-"
              f"{millions(max(s['wall']))}] | {millions(s['cpu_median'])} | "
              f"{s['cores_busy']:.2f} | "
              f"{', '.join(str(t) for t in s['threads'])} | "
              f"{row['load'][0]}-{row['load'][1]} |")


def print_ratios(rows):
  print("\nOur rate over the peer's: wall (the rounds' range), per "
        "CPU-second:\n")
  print("| n | B | ours | peer | wall | rounds | CPU |")
  print("|---|---|---|---|---|---|---|")
  for row in rows:
    for (side, workload, peer,
         peer_workload), r in ratios(row["rates"]).items():
      print(f"| {row['n']} | {row['batch_size']} | {side} {workload} | "
            f"{peer} {peer_workload} | {r['wall']:.2f}x | "
            f"{r['rounds'][0]:.2f}-{r['rounds'][1]:.2f}x | {r['cpu']:.2f}x |")


def print_targets(rows):
  print("\nThe targets, our draws over flashbax's in-jit draws (wall; "
        "CPU in brackets):")
  for num_leaves, batch_size, minimum in TARGETS:
    row = next((row for row in rows
                if row["n"] == num_leaves and row["batch_size"] == batch_size),
               None)
    if row is None:
      continue
    found = ratios(row["rates"])
    for side in OURS:
      r = found.get((side, "draw", "flashbax", "draw"))
      if r is not None:
        verdict = "met" if r["wall"] >= minimum else "MISSED"
        print(f"  n={num_leaves}, B={batch_size}, {side} >= {minimum:g}x: "
              f"{r['wall']:.2f}x [{r['cpu']:.2f}x] ({verdict})")


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sizes",
                      type=peer_sides.positive_int,
                      nargs="+",
                      default=[50000, 10**6])
  parser.add_argument("--batch-sizes",
                      type=peer_sides.positive_int,
                      nargs="+",
                      default=[4096, 128])
  parser.add_argument("--rounds", type=peer_sides.positive_int, default=3)
  parser.add_argument("--sides",
                      nargs="+",
                      choices=sorted(peer_sides.SIDES),
                      default=list(peer_sides.SIDES))
  parser.add_argument("--repeats", type=peer_sides.positive_int, default=5)
  parser.add_argument("--min-seconds", type=float, default=0.2)
  parser.add_argument("--dtype",
                      choices=["float64", "float32"],
                      default="float64")
  parser.add_argument("--output",
                      default=os.path.join(os.path.dirname(__file__), "results",
                                           "peer_comparison.json"))
  return parser.parse_args(argv)


def write(path, command, info, args, rows):
  """The JSON record: each row with its ratios and every process's record."""
  for row in rows:
    row["ratios"] = [{
        "ours": side,
        "workload": workload,
        "peer": peer,
        "peer_workload": peer_workload,
        **r
    } for (side, workload, peer,
           peer_workload), r in ratios(row["rates"]).items()]
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(
        {
            "command": command,
            "machine": info,
            "args": vars(args),
            "rows": rows
        },
        f,
        indent=1)


def main(argv=None):
  args = parse_args(argv)
  command = " ".join(["python -m benchmarks.peer_comparison", *sys.argv[1:]])
  info = host()
  print(command, json.dumps(info), sep="\n", flush=True)
  rows = []
  for num_leaves in args.sizes:
    for batch_size in args.batch_sizes:
      before = load()
      records = measure_row(num_leaves, batch_size, args)
      rows.append({
          "n": num_leaves,
          "batch_size": batch_size,
          "load": [before, load()],
          "rates": summarize_row(records, batch_size),
          "processes": records,
      })
      # Written row by row, so that a run stopped early keeps its rows.
      write(args.output, command, info, args, rows)
      print(f"n={num_leaves} B={batch_size} done (load {before}-{load()})",
            flush=True)
  print_rates(rows)
  print_ratios(rows)
  print_targets(rows)
  print(f"wrote {args.output}")


if __name__ == "__main__":
  sys.exit(main())
