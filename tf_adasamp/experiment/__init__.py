"""The paper's experiment, built on the library (London, NIPS 2017).

Two programs and their command lines:

  training/  the trainer: data sets, models, one run of Algorithm 1 or
             uniform sampling in Orbit's shape (`training.loop.train`)
  study/     the study: the experiment's settings, its runs and the pool
             that trains them, verdicts on the paper's claims, report and
             plots

The command lines (`train`, `reproduce`, `tuning`, `refresh`,
`bounds_table`, `demo`, `noise_study`, `wall_time`, `budget_study`,
`cnn_study`, `carry`) sit here, with `flags`, the one way they define their
flags; each parses its flags and calls into training/ or study/. Installed with the `experiment` extra (`pip install
tf_adasamp[experiment]`); the library never imports it, and training never
imports the study.
"""
