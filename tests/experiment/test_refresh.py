"""The refresh's command line (tf_adasamp.experiment.refresh): --help says
what it does, anything else but its two flags is refused with its usage."""

import child_process

REFRESH = "tf_adasamp.experiment.refresh"


def test_help_prints_what_the_refresh_does_and_succeeds():
  for flag in ("--help", "-h"):
    result = child_process.ran(REFRESH, flag, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Regenerates the committed summaries")
    assert "[--check | --compare]" in result.stdout


def test_an_unknown_argument_is_refused_with_the_usage():
  result = child_process.ran(REFRESH, "--chek", timeout=120)
  assert result.returncode == 1
  assert result.stderr.strip() == (
      "usage: python -m tf_adasamp.experiment.refresh [--check | --compare]")
  assert not result.stdout
