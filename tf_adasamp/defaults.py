"""The settings every entry point starts from, held in this one place.

`AdaptiveSampler`, `tf_adasamp.distribute.create_sampler`, the sampler that
`tf_adasamp.keras.AdaptiveSamplingModel.fit` makes, the trainer's flags
(`tf_adasamp.experiment.training.config`), the demo and the examples of the
documentation all read these, and tests/test_defaults.py fails where one of
them departs: changing a recommendation is one edit here.

  AMPLITUDE   1.0: where the model fits its data (the experiment's main
              regime), the amplitude that reached uniform sampling's final
              training loss soonest without collapsing onto a few examples
              (docs/experiment.md, "Defaults").
  DECAY       0.5: a log weight then stays within 2 * amplitude * max|u|;
              a slower decay (0.9) cost accuracy on Fashion-MNIST
              (docs/experiment.md, "It hurts when the decay is too slow").
  UTILITY_AT  "step": the utility from the step's own forward pass (the
              model before its update, h_{t-1}), which costs nothing extra;
              Algorithm 1 as written ("updated", the model after it, h_t)
              takes a second forward pass and was no faster to the same
              loss.
  BETA        1.0: importance weights (1 / (n q_i)) ** beta that make the
              weighted loss an unbiased estimate of the training set's mean;
              the one control that cost no held-out accuracy under label
              noise (docs/guide.md, "What the measurements say"). The
              paper's Algorithm 1 weighs nothing (beta 0), which the
              experiment's runs of it set explicitly.

This module imports nothing, so that the command lines read it before
TensorFlow loads.
"""

AMPLITUDE = 1.0
DECAY = 0.5
UTILITY_AT = "step"
BETA = 1.0
