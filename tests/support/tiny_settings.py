"""The experiment's settings at toy size: 4 steps, an evaluation every 2, two
swept amplitudes (tests/experiment/study/test_design.py, test_pool.py,
test_report.py)."""

from tf_adasamp.experiment.study import presets

TINY = presets.Settings(steps=4,
                        eval_interval=2,
                        sgd_learning_rate=0.1,
                        sgd_lr_decay=0.01,
                        adagrad_learning_rate=0.1,
                        amplitude=1.0,
                        decay=0.5,
                        sweep_amplitudes=(0.5, 1.0),
                        batch_size=16)
