"""The study: the paper's experiment run as many trainings and judged.

  presets    the six algorithms and each data set's settings
  design     the runs of a study (`plan`) and their curves (`collect`)
  pool       trains runs in this process or a pool of worker processes
  verdicts   the statistical rules of a verdict
  claims     the paper's four claims, judged by those rules
  report     summary.md and Figure 1 (`plots`)
  tuning     the hyperparameters, cross-validated on the training data
             (`tuning_options`, `tuning_report`)
  cnn        the paper's CNN at its own scale, on a GPU
  carry      a study's runs packed off a lent device and back
"""
