"""The trainer: step, samplers, models, loop, resume and command line."""

import dataclasses
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import checkpoint_edits
from run_records import stopped_and_resumed
from run_records import tiny_config
from run_records import without_clocks
from tf_adasamp import defaults
from tf_adasamp import utilities
from tf_adasamp.experiment.training import components
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import controller
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import models
from tf_adasamp.experiment.training import resume
from tf_adasamp.experiment.training import run_files
from tf_adasamp.experiment.training import steps
from tf_adasamp.experiment.training import trainer
from tf_adasamp.experiment.training import uniform_sampler
from tf_adasamp.sampler import AdaptiveSampler

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("num_examples", [1, 1500, 1024])
def test_uniform_sampler_draws_what_adaptive_sampler_draws_at_amplitude_0(
    num_examples):
  uniform = uniform_sampler.UniformSampler(num_examples, seed=3)
  adaptive = AdaptiveSampler(num_examples, amplitude=0.0, decay=0.5, seed=3)
  rng = np.random.default_rng(0)
  for _ in range(5):
    indices = adaptive.sample(64)
    np.testing.assert_array_equal(uniform.sample(64), indices)
    adaptive.update(indices, rng.uniform(size=64))


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("num_examples,batch_size", [(10, 4), (7, 7), (5, 1)])
def test_reshuffling_draws_each_example_once_an_epoch(num_examples, batch_size,
                                                      jit_compile):
  sampler = uniform_sampler.ReshufflingSampler(num_examples, seed=3)
  sample = tf.function(sampler.sample, jit_compile=jit_compile)
  epochs = 4
  draws = np.concatenate([
      sample(batch_size).numpy()
      for _ in range(epochs * num_examples // batch_size)
  ]).reshape(epochs, num_examples)
  for epoch in draws:
    np.testing.assert_array_equal(np.sort(epoch), np.arange(num_examples))
  if num_examples > 5:
    assert len({tuple(epoch) for epoch in draws}) == epochs
  again = uniform_sampler.ReshufflingSampler(num_examples, seed=3)
  np.testing.assert_array_equal(again.sample(num_examples), draws[0])


def test_reshuffled_run_resumes_exactly(digits, tmp_path):
  # 1500 examples in batches of 16: the third epoch starts mid-batch.
  settings = dict(sampling="reshuffle", steps=200, eval_interval=50)
  whole = loop.train(tiny_config(**settings), data=digits)
  stopped = dict(settings, output_dir=str(tmp_path))
  loop.train(tiny_config(**dict(stopped, steps=100)), data=digits)
  resumed = loop.train(tiny_config(resume=True, **stopped), data=digits)
  assert without_clocks(resumed) == without_clocks(whole)
  assert whole[-1]["kl"] == 0


def test_reshuffling_refuses_replicas():
  with pytest.raises(ValueError, match="reshuffle' needs strategy 'default'"):
    tiny_config(sampling="reshuffle", strategy="mirrored")


def test_uniform_sampler_ignores_utilities_and_has_zero_kl():
  sampler = uniform_sampler.UniformSampler(10, seed=0)
  sampler.update(tf.constant([1, 2]), tf.constant([5.0, 5.0]))
  assert float(sampler.kl_divergence()) == 0.0


def test_sgd_step_size_is_eta_over_one_plus_gamma_t():
  optimizer = components.make_optimizer("sgd", 0.5, 0.1)
  weight = tf.Variable(0.0)
  for _ in range(3):  # gradient 1: each step moves by the step size
    optimizer.apply_gradients([(tf.constant(1.0), weight)])
  expected = -sum(0.5 / (1 + 0.1 * t) for t in range(3))
  np.testing.assert_allclose(float(weight), expected, rtol=1e-6)


@pytest.mark.parametrize("rule", ["sgd", "adagrad"])
@pytest.mark.parametrize(
    "lr_schedule,reference",
    [
        ("inverse_time", lambda t, total: 0.5 / (1 + 0.1 * t)),
        # Past the run's end (t > T) both stay at 0.
        ("linear", lambda t, total: 0.5 * max(0, 1 - t / total)),
        ("cosine", lambda t, total: 0.5 *
         (1 + np.cos(np.pi * min(t, total) / total)) / 2),
    ])
def test_step_size_schedules_follow_their_formulas_to_the_runs_end(
    rule, lr_schedule, reference):
  total = 5
  optimizer = components.make_optimizer(rule, 0.5, 0.1, lr_schedule, total)
  weight = tf.Variable(0.0)
  optimizer.build([weight])
  for t in range(total + 2):
    # The step size of update t, read as the evaluations read it.
    np.testing.assert_allclose(float(optimizer.learning_rate),
                               reference(t, total),
                               rtol=1e-6,
                               atol=1e-7)
    optimizer.apply_gradients([(tf.constant(1.0), weight)])
  if lr_schedule != "inverse_time":
    assert float(optimizer.learning_rate) == 0


def test_a_budget_schedule_needs_the_runs_length():
  with pytest.raises(TypeError, match="total_steps must be an int"):
    components.make_optimizer("sgd", 0.5, 0.0, "cosine")


@pytest.mark.parametrize("lr_schedule", ["linear", "cosine"])
def test_a_run_with_a_budget_schedule_ends_at_step_size_0_and_resumes_exactly(
    digits, tmp_path, lr_schedule):
  settings = dict(sampling="adaptive", steps=6, lr_schedule=lr_schedule)
  whole = loop.train(tiny_config(**settings), data=digits)
  assert whole[0]["learning_rate"] == pytest.approx(0.1)
  assert whole[-1]["learning_rate"] == 0
  resumed = stopped_and_resumed(
      tiny_config(output_dir=str(tmp_path), **settings), digits)
  assert without_clocks(resumed) == without_clocks(whole)
  # Another length would be another schedule: refused, the run as it was.
  metrics = (tmp_path / run_files.METRICS_FILE).read_bytes()
  with pytest.raises(run_files.RunExistsError,
                     match=f"another length \\(steps 6 there, steps 8 here\\): "
                     f"its lr_schedule '{lr_schedule}' follows the run's "
                     "length"):
    loop.train(tiny_config(output_dir=str(tmp_path),
                           resume=True,
                           **dict(settings, steps=8)),
               data=digits)
  assert (tmp_path / run_files.METRICS_FILE).read_bytes() == metrics


def test_a_run_whose_schedules_ignore_its_length_may_resume_longer(
    digits, tmp_path):
  loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  longer = loop.train(tiny_config(output_dir=str(tmp_path),
                                  resume=True,
                                  steps=6),
                      data=digits)
  assert longer[-1]["step"] == 6
  stopped = tiny_config(output_dir=str(tmp_path / "scheduled"),
                        amplitude_schedule="warmup")
  loop.train(stopped, data=digits)
  with pytest.raises(run_files.RunExistsError,
                     match="amplitude_schedule 'warmup' follows"):
    loop.train(dataclasses.replace(stopped, resume=True, epochs=1.0),
               data=digits)


def test_paper_cnn_has_keras_cifar10_cnn_size_and_pads_small_inputs():
  cifar = models.build("cnn", (32, 32, 3), 10, seed=0)
  assert cifar.count_params() == 1250858  # Keras' cifar10_cnn example
  digits_cnn = models.build("cnn", (8, 8, 1), 10, seed=0)
  assert digits_cnn(tf.zeros([2, 8, 8, 1])).shape == (2, 10)


def test_same_seed_builds_the_same_initial_model():
  first = models.build("cnn", (8, 8, 1), 10, seed=7)
  second = models.build("cnn", (8, 8, 1), 10, seed=7)
  for a, b in zip(first.trainable_variables, second.trainable_variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_logistic_penalty_is_half_l2_times_squared_norm():
  model = models.build("logistic", (8, 8, 1), 10, seed=0, l2=0.3)
  model.layers[-1].bias.assign(tf.fill([10], 0.5))
  squared_norm = sum(
      float(tf.reduce_sum(v**2)) for v in model.trainable_variables)
  np.testing.assert_allclose(float(tf.add_n(model.losses)),
                             0.3 / 2 * squared_norm,
                             rtol=1e-5)


@pytest.mark.parametrize("utility_at", ["updated", "step"])
def test_utilities_come_from_h_t_or_h_t_minus_1(digits, utility_at):
  # Logistic regression has no dropout, so training and inference passes
  # agree and the two options differ only in the model they use.
  model = models.build("logistic", (8, 8, 1), 10, seed=0)
  optimizer = components.make_optimizer("sgd", 1.0, 0.0)
  sampler = AdaptiveSampler(len(digits.y_train),
                            amplitude=1.0,
                            decay=0.5,
                            seed=0)
  images, labels = tf.constant(digits.x_train), tf.constant(digits.y_train)
  before = tf.keras.models.clone_model(model)
  before.set_weights(model.get_weights())
  step = steps.make_train_step(model,
                               optimizer,
                               sampler,
                               images,
                               labels,
                               batch_size=32,
                               utility="l1",
                               utility_at=utility_at)
  _, _, _, batch_utilities = step()
  # L1 utilities are > 0, so the drawn examples are those with weight != 1;
  # from uniform, one update sets log w_i = amplitude * u_i.
  drawn = np.flatnonzero(sampler.log_weights.numpy())
  source = model if utility_at == "updated" else before
  expected = utilities.l1(
      labels.numpy()[drawn],
      tf.nn.softmax(source(images.numpy()[drawn], training=False)))
  np.testing.assert_allclose(sampler.log_weights.numpy()[drawn],
                             expected,
                             rtol=1e-5)
  assert batch_utilities.shape == (32,)


@pytest.mark.parametrize("sampling", ["uniform", "adaptive"])
def test_train_records_every_eval_interval(digits, sampling):
  records = loop.train(tiny_config(sampling=sampling), data=digits)
  assert [r["step"] for r in records] == [0, 2, 4]
  metrics = {
      "step", "epoch", "train_loss", "train_accuracy", "test_loss",
      "test_accuracy", "kl", "max_probability", "ess_fraction",
      "misclassified_mass", "learning_rate", "kl_bound", "kl_bound_general",
      "zero_one_gap", *trainer.CLOCKS
  }  # zero_one_gap for logistic
  if sampling == "adaptive":
    metrics.add("heaviest")
  assert set(records[0]) == metrics
  # Corollary 1 needs T >= 1 steps, unique_per_batch a step since the last.
  assert set(records[-1]) == metrics | {"corollary1_bound", "unique_per_batch"}
  for name in ["kl", "kl_bound"]:
    value = records[-1][name]
    assert value > 0 if sampling == "adaptive" else value == 0
  # Q_t is uniform until the first reweighting.
  assert records[0]["ess_fraction"] == pytest.approx(1.0)
  assert records[0]["max_probability"] == pytest.approx(1 / 1500)
  assert records[0]["misclassified_mass"] == pytest.approx(
      1 - records[0]["train_accuracy"])
  assert 1 <= records[-1]["unique_per_batch"] <= 16
  if sampling == "adaptive":
    assert records[-1]["ess_fraction"] < 1


@pytest.mark.parametrize("sampling", ["uniform", "reshuffle", "adaptive"])
def test_adaptive_records_list_the_heaviest_examples(digits, sampling):
  records = loop.train(tiny_config(sampling=sampling, steps=6), data=digits)
  if sampling != "adaptive":
    assert not any("heaviest" in record for record in records)
    return
  # Uniform at step 0: every n q_i is 1, the lower index first.
  assert records[0]["heaviest"] == [[index, 1.0] for index in range(16)]
  for record in records[1:]:
    indices, weights = zip(*record["heaviest"])
    assert len(set(indices)) == 16
    assert all(isinstance(i, int) and 0 <= i < 1500 for i in indices)
    assert list(weights) == sorted(weights, reverse=True)
    assert all(float(f"{w:.4g}") == w for w in weights)
    assert weights[0] == pytest.approx(1500 * record["max_probability"],
                                       rel=1e-3)


def test_tensorboard_shows_the_heaviest_examples_the_record_lists(
    digits, tmp_path):
  records = loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  tables, images = {}, {}
  for path in (tmp_path / "tensorboard" / "train").iterdir():
    for event in tf.compat.v1.train.summary_iterator(str(path)):
      for value in event.summary.value:
        if value.tag == "sampler/heaviest/table":
          tables[event.step] = value.tensor.string_val[0].decode()
        elif value.tag == "sampler/heaviest/images":
          images[event.step] = [
              tf.io.decode_png(png).numpy()
              for png in value.tensor.string_val[2:]
          ]
  assert sorted(tables) == sorted(images) == [r["step"] for r in records]
  for record in records:
    rows = tables[record["step"]].splitlines()[2:]
    shown = [[int(cell) for cell in row.split("|")[2:4]] for row in rows]
    indices = [index for index, _ in record["heaviest"]]
    assert shown == [[index, digits.y_train[index]] for index in indices]
    expected = tf.image.convert_image_dtype(digits.x_train[indices],
                                            tf.uint8,
                                            saturate=True)
    np.testing.assert_array_equal(np.stack(images[record["step"]]), expected)


def test_multi_worker_runs_resume_from_the_last_checkpoint_all_have(tmp_path):
  config = tiny_config(output_dir=str(tmp_path), resume=True)
  fingerprint, latest = resume.worker_state(config)
  assert latest == -1  # no checkpoint yet
  # The per-worker settings aside, the fingerprint is of the settings.
  assert resume.worker_state(
      dataclasses.replace(config, output_dir="elsewhere",
                          cluster_timeout=1))[0] == fingerprint
  other = resume.worker_state(dataclasses.replace(config, seed=1))[0]
  assert other != fingerprint
  common = resume.common_checkpoint_step
  assert common([[fingerprint, 50], [fingerprint, 25]]) == 25
  assert common([[fingerprint, -1], [fingerprint, -1]]) is None
  with pytest.raises(run_files.RunError, match="different settings"):
    common([[fingerprint, 50], [other, 50]])
  with pytest.raises(run_files.RunError, match="and some none"):
    common([[fingerprint, 50], [fingerprint, -1]])


def test_the_settings_offer_the_models_and_utilities_there_are():
  # config names them without importing them (and TensorFlow).
  assert set(config_lib.BUILT_IN_UTILITIES) == set(utilities.UTILITIES)
  for name in config_lib.MODELS:
    models.build(name, (8, 8, 1), 10, seed=0)


def test_uniform_and_adaptive_runs_start_from_the_same_model(digits):
  uniform = loop.train(tiny_config(sampling="uniform", model="cnn"),
                       data=digits)
  adaptive = loop.train(tiny_config(sampling="adaptive", model="cnn"),
                        data=digits)
  # Their first records differ only in the adaptive run's heaviest examples.
  assert uniform[0] == {
      key: value for key, value in adaptive[0].items() if key != "heaviest"
  }


@pytest.mark.skipif(
    bool(tf.config.list_physical_devices("GPU")),
    reason="GPU ops are not deterministic by default; on a GPU "
    "test_deterministic_resumed_run_on_the_gpu_matches_uninterrupted_run "
    "checks resume")
def test_resumed_run_matches_uninterrupted_run(digits, tmp_path):
  # The CNN, so that dropout's random state must be restored too.
  settings = dict(model="cnn", sampling="adaptive", steps=6, eval_interval=2)
  whole = loop.train(tiny_config(output_dir=str(tmp_path / "whole"),
                                 **settings),
                     data=digits)
  stopped = tiny_config(output_dir=str(tmp_path / "stopped"),
                        **dict(settings, steps=4))
  loop.train(stopped, data=digits)
  resumed = loop.train(tiny_config(output_dir=str(tmp_path / "stopped"),
                                   resume=True,
                                   **settings),
                       data=digits)
  assert without_clocks(resumed) == without_clocks(whole)
  assert without_clocks(run_files.read_metrics(str(
      tmp_path / "stopped"))) == without_clocks(whole)
  # Q_t's heaviest examples too, read back from metrics.jsonl.
  assert all(len(record["heaviest"]) == 16 for record in whole)


@pytest.mark.parametrize("sampling,utility_at,forward_passes",
                         [("uniform", "updated", 1), ("adaptive", "step", 1),
                          ("adaptive", "updated", 2)])
def test_records_carry_the_training_calls_clocks(digits, sampling, utility_at,
                                                 forward_passes):
  # Algorithm 1's utility at h_t forwards each batch a second time.
  records = loop.train(tiny_config(sampling=sampling, utility_at=utility_at),
                       data=digits)
  for record in records:
    assert record["examples_forwarded"] == forward_passes * 16 * record["step"]
    assert record["examples_backpropagated"] == 16 * record["step"]
  assert records[0]["train_seconds"] == records[0]["train_cpu_seconds"] == 0
  seconds = [record["train_seconds"] for record in records]
  assert 0 < seconds[1] < seconds[2]


def test_a_resumed_run_continues_its_clocks(digits, tmp_path):
  settings = dict(sampling="adaptive", output_dir=str(tmp_path), steps=6)
  stopped = loop.train(tiny_config(**dict(settings, steps=4)), data=digits)
  resumed = loop.train(tiny_config(resume=True, **settings), data=digits)
  assert resumed[:3] == stopped
  assert resumed[3]["examples_backpropagated"] == 6 * 16
  for clock in ("train_seconds", "train_cpu_seconds"):
    assert resumed[3][clock] > stopped[-1][clock]


def test_a_run_compiled_by_xla_trains_as_one_not_compiled_and_resumes_exactly(
    digits, tmp_path):
  settings = dict(sampling="adaptive", steps=6, eval_interval=2)
  plain = loop.train(tiny_config(**settings), data=digits)
  whole = loop.train(tiny_config(output_dir=str(tmp_path / "whole"),
                                 jit_compile=True,
                                 **settings),
                     data=digits)
  # The same draws and steps, up to the rounding of XLA's fused kernels.
  assert [r["step"] for r in whole] == [r["step"] for r in plain]
  for compiled, not_compiled in zip(whole, without_clocks(plain)):
    for name, value in not_compiled.items():
      if name == "heaviest":  # Near-ties may trade places; the weights, to
        # their 4 digits, in order.
        assert [w for _, w in compiled[name]
               ] == pytest.approx([w for _, w in value], rel=2e-3)
      else:
        assert compiled[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
  stopped = dict(settings,
                 output_dir=str(tmp_path / "stopped"),
                 jit_compile=True)
  loop.train(tiny_config(**dict(stopped, steps=4)), data=digits)
  resumed = loop.train(tiny_config(resume=True, **stopped), data=digits)
  assert without_clocks(resumed) == without_clocks(whole)


def test_run_writes_metrics_checkpoints_and_summaries(digits, tmp_path):
  loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  assert run_files.is_complete(str(tmp_path), 4)
  assert not run_files.is_complete(str(tmp_path), 6)
  assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))
  assert os.listdir(tmp_path / "tensorboard")


def test_new_run_refuses_a_directory_holding_a_run(digits, tmp_path):
  loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  with pytest.raises(run_files.RunExistsError, match="already holds a run"):
    loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)


def test_epochs_set_the_number_of_steps():
  assert tiny_config(epochs=2, batch_size=100).num_steps(1500) == 30
  assert tiny_config(steps=7).num_steps(1500) == 7


@pytest.mark.parametrize("overrides,message", [
    (dict(decay=1.0), "decay must be in"),
    (dict(amplitude=-1.0), "amplitude must be"),
    (dict(sampling="sometimes"), "sampling must be one of"),
    (dict(learning_rate=0.0), r"learning_rate must be finite and > 0"),
    (dict(learning_rate=float("inf")), r"learning_rate must be finite"),
    (dict(lr_decay=float("inf")), r"lr_decay must be finite"),
    (dict(lr_schedule="step"), "lr_schedule must be one of"),
    (dict(utility="reducible_loss"), "needs a validation_size > 0"),
    (dict(irreducible_model="mlp"), "^irreducible_model needs utility "
     "'reducible_loss', got 'zero_one'"),
    (dict(irreducible_model="mlp", reducible_loss_bound=1.0),
     "^irreducible_model and reducible_loss_bound need utility"),
    (dict(utility="reducible_loss",
          validation_size=10,
          reducible_loss_bound=0.0), "reducible_loss_bound must be finite"),
    (dict(irreducible_epochs=float("inf")), "irreducible_epochs must be"),
    (dict(irreducible_model="resnet"), "irreducible_model must be one of"),
    (dict(validation_size=-1), r"validation_size must be an int >= 0"),
    (dict(validation_size=1.5), r"validation_size must be an int >= 0"),
    (dict(validation_size=True), r"validation_size must be an int >= 0"),
    (dict(validation_size=10, data_path="a", test_data_path="b",
          num_classes=2), "validation_size holds out in-memory images"),
    (dict(l2=float("inf")), r"l2 must be finite and > 0, got inf"),
    (dict(epochs=-1.0), "epochs must be finite and > 0"),
    (dict(epochs=float("inf")), "epochs must be finite and > 0, got inf"),
    (dict(seed=-1), r"seed must be in \[0, 2\*\*32\), got -1"),
    (dict(seed=2**32), r"seed must be in \[0, 2\*\*32\)"),
    (dict(steps_per_execution=0), "steps_per_execution must be"),
    (dict(early_evaluations=-1), r"early_evaluations must be an int in"),
    (dict(early_evaluations=54), r"early_evaluations must be an int in"),
    (dict(early_evaluations=True), r"early_evaluations must be an int in"),
    (dict(resume=True), "resume needs an output_dir"),
    (dict(jit_compile=True, strategy="mirrored"), "jit_compile needs"),
    (dict(model="cnn", jit_compile=True, deterministic=True), "max pooling"),
])
def test_bad_config_values_raise_value_error(overrides, message):
  with pytest.raises(ValueError, match=message):
    tiny_config(**overrides)


def run_cli(*args):
  return subprocess.run(
      [sys.executable, "-m", "tf_adasamp.experiment.train", *args],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=120,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def test_cli_bad_flag_value_is_one_line_without_traceback(tmp_path):
  result = run_cli("--decay=1.5", f"--output_dir={tmp_path}")
  assert result.returncode != 0
  assert ("tf-adasamp-train: decay must be in (0, 1), got 1.5\n"
          in result.stderr)
  assert "Traceback" not in result.stderr


def test_cli_takes_a_flagfile_and_writes_metrics(tmp_path):
  flagfile = tmp_path / "flags.txt"
  flagfile.write_text("\n".join([
      "--model=logistic", "--steps=4", "--eval_interval=2", "--noprogress",
      "--deterministic", f"--output_dir={tmp_path / 'run'}"
  ]))
  result = run_cli(f"--flagfile={flagfile}")
  assert result.returncode == 0, result.stderr
  with open(tmp_path / "run" / run_files.METRICS_FILE) as f:
    assert [json.loads(line)["step"] for line in f] == [0, 2, 4]


@pytest.mark.gpu
@pytest.mark.skipif(not tf.config.list_physical_devices("GPU"),
                    reason="TensorFlow sees no GPU")
# The cnn compiled by XLA is refused: test_bad_config_values_raise_value_error.
@pytest.mark.parametrize("model,jit_compile", [("cnn", False),
                                               ("logistic", True)])
def test_deterministic_resumed_run_on_the_gpu_matches_uninterrupted_run(
    tmp_path, model, jit_compile):
  # Op determinism is for the whole process: a process per run.
  common = [
      f"--model={model}", "--steps=6", "--eval_interval=2", "--batch_size=16",
      "--noprogress", "--deterministic", f"--jit_compile={jit_compile}"
  ]
  for name, extra in [("whole", []), ("stopped", ["--steps=4"]),
                      ("stopped", ["--resume"])]:
    result = run_cli(*common, *extra, f"--output_dir={tmp_path / name}")
    assert result.returncode == 0, result.stderr
  whole = run_files.read_metrics(str(tmp_path / "whole"))
  assert [r["step"] for r in whole] == [0, 2, 4, 6]
  assert without_clocks(run_files.read_metrics(str(
      tmp_path / "stopped"))) == without_clocks(whole)


def test_resume_refuses_a_run_of_other_settings(digits, tmp_path):
  loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  with pytest.raises(run_files.RunExistsError,
                     match=f"amplitude: {defaults.AMPLITUDE} there, 2.0 "
                     "here"):
    loop.train(tiny_config(output_dir=str(tmp_path), resume=True,
                           amplitude=2.0),
               data=digits)


def test_steps_per_execution_does_not_change_the_run(digits, on_cpu):
  settings = dict(model="cnn", steps=7, eval_interval=3)
  one = loop.train(tiny_config(steps_per_execution=1, **settings), data=digits)
  many = loop.train(tiny_config(steps_per_execution=2, **settings), data=digits)
  assert [r["step"] for r in many] == [0, 3, 6, 7]
  assert without_clocks(many) == without_clocks(one)


def test_resume_ignores_a_tampered_checkpoint_entry_never_running_it(
    digits, tmp_path):
  config = tiny_config(output_dir=str(tmp_path / "run"))
  loop.train(config, data=digits)
  marker = tmp_path / "pwned"

  class Payload:

    def __reduce__(self):
      return (os.system, (f"touch {marker}",))

  class Pickled(tf.train.experimental.PythonState):
    """What an old checkpoint's bound_tracker entry was: a pickle."""

    def serialize(self):
      return pickle.dumps(Payload())

    def deserialize(self, string_value):
      pickle.loads(string_value)

  tampered = tf.train.Checkpoint(bound_tracker=Pickled(),
                                 step=tf.Variable(8, dtype=tf.int64))
  tf.train.CheckpointManager(tampered,
                             str(tmp_path / "run" / "checkpoints"),
                             max_to_keep=5).save(checkpoint_number=8)
  with pytest.raises(run_files.RunError,
                     match="does not hold this trainer's state"):
    loop.train(dataclasses.replace(config, resume=True, steps=8), data=digits)
  assert not marker.exists()
  # The run's records were left as they were.
  assert [r["step"] for r in run_files.read_metrics(config.output_dir)
         ] == [0, 2, 4]
  # The payload is live: unpickled, as the old trainer did, it runs.
  tf.train.Checkpoint(bound_tracker=Pickled()).restore(
      tf.train.latest_checkpoint(str(tmp_path / "run" / "checkpoints")))
  assert marker.exists()


def _whole_and_stopped_at_step_4(digits, tmp_path):
  """The records of a 6-step run, and the config of the same run stopped
  after step 4 (its files in tmp_path/stopped)."""
  settings = dict(model="logistic", steps=6, eval_interval=2)
  whole = loop.train(tiny_config(output_dir=str(tmp_path / "whole"),
                                 **settings),
                     data=digits)
  stopped = tiny_config(output_dir=str(tmp_path / "stopped"),
                        **dict(settings, steps=4))
  loop.train(stopped, data=digits)
  return whole, stopped


def test_a_kill_while_resuming_keeps_the_metrics(digits, tmp_path, monkeypatch,
                                                 on_cpu):
  whole, stopped = _whole_and_stopped_at_step_4(digits, tmp_path)

  replace = os.replace

  def killed(source, destination):
    if destination.endswith(run_files.METRICS_FILE):
      raise KeyboardInterrupt
    replace(source, destination)

  # Killed at the resumed run's first write of metrics.jsonl.
  monkeypatch.setattr(loop.os, "replace", killed)
  resume = dataclasses.replace(stopped, resume=True, steps=6)
  with pytest.raises(KeyboardInterrupt):
    loop.train(resume, data=digits)
  monkeypatch.undo()
  assert without_clocks(run_files.read_metrics(
      stopped.output_dir)) == without_clocks(whole[:3])
  assert not [
      name for name in os.listdir(stopped.output_dir) if name.endswith(".tmp")
  ]
  assert without_clocks(loop.train(resume,
                                   data=digits)) == without_clocks(whole)


def _resume_to_the_whole_run(stopped, whole, digits):
  """Resumes the run stopped at step 4 to step 6: it returns, and leaves in
  metrics.jsonl, the records of the run never stopped."""
  resumed = loop.train(dataclasses.replace(stopped, resume=True, steps=6),
                       data=digits)
  assert without_clocks(resumed) == without_clocks(whole)
  assert without_clocks(run_files.read_metrics(
      stopped.output_dir)) == without_clocks(whole)


def test_resume_drops_a_cut_last_metrics_line(digits, tmp_path, on_cpu):
  whole, stopped = _whole_and_stopped_at_step_4(digits, tmp_path)
  path = tmp_path / "stopped" / run_files.METRICS_FILE
  with open(path, "a") as f:
    f.write('{"step": 6, "train_lo')  # as a kill mid-append leaves it
  assert without_clocks(run_files.read_metrics(
      stopped.output_dir)) == without_clocks(whole[:3])
  _resume_to_the_whole_run(stopped, whole, digits)


def test_resume_redoes_a_record_cut_at_the_checkpoints_step(
    digits, tmp_path, on_cpu):
  whole, stopped = _whole_and_stopped_at_step_4(digits, tmp_path)
  path = tmp_path / "stopped" / run_files.METRICS_FILE
  lines = path.read_text().splitlines(keepends=True)
  # The record of step 4, whose checkpoint was written, cut by a kill.
  path.write_text("".join(lines[:-1]) + lines[-1][:20])
  assert without_clocks(run_files.read_metrics(
      stopped.output_dir)) == without_clocks(whole[:2])
  _resume_to_the_whole_run(stopped, whole, digits)


def test_a_resumed_run_writes_each_summary_step_once(digits, tmp_path):
  settings = dict(model="logistic", eval_interval=2, output_dir=str(tmp_path))
  loop.train(tiny_config(steps=4, **settings), data=digits)
  loop.train(tiny_config(steps=6, resume=True, **settings), data=digits)
  for run in ("train", "validation"):
    steps = {}
    for event_file in (tmp_path / "tensorboard" / run).iterdir():
      for event in tf.compat.v1.train.summary_iterator(str(event_file)):
        for value in event.summary.value:
          steps.setdefault(value.tag, []).append(event.step)
    assert sorted(steps["loss"]) == [0, 2, 4, 6], run
    for tag, tag_steps in steps.items():
      # Corollary 1's bound needs a step: none at step 0.
      assert sorted(set(tag_steps)) == sorted(tag_steps), (run, tag)


@pytest.mark.parametrize("make_path,message", [
    (lambda tmp: tmp / "file", "is a file, not a directory"),
    (lambda tmp: tmp / "file" / "run", "Not a directory"),
    (lambda tmp: "/sys/tf_adasamp_run", "cannot write to output_dir"),
])
def test_unwritable_output_dir_is_a_run_error(digits, tmp_path, make_path,
                                              message):
  (tmp_path / "file").write_text("")
  with pytest.raises(run_files.RunError, match=message):
    loop.train(tiny_config(output_dir=str(make_path(tmp_path))), data=digits)


def test_batch_larger_than_the_data_is_a_run_error(digits, tmp_path):
  with pytest.raises(run_files.RunError, match="larger than the 1500"):
    loop.train(tiny_config(batch_size=1501, output_dir=str(tmp_path / "run")),
               data=digits)
  assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("utility,jit_compile,when",
                         [("l1", False, "at step 1"), ("l1", True, "at step 1"),
                          ("zero_one", False, "at step 2")])
def test_diverging_run_names_its_step_and_keeps_its_checkpoint(
    digits, tmp_path, utility, jit_compile, when):
  # l1: step 1's update leaves NaN weights, so its utilities (of the updated
  # model) are NaN: the step reports them and the loop stops there, compiled
  # by XLA or not. zero_one stays finite, and the evaluation at step 2 finds
  # the NaN loss.
  config = tiny_config(model="cnn",
                       learning_rate=1e30,
                       utility=utility,
                       utility_at="updated",
                       steps=4,
                       eval_interval=2,
                       jit_compile=jit_compile,
                       output_dir=str(tmp_path))
  with pytest.raises(controller.DivergedError,
                     match=f"diverged {when} .*smaller than 1e\\+30"):
    loop.train(config, data=digits)
  assert [r["step"] for r in run_files.read_metrics(str(tmp_path))] == [0]


def test_tensorboard_has_train_and_validation_runs_and_the_samplers_view(
    digits, tmp_path):
  loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)

  def tags(run):
    found = {}
    for path in (tmp_path / "tensorboard" / run).iterdir():
      for event in tf.compat.v1.train.summary_iterator(str(path)):
        for value in event.summary.value:
          found.setdefault(value.tag,
                           set()).add(value.metadata.plugin_data.plugin_name)
    return found

  assert sorted(os.listdir(tmp_path / "tensorboard")) == ["train", "validation"]
  train, validation = tags("train"), tags("validation")
  assert validation == {"loss": {"scalars"}, "accuracy": {"scalars"}}
  expected = {
      "loss", "accuracy", "epoch", "sampler/kl_divergence",
      "sampler/max_probability", "sampler/effective_sample_size",
      "sampler/distinct_draws", "sampler/misclassified_mass", "learning_rate",
      "bounds/kl_bound", "bounds/kl_bound_general", "bounds/corollary1_bound",
      "bounds/zero_one_gap"
  }
  assert {tag for tag, plugins in train.items() if plugins == {"scalars"}
         } == expected
  assert train["sampler/log_n_probability"] == {"histograms"}
  # An adaptive run's heaviest examples (tiny_config's sampling).
  assert train["sampler/heaviest/images"] == {"images"}
  assert train["sampler/heaviest/table"] == {"text"}


def test_a_validation_split_is_never_trained_on_and_is_evaluated(
    digits, tmp_path):
  # The held-out images are NaN: a run that read one in a step or in the
  # training set's evaluation would have a NaN loss.
  numbers = np.arange(digits.num_train, dtype=np.float32)
  numbered = dataclasses.replace(digits, x_train=numbers.reshape(-1, 1, 1, 1))
  held = datasets.with_validation(numbered, 300).x_validation.ravel()
  x_train = digits.x_train.copy()
  x_train[held.astype(int)] = np.nan
  poisoned = dataclasses.replace(digits, x_train=x_train)
  records = loop.train(tiny_config(validation_size=300,
                                   output_dir=str(tmp_path)),
                       data=poisoned)
  for record in records:
    assert np.isfinite(record["train_loss"])
    assert np.isnan(record["validation_loss"])
    assert record["epoch"] == record["step"] * 16 / 1200
  assert list(records[0])[:7] == [
      "step", "epoch", "train_loss", "train_accuracy", "validation_loss",
      "validation_accuracy", "test_loss"
  ]
  # TensorBoard's validation run is the split's, the test set a run of its
  # own.
  assert sorted(os.listdir(tmp_path /
                           "tensorboard")) == ["test", "train", "validation"]
  clean = loop.train(tiny_config(validation_size=300), data=digits)
  assert 0 <= clean[-1]["validation_accuracy"] <= 1
  assert "validation_loss" not in loop.train(tiny_config(), data=digits)[0]


def test_a_validation_split_that_leaves_no_training_examples_is_refused(
    digits, tmp_path):
  with pytest.raises(run_files.RunError,
                     match="validation_size: validation size 1500 leaves no "
                     "training"):
    loop.train(tiny_config(validation_size=1500, output_dir=str(tmp_path)),
               data=digits)
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("sampling", ["uniform", "adaptive"])
def test_progress_bar_names_the_batches_it_measures(digits, capsys, sampling):
  loop.train(tiny_config(sampling=sampling), data=digits, progress=True)
  shown = capsys.readouterr().out
  assert f"{sampling} batch loss" in shown
  assert f"{sampling} batch accuracy" in shown


def test_progress_off_a_terminal_is_plain_lines(digits, capsys):
  loop.train(tiny_config(), data=digits, progress=True)
  shown = capsys.readouterr().out
  # No terminal control codes (Keras's bar redraws with them), and the last
  # step's line.
  assert not set("\x1b\r\b") & set(shown)
  assert "step 4/4 - adaptive batch loss: " in shown


def _refused_resume_changes_no_variable(config, digits, monkeypatch, path):
  """Resumes `config` from the damaged checkpoint at `path`: refused, with
  every value the checkpoint restores into as it was before."""
  restore, restored = resume.restore, []

  def recorded(checkpoint, path, total_steps=None):
    restored.append((checkpoint, checkpoint_edits.checkpoint_state(checkpoint)))
    restore(checkpoint, path, total_steps)

  monkeypatch.setattr(resume, "restore", recorded)
  # The check before the run writes anything refuses some damage first;
  # here restore refuses it.
  monkeypatch.setattr(resume, "check_latest_checkpoint", lambda *_: None)
  with pytest.raises(run_files.RunError, match=f"cannot resume from {path}"):
    loop.train(dataclasses.replace(config, resume=True, steps=6), data=digits)
  [(checkpoint, before)] = restored
  after = checkpoint_edits.checkpoint_state(checkpoint)
  # The model, optimizer, sampler, bound sums and step: nothing assigned.
  assert len(before) == len(after) > 10
  for value, value_before in zip(after, before):
    np.testing.assert_array_equal(value, value_before)


@pytest.mark.parametrize("damage", checkpoint_edits.SAVE_COUNTER_DAMAGE)
def test_a_checkpoint_with_a_corrupt_save_counter_changes_no_variable(
    digits, tmp_path, monkeypatch, damage):
  config = tiny_config(output_dir=str(tmp_path))
  loop.train(config, data=digits)
  path = tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))
  checkpoint_edits.corrupt_save_counter(path, damage)
  checkpoint_edits.forge_digest(path)
  _refused_resume_changes_no_variable(config, digits, monkeypatch, path)


def test_a_checkpoint_with_a_weight_of_another_shape_changes_no_variable(
    digits, tmp_path, monkeypatch):
  config = tiny_config(output_dir=str(tmp_path))
  loop.train(config, data=digits)
  path = tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))
  # The model's last weight, one entry longer: refused only as it is
  # assigned, after the checkpoint's other values.
  reader = tf.train.load_checkpoint(path)
  last = max(key for key in reader.get_variable_to_shape_map()
             if key.startswith("model/"))
  checkpoint_edits.edited_checkpoint(
      path, last, lambda value: np.concatenate([value, value[:1]]), copy=path)
  checkpoint_edits.forge_digest(path)
  _refused_resume_changes_no_variable(config, digits, monkeypatch, path)
