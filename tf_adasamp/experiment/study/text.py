"""How the study's reports write numbers: means with intervals, ratios and
p-values."""

import numpy as np

from tf_adasamp.experiment.study import verdicts


def mean_std(values, digits=4):
  values = np.asarray(values)
  return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"


def interval_text(test, digits=4):
  """Mean [low, high] of a verdicts.Test, or the mean and why no interval."""
  if np.isnan(test.low):
    return f"{test.mean:+.{digits}f} ({test.why_not})"
  return (f"{test.mean:+.{digits}f} "
          f"[{test.low:+.{digits}f}, {test.high:+.{digits}f}]")


def p_text(p, alpha=verdicts.ALPHA):
  """A p-value to 3 significant digits, or to as many more as it takes to
  show which side of `alpha` it falls on (0.0501 is not '0.05')."""
  if np.isnan(p):
    return "–"
  # alpha as a reader reads it: 1 - 0.95 is 0.05 plus a rounding error.
  alpha = float(f"{alpha:.12g}")
  for digits in range(3, 8):
    text = f"{p:.{digits}g}"
    shown = float(text)
    if shown != alpha and (shown < alpha) == (p < alpha):
      return text
  return text


def ratio_text(ratio):
  """A targets.Ratio as 'mean [low, high]', with the runs that never
  reached the target."""
  trials = ratio.reached + ratio.adaptive_never + ratio.baseline_never
  if not ratio.reached:
    return f"never ({ratio.adaptive_never}/{trials} runs)"
  if ratio.test.why_not:
    text = f"{ratio.geometric_mean:.3f} ({ratio.test.why_not})"
  else:
    low, high = ratio.interval
    text = f"{ratio.geometric_mean:.3f} [{low:.3f}, {high:.3f}]"
  never = [
      f"{count} {who}{'s' if count > 1 else ''} never"
      for count, who in ((ratio.adaptive_never, "run"), (ratio.baseline_never,
                                                         "baseline run"))
      if count
  ]
  return text + (f" ({', '.join(never)})" if never else "")
