"""The paper's settings (tf_adasamp.experiment.study.presets)."""

import pytest

from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import presets


@pytest.mark.parametrize("key", sorted(presets.PRESETS))
def test_the_presets_keep_the_papers_step_size_schedule(tmp_path, key):
  # Their runs as before the schedules existed: inverse_time throughout.
  dataset, model = key
  runs = design.plan(presets.PRESETS[key], 2, str(tmp_path), dataset, model)
  assert {run.config.lr_schedule for run in runs} == {"inverse_time"}
