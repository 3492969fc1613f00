"""array-record imported where first used (tf_adasamp.sources._lazy)."""

import sys

import numpy as np
import pytest

import child_process
from tf_adasamp import sources

pytest.importorskip("array_record")


def test_a_missing_array_record_package_names_the_extra(monkeypatch):
  monkeypatch.setitem(sys.modules, "array_record", None)
  monkeypatch.setitem(sys.modules, "array_record.python", None)
  with pytest.raises(ImportError, match=r"tf_adasamp\[data\]"):
    sources.ArrayRecordSource("unused.array_record")


def test_array_record_is_imported_only_when_an_array_record_file_is_opened(
    tmp_path):
  np.save(tmp_path / "x.npy", np.arange(10))
  statement = (
      "import numpy as np, tf_adasamp; from tf_adasamp import data, sources; "
      "stage = data.AdaptiveSampling(tf_adasamp.AdaptiveSampler(10, 1.0, 0.5),"
      " 2); source = sources.MemmapSource(np.load("
      f"{str(tmp_path / 'x.npy')!r}, mmap_mode='r')); "
      "next(iter(stage.dataset(source)))")
  assert child_process.import_attempts(statement, ["array_record"]) == []
