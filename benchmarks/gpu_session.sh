#!/usr/bin/env bash
# The GPU halves of issues 15 and 17: the GPU tests, then the TensorFlow-level
# GPU benchmarks, the sum-tree ops alone and beside flashbax on the GPU (each
# side in its own process), figures and a log written to $OUT (the device tool brings it back), else
# benchmarks/results/. On an H200 (runs 5 and 6) the default steps took
# about 9 minutes (devices 16 s, gpu_tests 120, gpu_steps 30, train_step 45,
# train_step_xla 55, trainer 50, trainer_xla 140, throughput 50): more than
# one call's 10 minutes leave for the set-up, so give them two calls on the
# warm machine. `suite`, the whole suite under default GPU placement on 8
# workers, takes about 4 more. Name steps to run fewer:
#
#   bash benchmarks/gpu_session.sh [--cpu] [STEP ...]
#   steps: devices gpu_tests gpu_steps train_step train_step_xla trainer
#   trainer_xla throughput peers (the default), suite
#
# On the GPU machine, after /work/shared/gpu/README.md's set-up (the six
# pieces, on-device.sh), from the checkout's root:
#
#   run(carry=["tf_adasamp/_sum_tree_ops.so", ".gpu/py"], timeout_s=400,
#       command="source /tmp/tfenv.sh && bash benchmarks/gpu_session.sh \
#                devices gpu_tests gpu_steps train_step")
#   run(... the same, with train_step_xla trainer trainer_xla throughput peers)
#
# .gpu/py holds what the machine lacks: TensorBoard's summary API for the
# trainer, flashbax (whose JAX, chex and flax the machine has) and
# pytest-xdist for `suite`, made here:
#   pip install --no-deps --target .gpu/py tensorboard flashbax==0.1.3 \
#       pytest-xdist execnet
# Here, every step at toy sizes on the CPU, to check the script:
#
#   bash benchmarks/gpu_session.sh --cpu
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=python3
SMOKE=0
if [ "${1:-}" = "--cpu" ]; then
  SMOKE=1
  export CUDA_VISIBLE_DEVICES=""
  [ -x .venv/bin/python ] && PYTHON=.venv/bin/python
  shift
fi
STEPS_WANTED=" ${*:-devices gpu_tests gpu_steps train_step train_step_xla trainer trainer_xla throughput peers} "
[ -d .gpu/py ] && export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/.gpu/py"
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
RESULTS=${OUT:-benchmarks/results}
mkdir -p "$RESULTS"
LOG="$RESULTS/gpu_session.log"
: > "$LOG"
FAILED=0
T0=$(date +%s)

# step NAME SECONDS COMMAND...: runs COMMAND under a time limit, logged.
step() {
  local name=$1 limit=$2
  shift 2
  [[ "$STEPS_WANTED" == *" $name "* ]] || return 0
  echo "== $name (limit ${limit} s, at $(( $(date +%s) - T0 )) s)" | tee -a "$LOG"
  timeout "$limit" "$@" 2>&1 | grep -v "^W0000\|^I0000\|^WARNING: All log" | tee -a "$LOG"
  local status=${PIPESTATUS[0]}
  [ "$status" -eq 0 ] || { echo "== $name: exit $status" | tee -a "$LOG"; FAILED=1; }
}

if [ "$SMOKE" = 1 ]; then
  STEPS=5; REPEATS=2; TRAINER_STEPS=25; ROUNDS=1
  TRAINER_XLA_STEPS=25; XLA_ROUNDS=1
  SIZES="1000 50000"; BATCH_SIZES="128"; PEER_SIZES=1000; PEER_BATCH_SIZES=128
  PEERS="ours numpy"
else
  STEPS=200; REPEATS=7; TRAINER_STEPS=600; ROUNDS=3
  TRAINER_XLA_STEPS=5000; XLA_ROUNDS=5
  SIZES="50000 1000000 10000000"; BATCH_SIZES="4096 32768"
  PEER_SIZES="50000 1000000"; PEER_BATCH_SIZES=4096; PEERS="ours ours_xla flashbax"
fi

step devices 60 "$PYTHON" -c "import tensorflow as tf; \
print('TensorFlow', tf.__version__, tf.config.list_logical_devices())"
# The kernels against the CPU, and the trainer's exact resumption with
# --deterministic; all skipped where TensorFlow sees no GPU.
step gpu_tests 240 "$PYTHON" -m pytest -q -m gpu tests
# Every test, where TensorFlow places ops on the GPU by default; the tests of
# CPU contracts pin themselves to the CPU. Workers share the GPU's memory.
step suite 330 env TF_FORCE_GPU_ALLOW_GROWTH=true "$PYTHON" -m pytest -q \
    -n 8 -p no:cacheprovider tests
# Each loop also compiled whole by XLA: the "(XLA)" rows.
step gpu_steps 150 "$PYTHON" -m benchmarks.gpu_steps --steps "$STEPS" \
    --repeats "$REPEATS" --output "$RESULTS/gpu_steps.json"
step train_step 120 "$PYTHON" -m benchmarks.train_step --steps "$STEPS" \
    --warmup 5 --repeats "$REPEATS" --output "$RESULTS/train_step_gpu.json"
step train_step_xla 150 "$PYTHON" -m benchmarks.train_step --jit_compile \
    --steps "$STEPS" --warmup 5 --repeats "$REPEATS" \
    --output "$RESULTS/train_step_xla_gpu.json"
step trainer 150 "$PYTHON" -m benchmarks.train_step --trainer \
    --steps "$TRAINER_STEPS" --rounds "$ROUNDS" \
    --output "$RESULTS/trainer_step_gpu.json"
# Compiled, a step takes under 1 ms: more steps, so that the spread of the
# runs' compile times (about 0.5 s in run 6) is small beside them.
step trainer_xla 200 "$PYTHON" -m benchmarks.train_step --trainer --jit_compile \
    --steps "$TRAINER_XLA_STEPS" --rounds "$XLA_ROUNDS" \
    --output "$RESULTS/trainer_step_xla_gpu.json"
# Our ops alone on the GPU (a microbenchmark).
step throughput 150 env TF_FORCE_GPU_ALLOW_GROWTH=true "$PYTHON" -m \
    benchmarks.sum_tree_throughput --sizes $SIZES --batch-sizes $BATCH_SIZES \
    --repeats 3 --min-seconds 0.1 \
    --output "$RESULTS/sum_tree_throughput_gpu.json"
# Our sampler beside flashbax's jitted tree (on JAX's GPU), each side in its
# own process, one round; each takes GPU memory as it needs it.
step peers 200 env TF_FORCE_GPU_ALLOW_GROWTH=true \
    XLA_PYTHON_CLIENT_PREALLOCATE=false "$PYTHON" -m \
    benchmarks.peer_comparison --sizes $PEER_SIZES \
    --batch-sizes $PEER_BATCH_SIZES --sides $PEERS --rounds 1 --repeats 3 \
    --min-seconds 0.1 --output "$RESULTS/peer_comparison_gpu.json"
echo "== done in $(( $(date +%s) - T0 )) s; failed: $FAILED" | tee -a "$LOG"
exit "$FAILED"
