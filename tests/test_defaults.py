"""Every entry point starts from tf_adasamp.defaults: the library, the
tf.data stage and Keras wrapper's sampler, the trainer's flags, the demo and
the documentation's examples."""

import ast
import dataclasses
import glob
import inspect
import os
import re
import textwrap

import keras
import numpy as np
import pytest

import tf_adasamp
from tf_adasamp import defaults
from tf_adasamp import distribute
from tf_adasamp.experiment import demo
from tf_adasamp.experiment import reproduce
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.keras import AdaptiveSamplingModel

ROOT = os.path.join(os.path.dirname(__file__), os.pardir)
SETTINGS = {
    "amplitude": defaults.AMPLITUDE,
    "decay": defaults.DECAY,
    "beta": defaults.BETA,
    "utility_at": defaults.UTILITY_AT,
}


def parameter_defaults(function):
  return {
      name: parameter.default
      for name, parameter in inspect.signature(function).parameters.items()
      if name in SETTINGS
  }


@pytest.mark.parametrize("function,names",
                         [(tf_adasamp.AdaptiveSampler,
                           ("amplitude", "decay", "beta")),
                          (distribute.create_sampler, ("amplitude", "decay")),
                          (AdaptiveSamplingModel, ("utility_at",)),
                          (demo.main, ("amplitude", "decay"))])
def test_the_library_the_wrapper_and_the_demo_take_the_defaults(
    function, names):
  expected = {name: SETTINGS[name] for name in names}
  assert parameter_defaults(function) == expected


def test_the_sampler_fit_makes_takes_the_defaults():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(20, 3)).astype(np.float32)
  trainer = AdaptiveSamplingModel(
      keras.Sequential(
          [keras.Input((3,)),
           keras.layers.Dense(2, activation="softmax")]))
  trainer.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
  trainer.fit(x, (x[:, 0] > 0).astype(np.int64), steps_per_epoch=1, verbose=0)
  sampler = trainer.stage.sampler
  assert (sampler.amplitude, sampler.decay,
          sampler.beta) == (defaults.AMPLITUDE, defaults.DECAY, defaults.BETA)
  assert trainer.utility_at == defaults.UTILITY_AT


def test_the_trainers_flags_take_the_defaults_and_the_main_jobs_model():
  fields = {
      field.name: field.default
      for field in dataclasses.fields(config_lib.TrainConfig)
  }
  assert {name: fields[name] for name in SETTINGS} == SETTINGS
  # The main job: `reproduce`'s default data set, and its model.
  main_job = reproduce.Options().dataset
  assert fields["model"] == presets.DEFAULT_MODELS[main_job] == "mlp"


def doc_snippets():
  """(document, code) of every Python snippet of the README and docs/."""
  paths = [
      os.path.join(ROOT, "README.md"),
      *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
  ]
  for path in paths:
    with open(path) as f:
      text = f.read()
    for code in re.findall(r"^ *```py(?:thon)?\n(.*?)^ *```$", text,
                           re.M | re.S):
      yield os.path.relpath(path, ROOT), code


# The calls that take the settings, and where each takes them by position.
CALLS = {
    "AdaptiveSampler": {
        1: "amplitude",
        2: "decay"
    },
    "create_sampler": {
        2: "amplitude",
        3: "decay"
    },
    "KLBoundTracker": {
        1: "amplitude",
        2: "decay"
    },
    "AdaptiveSamplingModel": {},
}


def literal_settings(code):
  """Every setting a call of CALLS in `code` gives as a literal."""
  found = []
  for node in ast.walk(ast.parse(textwrap.dedent(code))):
    if not isinstance(node, ast.Call):
      continue
    name = getattr(node.func, "attr", getattr(node.func, "id", None))
    if name not in CALLS:
      continue
    given = {CALLS[name].get(i): arg for i, arg in enumerate(node.args)}
    given.update((keyword.arg, keyword.value) for keyword in node.keywords)
    found += [(name, setting, ast.literal_eval(value))
              for setting, value in given.items()
              if setting in SETTINGS and isinstance(value, ast.Constant)]
  return found


def test_doc_examples_give_no_setting_of_their_own():
  # They take the defaults, so that a change of them is one edit.
  found = [(doc, *setting)
           for doc, code in doc_snippets()
           for setting in literal_settings(code)]
  assert not found


def test_the_check_above_sees_literal_settings():
  assert literal_settings(
      "s = tf_adasamp.AdaptiveSampler(n, 0.1, decay=0.9)\n"
      "t = bounds.KLBoundTracker(n, amplitude=s.amplitude, decay=0.5)\n"
      "m = AdaptiveSamplingModel(net, utility_at='updated')\n") == [
          ("AdaptiveSampler", "amplitude", 0.1),
          ("AdaptiveSampler", "decay", 0.9),
          ("KLBoundTracker", "decay", 0.5),
          ("AdaptiveSamplingModel", "utility_at", "updated"),
      ]
