"""The sampler inside steps compiled with `jit_compile=True` (XLA on the CPU):
the ops' XLA kernels against the ops themselves."""

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import child_process
from kernel_helpers import assert_same_state
from kernel_helpers import state_of
from kernel_helpers import train
import tf_adasamp
from tf_adasamp import AdaptiveSampler
from tf_adasamp import data
from tf_adasamp import ops
from tf_adasamp import SumTree

pytestmark = pytest.mark.usefixtures("on_cpu")


# Many small batches; and batches large enough to be split across the
# intra-op pool (TensorFlow's for the op, XLA's for the compiled custom
# call), an odd size leaving a last chunk shorter than the rest.
@pytest.mark.parametrize("num_examples, steps, batch_size",
                         [(1000, 60, 32), (100_000, 3, 5 * 2048 + 3)])
@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("stratified", [False, True])
def test_a_compiled_step_draws_and_reweights_as_the_ops_do(
    num_examples, steps, batch_size, dtype, stratified):
  samplers = [
      AdaptiveSampler(num_examples=num_examples,
                      amplitude=0.5,
                      decay=0.9,
                      seed=7,
                      stratified=stratified,
                      dtype=dtype) for _ in range(2)
  ]
  last_batches = [
      train(sampler,
            steps=steps,
            batch_size=batch_size,
            jit_compile=jit_compile)
      for sampler, jit_compile in zip(samplers, (False, True))
  ]
  # Bit for bit: the draws, the log weights, both caches, the log-scale and
  # the generator's state.
  assert_same_state(last_batches[1] + state_of(samplers[1]),
                    last_batches[0] + state_of(samplers[0]))
  assert samplers[1].kl_divergence().numpy() > 0


def test_a_compiled_sample_of_a_large_batch_matches_the_op():
  tree = SumTree(50_000, dtype=tf.float64)
  tree.set(tf.range(50_000, dtype=tf.int64),
           tf.random.stateless_uniform([50_000], [1, 2], dtype=tf.float64))
  uniforms = tf.random.stateless_uniform([3 * 4096 + 1], [3, 4],
                                         dtype=tf.float64)
  compiled = tf.function(tree.sample, jit_compile=True)(uniforms)
  for got, expected in zip(compiled, tree.sample(uniforms)):
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_a_compiled_sample_matches_the_op():
  tree = SumTree(5, dtype=tf.float64)
  tree.set([0, 1, 2, 3, 4], [1.0, 0.0, 2.0, 3.0, 0.5])
  uniforms = tf.constant([0.0, 0.1, 0.5, 0.9, 0.999], tf.float64)
  compiled = tf.function(tree.sample, jit_compile=True)(uniforms)
  for got, expected in zip(compiled, tree.sample(uniforms)):
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_a_compiled_draw_or_sample_of_nothing_is_empty_even_on_a_zero_tree():
  # As the ops: no draws, so no refusal of the zero total, and the
  # generator's state stays.
  tree = SumTree(4, initial_weights=tf.zeros([4], tf.float64))
  generator = tf.random.Generator.from_seed(3, alg="philox")
  before = generator.state.numpy()

  @tf.function(jit_compile=True)
  def draw_and_sample():
    indices, probabilities = ops.sum_tree_draw(tree.variable.handle,
                                               generator.state.handle,
                                               tf.constant(0, tf.int64),
                                               T=tf.float64)
    sampled = ops.sum_tree_sample(tree.variable.handle, tf.zeros([0],
                                                                 tf.float64))
    return (indices, probabilities) + tuple(sampled)

  for result in draw_and_sample():
    assert result.shape == [0]
  np.testing.assert_array_equal(generator.state.numpy(), before)


@pytest.mark.parametrize("indices,utilities,amplitude,decay,message", [
    ([1, 10], [0.0, 1.0], 1.0, 0.5, r"indices\[1\] = 10 is out of range"),
    ([1, 2], [0.0, np.inf], 1.0, 0.5, r"utilities\[1\] = inf"),
    ([1, 2], [0.0, 1e300], 1e10, 0.5, r"overflows"),
    ([1, 2], [0.0, 1.0], -1.0, 0.5, r"amplitude = -1 must be"),
    ([1, 2], [0.0, 1.0], 1.0, 1.0, r"decay = 1 must be in \[0, 1\)"),
])
def test_a_refused_compiled_reweight_raises_and_writes_nothing(
    indices, utilities, amplitude, decay, message):
  sampler = AdaptiveSampler(num_examples=10, amplitude=1.0, decay=0.5, seed=1)
  sampler.update([3, 4], [1.0, 0.0])
  before = state_of(sampler)
  reweight = tf.function(sampler._reweight, jit_compile=True)
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    reweight(tf.constant(indices, tf.int64), tf.constant(utilities, tf.float64),
             amplitude, decay)
  assert_same_state(state_of(sampler), before)


def test_a_compiled_reweight_names_an_amplitude_it_cannot_know():
  sampler = AdaptiveSampler(num_examples=10, amplitude=1.0, decay=0.5)
  amplitude = tf.Variable(1.0, dtype=tf.float64)

  @tf.function(jit_compile=True)
  def reweight():
    ops.adaptive_reweight(sampler.tree.variable.handle,
                          sampler._entropy_tree.handle,
                          sampler.log_weights.handle, sampler._log_scale.handle,
                          tf.constant([1], tf.int64),
                          tf.constant([1.0],
                                      tf.float64), amplitude.read_value(),
                          tf.constant(0.5, tf.float64))

  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="amplitude must be a constant when the step "
                     "compiles with XLA"):
    reweight()


def test_a_compiled_reset_gives_the_initial_state():
  # decay 0: the reweight's O(n) rescale, compiled.
  states = []
  for jit_compile in (False, True):
    sampler = AdaptiveSampler(num_examples=100,
                              amplitude=2.0,
                              decay=0.5,
                              seed=0)
    sampler.update(tf.range(10, dtype=tf.int64), tf.ones([10], tf.float64))
    tf.function(sampler.reset, jit_compile=jit_compile)()
    states.append(state_of(sampler))
  assert_same_state(states[1], states[0])
  np.testing.assert_array_equal(sampler.log_weights.numpy(), np.zeros(100))


def test_a_refused_compiled_draw_raises_and_leaves_the_generator_as_it_is():
  tree = SumTree(4, initial_weights=tf.zeros([4], tf.float64))
  generator = tf.random.Generator.from_seed(3, alg="philox")
  before = generator.state.numpy()
  draw = tf.function(lambda: ops.sum_tree_draw(tree.variable.handle,
                                               generator.state.handle,
                                               tf.constant(2, tf.int64),
                                               T=tf.float64),
                     jit_compile=True)
  with pytest.raises(tf.errors.InvalidArgumentError, match="cannot sample"):
    draw()
  np.testing.assert_array_equal(generator.state.numpy(), before)


def test_a_compiled_reweight_refuses_one_variable_for_two_inputs():
  sampler = AdaptiveSampler(num_examples=10, amplitude=1.0, decay=0.5)
  tree = sampler.tree.variable.handle

  @tf.function(jit_compile=True)
  def reweight():
    ops.adaptive_reweight(tree, tree, sampler.log_weights.handle,
                          sampler._log_scale.handle, tf.constant([1], tf.int64),
                          tf.constant([1.0], tf.float64),
                          tf.constant(1.0, tf.float64),
                          tf.constant(0.5, tf.float64))

  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="tree and entropy_tree are the same variable"):
    reweight()


def test_a_compiled_step_updates_the_state_in_place():
  num_examples = 1 << 12
  sampler = AdaptiveSampler(num_examples=num_examples,
                            amplitude=1.0,
                            decay=0.5,
                            seed=2)

  @tf.function(jit_compile=True)
  def step():
    indices = sampler.sample(8)
    sampler.update(indices, tf.ones([8], tf.float64))

  hlo = step.experimental_get_compiler_ir()(stage="optimized_hlo")
  tree = rf"f64\[{2 * num_examples}\]"
  # The reweight's results are its operands' buffers, and XLA copies none of
  # the state to make them so: the step stays O(B log n).
  assert re.search(
      r"custom-call\(.*custom_call_target=\"adasamp_adaptive_"
      r"reweight_f64\".*output_to_operand_aliasing=", hlo)
  assert not re.search(rf"= {tree}\S* copy\(", hlo)
  assert not re.search(rf"= f64\[{num_examples}\]\S* copy\(", hlo)


def test_the_xla_kernels_are_there_when_the_library_loads_after_a_compile():
  # TensorFlow makes REGISTER_XLA_OP kernels at its first compilation only;
  # the op library, loaded on first use, may come later.
  script = textwrap.dedent("""
      import tensorflow as tf
      tf.function(lambda x: 2 * x, jit_compile=True)(tf.ones([2]))
      from tf_adasamp import AdaptiveSampler
      sampler = AdaptiveSampler(num_examples=8, amplitude=1.0, decay=0.5,
                                seed=0)
      @tf.function(jit_compile=True)
      def step():
        indices = sampler.sample(4)
        sampler.update(indices, tf.ones([4], tf.float64))
        return indices
      print(step().shape)
      """)
  result = subprocess.run(
      [sys.executable, "-c", script],
      capture_output=True,
      text=True,
      timeout=300,
      env=child_process.environment(CUDA_VISIBLE_DEVICES=""),
      check=False)
  assert result.returncode == 0, result.stderr
  assert result.stdout.strip() == "(4,)"


def test_a_keras_training_step_compiles_whole_with_the_sampler():
  # The guide's step ("Drawing inside the train step"), compiled by XLA and
  # not, from the same start.
  rng = np.random.default_rng(0)
  source = (tf.constant(rng.normal(size=(500, 8)).astype("float32")),
            tf.constant(rng.integers(0, 2, 500)))
  initial = None
  results = []
  for jit_compile in (False, True):
    sampler = AdaptiveSampler(500, amplitude=0.1, decay=0.5, seed=0)
    model = tf.keras.Sequential(
        [tf.keras.Input((8,)),
         tf.keras.layers.Dense(2, activation="softmax")])
    if initial is None:
      initial = model.get_weights()
    model.set_weights(initial)
    optimizer = tf.keras.optimizers.SGD(0.1)

    @tf.function(jit_compile=jit_compile)
    def train_step(sampler=sampler, model=model, optimizer=optimizer):
      xb, yb, indices, _ = data.sample_batch(sampler, source, 50)
      with tf.GradientTape() as tape:
        probs = model(xb, training=True)
        loss = tf.reduce_mean(
            tf.keras.losses.sparse_categorical_crossentropy(yb, probs))
      gradients = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(gradients, model.trainable_variables))
      sampler.update(indices, tf_adasamp.utilities.zero_one(yb, probs))
      return indices, loss

    indices, loss = train_step()
    results.append((indices.numpy(), loss.numpy(), model.get_weights(),
                    sampler.kl_divergence().numpy()))
  (graph_indices, graph_loss, graph_weights, graph_kl), compiled = results
  np.testing.assert_array_equal(compiled[0], graph_indices)
  np.testing.assert_allclose(compiled[1], graph_loss, rtol=1e-5)
  for got, expected in zip(compiled[2], graph_weights):
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
  assert compiled[3] == pytest.approx(graph_kl) and graph_kl > 0
