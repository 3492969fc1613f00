"""The paper's experiment, built on the library (London, NIPS 2017).

Two programs, and the command lines over them:

  training/      the trainer: data sets, models, one run of Algorithm 1 or
                 uniform sampling in Orbit's shape (`training.loop.train`)
  study/         the study: the experiment's settings, its runs and the
                 pool that trains them, verdicts on the paper's claims,
                 report and plots
  flags          the one way the command lines define their absl flags
  train          one training run
  reproduce      the paper's experiment: its runs, verdicts and figures
  tuning         the hyperparameters, chosen by cross-validation
  refresh        regenerates the committed summaries in docs/experiment/
  bounds_table   the paper's bounds for given constants
  demo           a one-minute look at adaptive sampling
  noise_study    adaptive sampling under label noise, and its controls
  wall_time      wall time to target, the runs trained one at a time
  budget_study   the budget-limited regime on all of Fashion-MNIST
  cnn_study      the paper's CNN on all of Fashion-MNIST, on a GPU
  carry          packs a study's runs off a lent device, and unpacks them

Each command line parses its flags and calls into training/ or study/.
Installed with the `experiment` extra (`pip install
tf_adasamp[experiment]`); the library never imports it, and training never
imports the study.
"""
