"""The paper's experiment, built on the library (London, NIPS 2017).

Data sets, models, the training loop, the command lines (`train`,
`reproduce`, `tuning`, `refresh`, `bounds_table`, `demo`, `cnn_study`), the
experiment's settings (`presets`), runs (`study`, trained by `runner`),
verdicts (`verdicts`, `claims`), report and plots. Installed with the `experiment`
extra (`pip install tf_adasamp[experiment]`); the library never imports it.
"""
