"""The tuning's options (tf_adasamp.experiment.study.tuning_options)."""

import pytest

from tf_adasamp.experiment.study import tuning_options


@pytest.mark.parametrize("field, value, message", [
    ("adaptive", "AdaSamp-01-SGD,Nonesuch", "adaptive takes AdaSamp-01-SGD, "),
    ("adaptive", (), "adaptive names no algorithm"),
    ("score", "best", "score must be one of"),
])
def test_options_refuse_what_tuning_cannot_do(field, value, message):
  with pytest.raises(ValueError, match=message):
    tuning_options.Options(**{field: value})
