"""The study: the paper's experiment run as many trainings and judged.

  presets    the six algorithms and each data set's settings
  design     the runs of a study (`plan`) and their curves (`collect`)
  pool       trains runs in this process or a pool of worker processes
  heldout    the held-out measures every summary opens with
  targets    time to target, paired against the baselines
  timing     wall time to target, runs trained one at a time
  verdicts   the statistical rules of a verdict
  claims     the paper's four claims, judged by those rules
  noise      the label-noise study: its runs and summary
  budget     the budget-limited regime: its design and runs
  budget_results   its runs trained, its summary, wall time and figures
  text       how the reports write numbers and p-values
  bound_rows  the bounds table's rows, each a bound as a function of n
  report     summary.md, Figure 1 and the held-out figure
  plots      the figures' panels
  tuning     the hyperparameters, cross-validated on the training data:
             its stages and rules
  tuning_options   the tuning's options and their checks
  tuning_report    the tuning's report (tuning.md and its JSON)
  cnn        the paper's CNN at its own scale, on a GPU
  carry      a study's runs packed off a lent device and back
  provenance  the committed summaries' regimes, commands, commit and
             fingerprints
"""
