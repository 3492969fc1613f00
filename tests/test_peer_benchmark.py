"""The plumbing of benchmarks.peer_comparison (it times nothing here): every
side runs in a fresh process of its own, the sides take turns, and each
record carries the fields the tables are made of."""

import json

from benchmarks import peer_comparison


def test_each_side_runs_in_its_own_process_and_reports_its_fields(tmp_path):
  output = tmp_path / "peers.json"
  peer_comparison.main([
      "--sizes", "100", "--batch-sizes", "8", "--rounds", "1", "--sides",
      "ours", "numpy", "--repeats", "1", "--min-seconds", "0.001", "--output",
      str(output)
  ])
  with open(output, encoding="utf-8") as f:
    result = json.load(f)
  (row,) = result["rows"]
  records = [
      record for side in ("ours", "numpy") for record in row["processes"][side]
  ]
  assert [record["side"] for record in records] == ["ours", "numpy"]
  pids = {record["pid"] for record in records}
  assert len(pids) == 2 and peer_comparison.os.getpid() not in pids
  for record in records:
    assert record["threads"] >= 1 and record["versions"]["numpy"]
    for times in record["workloads"].values():
      assert len(times["wall"]) == len(times["cpu"]) == 1
      assert times["batches_per_call"] >= 1
  assert set(row["rates"]["ours"]) == {"draw", "step", "tree_step"}
  compared = {
      (r["ours"], r["workload"], r["peer_workload"]) for r in row["ratios"]
  }
  assert ("ours", "draw", "searchsorted") in compared
  assert ("ours", "step", "step") in compared
  for r in row["ratios"]:
    assert r["wall"] > 0 and r["cpu"] > 0 and len(r["rounds"]) == 2


def test_the_sides_take_turns():
  sides = ["ours", "flashbax", "cpprb"]
  orders = [peer_comparison.rotated(sides, r) for r in range(3)]
  assert [order[0] for order in orders] == sides
  assert all(sorted(order) == sorted(sides) for order in orders)
