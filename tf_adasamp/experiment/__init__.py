"""The paper's experiment, built on the library (London, NIPS 2017).

Data sets, models, the training loop, the command lines (`train`,
`reproduce`, `tuning`, `bounds_table`, `demo`), the experiment's runs
(`study`) and its report and plots. Installed with the `experiment` extra
(`pip install tf_adasamp[experiment]`); the library never imports it.
"""
