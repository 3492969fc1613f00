"""tf_adasamp.distribute: one adaptive distribution across replicas and workers.

The strategies run in worker processes (tests/support/distribute_worker.py):
MirroredStrategy needs two logical CPU devices, which can only be configured
before TensorFlow starts its runtime, and this pytest process shares its
TensorFlow with every other test file, in whatever order they run;
MultiWorkerMirroredStrategy needs a process per worker anyway. The checks
replay each run's global batches on a single-device `AdaptiveSampler` here.
The multi-worker runs carry the `multi_worker` mark.
"""

import collections
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest
from scipy import stats
import tensorflow as tf

import child_process
import distribute_worker as worker
from tf_adasamp import AdaptiveSampler
from tf_adasamp import distribute

TIMEOUT_S = 120
WORKER = pathlib.Path(child_process.__file__).with_name("distribute_worker.py")

# outputs: each worker's saved arrays, by task; start: the checkpoint the run
# restored; checkpoint: the one it wrote after training.
Run = collections.namedtuple("Run", "outputs start checkpoint")


def plain_sampler(**kwargs):
  return AdaptiveSampler(worker.NUM_EXAMPLES,
                         worker.AMPLITUDE,
                         worker.DECAY,
                         seed=worker.SEED,
                         **kwargs)


def run_workers(mode, out, restore, num_workers):
  """Runs the worker processes to completion, or kills them at the timeout.

  They run on CPUs, also where there is a GPU: their replicas are logical
  CPU devices or workers, and `replay` checks their state bit for bit on
  the CPU.
  """
  env = child_process.environment(CUDA_VISIBLE_DEVICES="")
  ports = child_process.free_ports(num_workers)
  processes, logs = [], []
  try:
    for task in range(num_workers):
      if mode == "multi_worker":
        env["TF_CONFIG"] = child_process.tf_config(ports, task)
      logs.append(open(out / f"log{task}.txt", "w+"))
      command = [sys.executable, str(WORKER), mode, str(out)]
      processes.append(
          subprocess.Popen(command +
                           (["--restore", restore] if restore else []),
                           env=env,
                           stdout=logs[-1],
                           stderr=subprocess.STDOUT))
    deadline = time.monotonic() + TIMEOUT_S
    # Until all finish, one fails (the others may wait for it forever) or
    # time runs out.
    while (any(p.poll() is None for p in processes) and
           not any(p.returncode for p in processes) and
           time.monotonic() < deadline):
      time.sleep(0.1)
    for process, log in zip(processes, logs):
      if process.returncode:
        log.seek(0)
        pytest.fail(f"{mode} worker failed:\n{log.read()[-4000:]}")
    if any(p.returncode is None for p in processes):
      pytest.fail(f"{mode} workers still running after {TIMEOUT_S} s")
  finally:
    for process in processes:
      if process.poll() is None:
        process.kill()
        process.wait()
    for log in logs:
      log.close()
  return Run(
      [dict(np.load(out / f"task{task}.npz")) for task in range(num_workers)],
      restore, str(out / "ckpt"))


@pytest.fixture(scope="module")
def start_checkpoint(tmp_path_factory):
  """A plain sampler's checkpoint away from uniform, to start the runs."""
  sampler = plain_sampler()
  rng = np.random.default_rng(1)
  for _ in range(5):
    sampler.update(sampler.sample(8), rng.normal(size=8))
  return tf.train.Checkpoint(sampler=sampler).write(
      str(tmp_path_factory.mktemp("plain") / "ckpt"))


@pytest.fixture(scope="module")
def mirrored_run(start_checkpoint, tmp_path_factory):
  """Two replicas of one process; starts from a plain sampler's checkpoint."""
  return run_workers("mirrored",
                     tmp_path_factory.mktemp("mirrored"),
                     start_checkpoint,
                     num_workers=1)


@pytest.fixture(scope="module")
def multi_worker_run(mirrored_run, tmp_path_factory):
  """Two workers of one replica; starts from the mirrored run's checkpoint."""
  return run_workers("multi_worker",
                     tmp_path_factory.mktemp("multi_worker"),
                     mirrored_run.checkpoint,
                     num_workers=2)


@pytest.fixture(scope="module")
def trainer_run(tmp_path_factory):
  """The trainer with strategy="mirrored", two replicas."""
  return run_workers("trainer",
                     tmp_path_factory.mktemp("trainer"),
                     None,
                     num_workers=1)


def stage_part(run):
  """A run's steps through the tf.data stage, as a run from a fresh
  sampler."""

  def stage_outputs(output):
    stage = {
        key.removeprefix("stage_"): value
        for key, value in output.items()
        if key.startswith("stage_")
    }
    return {**stage, "replica_ids": output["replica_ids"]}

  return Run([stage_outputs(output) for output in run.outputs], None, None)


@pytest.fixture
def run(request):
  kind, _, part = request.param.partition(":")
  run = request.getfixturevalue(f"{kind}_run")
  return stage_part(run) if part else run


def runs(*parts):
  """Parametrizes `run` over both strategies and the given parts of a run:
  "" (the sampler used directly) or "stage" (through the tf.data stage)."""
  params = []
  for kind in ("mirrored", "multi_worker"):
    marks = [pytest.mark.multi_worker] if kind == "multi_worker" else []
    params += [
        pytest.param(":".join(filter(None, [kind, part])), marks=marks)
        for part in parts
    ]
  return pytest.mark.parametrize("run", params, indirect=True)


RUNS = runs("")
ALL_RUNS = runs("", "stage")


def global_replicas(run, key):
  """Every worker's [steps, local replicas, B] `key`, as [steps, R, B] in
  replica-id order."""
  values = np.concatenate([o[key] for o in run.outputs], axis=1)
  ids = np.concatenate([o["replica_ids"] for o in run.outputs])
  return values[:, np.argsort(ids)]


def restored(checkpoint):
  """A plain sampler, restored from `checkpoint` if not None."""
  sampler = plain_sampler()
  if checkpoint:
    tf.train.Checkpoint(sampler=sampler).read(checkpoint).assert_consumed()
  return sampler


def replay(run):
  """Feeds the run's global batches, in replica order, to one sampler.

  Returns the sampler and Q_t before each step, [steps, n]. On the CPU, as
  the runs.
  """
  with tf.device("/CPU:0"):
    sampler = restored(run.start)
    distributions = []
    for batch in global_replicas(run, "draws"):
      distributions.append(sampler.probabilities().numpy())
      replicas = np.arange(len(batch))[:, np.newaxis]
      sampler.update(batch.reshape(-1),
                     tf.reshape(worker.utilities(batch, replicas), [-1]))
  return sampler, np.stack(distributions)


@ALL_RUNS
def test_every_copy_of_the_state_stays_bit_identical(run):
  # At the end; each draw's probability, below, checks every step.
  first = run.outputs[0]
  keys = [key for key in first if key.startswith("state")]
  assert len(keys) >= len(plain_sampler().variables)
  for output in run.outputs:
    assert output["state0"].shape[0] == len(output["replica_ids"])
    for key in keys:
      for copy in output[key]:
        np.testing.assert_array_equal(copy, first[key][0])


@ALL_RUNS
def test_copies_equal_one_sampler_fed_the_global_batches_in_replica_order(run):
  # Indices that both replicas drew carry two utilities; the first wins.
  draws = global_replicas(run, "draws")
  assert sum(np.intersect1d(step[0], step[1]).size for step in draws) > 100
  sampler, _ = replay(run)
  for k, variable in enumerate(sampler.variables):
    for output in run.outputs:
      for copy in output[f"state{k}"]:
        np.testing.assert_array_equal(copy, variable.numpy())


@ALL_RUNS
def test_each_draw_has_its_single_device_probability(run):
  _, distributions = replay(run)
  draws = global_replicas(run, "draws")
  probabilities = global_replicas(run, "probabilities")
  for distribution, batch, batch_probabilities in zip(distributions, draws,
                                                      probabilities):
    np.testing.assert_array_equal(batch_probabilities, distribution[batch])


@ALL_RUNS
def test_draw_frequencies_match_single_device_distribution(run):
  _, distributions = replay(run)
  draws = global_replicas(run, "draws")
  per_step = draws[0].size
  counts = np.bincount(draws.reshape(-1), minlength=worker.NUM_EXAMPLES)
  expected = per_step * distributions.sum(axis=0)
  # Q_t is far from uniform, so the test has power against a wrong one.
  assert distributions[-1].max() > 4 * distributions[-1].min()
  assert stats.chisquare(counts, expected).pvalue > 1e-3


@ALL_RUNS
def test_replicas_draw_from_different_streams(run):
  draws = global_replicas(run, "draws")
  # Independent draws coincide with probability sum_i Q_t(i)^2, about 0.04.
  assert np.mean(draws[:, 0] == draws[:, 1]) < 0.15


@RUNS
def test_checkpoint_restores_without_a_strategy(run):
  sampler = restored(run.checkpoint)
  for k, variable in enumerate(worker.state_variables(sampler)):
    np.testing.assert_array_equal(variable.numpy(),
                                  run.outputs[0][f"state{k}"][0])


@RUNS
def test_pipeline_shares_are_slices_of_one_single_device_draw(run):
  sampler = restored(run.checkpoint)
  num_pipelines = int(run.outputs[0]["num_pipelines"])
  assert num_pipelines == len(run.outputs)
  num_local = len(run.outputs[0]["replica_ids"])
  size = worker.BATCH_SIZE
  # Element e of every pipeline is the e-th draw, on step e // num_local.
  for element in range(worker.SHARE_STEPS * num_local):
    indices, probabilities = sampler.sample_with_probabilities(num_pipelines *
                                                               size)
    step, replica = divmod(element, num_local)
    for pipeline, output in enumerate(run.outputs):
      piece = slice(pipeline * size, (pipeline + 1) * size)
      np.testing.assert_array_equal(output["shares"][step, replica],
                                    indices[piece])
      np.testing.assert_array_equal(
          output["share_probabilities"][step, replica], probabilities[piece])


@RUNS
def test_update_refuses_a_one_copy_sampler_under_several_replicas(run):
  assert "create_sampler" in str(run.outputs[0]["refusal"])


@runs("stage")
def test_stage_batches_hold_the_drawn_examples(run):
  for output in run.outputs:
    np.testing.assert_array_equal(output["examples"], output["draws"])


def test_keras_fit_keeps_the_copies_identical(mirrored_run):
  # fit of AdaptiveSamplingModel on the stage's distributed dataset.
  output = mirrored_run.outputs[0]
  assert output["keras_copies_identical"]
  assert np.all(np.isfinite(output["keras_loss"]))
  assert np.all(output["keras_kl"] > 0)


def test_trainer_trains_with_two_mirrored_replicas(trainer_run):
  output = trainer_run.outputs[0]
  assert output["replicas"] == 2
  assert output["test_accuracy"][-1] > output["test_accuracy"][0] + 0.2
  assert np.all(output["kl"][1:] > 0)


def test_default_strategy_gives_a_plain_sampler():
  sampler = distribute.create_sampler(tf.distribute.get_strategy(),
                                      worker.NUM_EXAMPLES,
                                      worker.AMPLITUDE,
                                      worker.DECAY,
                                      seed=worker.SEED)
  reference = plain_sampler()
  assert not isinstance(sampler.tree.variable, tf.distribute.DistributedValues)
  np.testing.assert_array_equal(sampler.sample(50), reference.sample(50))


@pytest.mark.parametrize("function", [False, True])
@pytest.mark.parametrize("dtype,utility_dtype,index_dtype", [
    (tf.float64, tf.float64, tf.int64),
    (tf.float64, tf.float32, tf.int32),
    (tf.float32, tf.float64, tf.int64),
    (tf.float32, tf.float32, tf.int32),
])
def test_gathered_update_passes_utilities_bit_for_bit(function, dtype,
                                                      utility_dtype,
                                                      index_dtype):
  strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
  sampler, reference = plain_sampler(dtype=dtype), plain_sampler(dtype=dtype)
  # A repeated index keeps its first utility; utilities pass bit for bit
  # through the replicas' all-gather.
  indices = tf.constant([3, 1, 3, 0], index_dtype)
  utilities = tf.constant([1.0 / 3, -2.0, 5.0, -1e-30], utility_dtype)
  update = lambda: sampler.update(indices, utilities)
  with strategy.scope():
    strategy.run(tf.function(update) if function else update)
  reference.update(indices, utilities)
  for actual, expected in zip(sampler.variables, reference.variables):
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


@pytest.mark.parametrize("mirrored", [True, False])
@pytest.mark.parametrize("context", ["replica", "cross_replica", "outside"])
def test_update_applies_the_batch_once_in_every_context(mirrored, context):
  # One replica, in this process; several replicas: the worker runs above.
  strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
  if mirrored:
    sampler = distribute.create_sampler(strategy, worker.NUM_EXAMPLES,
                                        worker.AMPLITUDE, worker.DECAY)
  else:
    sampler = plain_sampler()  # One copy, outside the strategy.
  reference = plain_sampler()
  indices, utilities = [3, 1, 3, 0], [1.0, -2.0, 5.0, 0.5]
  if context == "replica":
    with strategy.scope():
      strategy.run(tf.function(lambda: sampler.update(indices, utilities)))
  else:
    values = strategy.run(
        lambda: (tf.constant(indices), tf.constant(utilities, tf.float64)))
    if context == "cross_replica":
      with strategy.scope():
        sampler.update(*values)
    else:
      sampler.update(*values)
  reference.update(indices, utilities)
  for actual, expected in zip(sampler.variables, reference.variables):
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


@pytest.mark.parametrize("stratified", [False, True])
def test_one_share_is_the_single_device_batch(stratified):
  sampler, reference = (plain_sampler(stratified=stratified) for _ in "ab")
  for each in (sampler, reference):
    each.update([1, 5, 9], [2.0, -1.0, 1.0])
  for _ in range(2):
    share = distribute.sample_share(sampler, 7, 0, 1)
    expected = reference.sample_with_probabilities(7)
    for actual, wanted in zip(share, expected):
      np.testing.assert_array_equal(actual, wanted)


@pytest.mark.parametrize("stratified", [False, True])
def test_shares_of_one_call_make_the_single_device_batch(stratified):
  num_shares, size = 3, 7
  # One sampler per pipeline, their generators in step, as on workers.
  samplers = [plain_sampler(stratified=stratified) for _ in range(num_shares)]
  reference = plain_sampler(stratified=stratified)
  for sampler in [*samplers, reference]:
    sampler.update([1, 5, 9], [2.0, -1.0, 1.0])
  for _ in range(2):
    shares = [
        distribute.sample_share(sampler, size, share, num_shares)
        for share, sampler in enumerate(samplers)
    ]
    indices, probabilities = reference.sample_with_probabilities(num_shares *
                                                                 size)
    np.testing.assert_array_equal(np.concatenate([s[0] for s in shares]),
                                  indices)
    np.testing.assert_array_equal(np.concatenate([s[1] for s in shares]),
                                  probabilities)


@pytest.mark.parametrize("call,error", [
    (lambda s: distribute.create_sampler("mirrored", 10, 1.0, 0.9), TypeError),
    (lambda s: distribute.sample_share(s, 4, 2, 2), ValueError),
    (lambda s: distribute.sample_share(s, 4, -1, 2), ValueError),
    (lambda s: distribute.sample_share(s, 4, 1.0, 2), TypeError),
    (lambda s: distribute.sample_share(s, 0, 0, 2), ValueError),
    (lambda s: distribute.sample_share(s, 4, 0, 0), ValueError),
])
def test_bad_arguments_are_refused(call, error):
  with pytest.raises(error):
    call(plain_sampler())


@pytest.mark.parametrize("context", ["replica", "cross_replica"])
def test_reads_work_on_mirrored_state(context):
  strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
  sampler = distribute.create_sampler(strategy, worker.NUM_EXAMPLES,
                                      worker.AMPLITUDE, worker.DECAY)
  reference = plain_sampler()
  for s in (sampler, reference):
    s.update([1, 5, 5], [2.0, -1.0, 1.0])

  def reads(s):
    return s.kl_divergence(), s.probabilities(), s.tree.weights()

  with strategy.scope():
    if context == "replica":
      values = strategy.run(tf.function(lambda: reads(sampler)))
    else:
      values = reads(sampler)
  for actual, expected in zip(values, reads(reference)):
    np.testing.assert_array_equal(actual, expected)


MIRRORED_CONTROLS = """
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import tf_adasamp
from tf_adasamp import distribute, schedules
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
settings = dict(amplitude=schedules.warmup(2.0, 4), decay=0.5, seed=3,
                epsilon=0.2, beta=schedules.anneal(1.0, 5))
sampler = distribute.create_sampler(strategy, 50, **settings)
plain = tf_adasamp.AdaptiveSampler(50, **settings)

@tf.function
def step(in_replicas):
  indices, probabilities = distribute.sample_share(sampler, 8, 0, 1)
  weights = sampler.importance_weights(probabilities)
  utilities = tf.cast(indices % 3 == 0, tf.float64)
  if in_replicas:  # each replica reports half of the batch
    def update(context):
      share = context.replica_id_in_sync_group * 4
      return indices[share:share + 4], utilities[share:share + 4]
    halves = strategy.experimental_distribute_values_from_function(update)
    strategy.run(sampler.update, halves)
  else:
    sampler.update(indices, utilities)
  return indices, weights

for t in range(8):
  indices, weights = step(t % 2 == 1)
  expected = plain._sample_from(plain.tree.variable, plain.uniforms(8))
  np.testing.assert_array_equal(indices, expected[0])
  np.testing.assert_allclose(weights, plain.importance_weights(expected[1]),
                             rtol=1e-14)
  plain.update(expected[0], tf.cast(expected[0] % 3 == 0, tf.float64))
for name in ("_update_count", "log_weights"):
  for copy in strategy.experimental_local_results(getattr(sampler, name)):
    np.testing.assert_array_equal(copy, getattr(plain, name))
print("identical")
"""


def test_mirrored_copies_draw_weigh_and_count_as_one_sampler():
  # Logical CPU devices are set before TensorFlow starts: in a child.
  result = subprocess.run(
      [sys.executable, "-c", MIRRORED_CONTROLS],
      env=child_process.environment(CUDA_VISIBLE_DEVICES=""),
      capture_output=True,
      text=True,
      timeout=300)
  assert result.returncode == 0, result.stderr[-4000:]
  assert result.stdout.split()[-1] == "identical"
