#!/usr/bin/env bash
# The paper's experiment at its own scale on one GPU (issue 33): the paper's
# CNN on all 60,000 Fashion-MNIST training images, XLA, batch 100, the six
# algorithms and the amplitude sweep 0.1, 0.3, 1, 3, 10 trials, 20 epochs
# (tf_adasamp.experiment.cnn_study). Stages, each skipped when done before:
#
#   measure  steps/s of 1 process against $WORKERS sharing the GPU (3,000
#            steps per process), to throughput.json
#   tune     tf_adasamp.experiment.tuning on validation splits of the
#            training images (the grid: its command below), to tuning.*
#   study    the 90 runs (9 per trial), 1,080,000 steps, $WORKERS at once;
#            then raw_metrics.jsonl.gz, Figure 1 and summary.md
#
# Budget: docs/experiment/cnn/README.md (about 1.17M steps, 11.5-13.7 min in
# one process at run 6's 0.59-0.70 ms a step; two calls of DEADLINE=330 s
# fit if $WORKERS processes give at least about 1.5x one's steps/s, which
# the measure stage writes first; otherwise EPOCHS=10).
#
# Every stage stops itself by $DEADLINE seconds after the script started
# (SIGINT: a cut run keeps its last checkpoint, each epoch), so a call ends
# before the device's limit; the same command in the next call resumes. Runs
# live in $RUNS (default /tmp/cnn_runs), which the device keeps only while
# it stays warm (30 s idle). What comes back in $OUT is the log and the
# runs packed as the device's limits allow (benchmarks/carry.py: at most 8
# files of 16 MiB): runs.tar.gz (the
# finished runs' metrics, report/ with throughput.json, and once the study
# is done raw_metrics.jsonl.gz, summary.md and the figures, which belong in
# docs/experiment/cnn/; tuning/ with tuning.md) and one cut-<i>.tar.gz per
# cut run. Copied into .gpu/cnn_carried and carried, they resume the study
# on a fresh machine (or in a later session): it is unpacked when $RUNS
# holds no run.
#
# On the device, after ../shared/gpu/README.md's set-up (the six pieces and
# on-device.sh), with Fashion-MNIST's four files copied here into the
# git-ignored .gpu/data/fashion-mnist/ (cp /usr/share/datasets/fashion-mnist/*.gz):
#
#   run(carry=["tf_adasamp/_sum_tree_ops.so", ".gpu/data"], timeout_s=390,
#       command="source /tmp/tfenv.sh && bash benchmarks/gpu_cnn_study.sh")
#   run(... the same command again, at once; on a fresh machine, after the
#       set-up, carry ".gpu/cnn_carried" as well, the data in a call of its
#       own: together they pass the 64 MiB a call carries)
#
# Here, the same path at toy size on the CPU (no tuning: it reads all 60,000
# images; runs/cnn_smoke):
#
#   [PYTHON=.venv/bin/python] bash benchmarks/gpu_cnn_study.sh --cpu
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
PYTHON=${PYTHON:-python3}
SCALE=gpu
WORKERS=${WORKERS:-4}
DEADLINE=${DEADLINE:-330}
CARRIED=${CARRIED:-.gpu/cnn_carried}
STAGES=" measure tune study "
if [ "${1:-}" = "--cpu" ]; then
  SCALE=cpu_smoke WORKERS=2 RUNS=${RUNS:-runs/cnn_smoke} STAGES=" study "
  export CUDA_VISIBLE_DEVICES=""
  [ -x .venv/bin/python ] && [ "$PYTHON" = python3 ] && PYTHON=.venv/bin/python
fi
RUNS=${RUNS:-/tmp/cnn_runs}
RESULTS=${OUT:-$RUNS.out}
mkdir -p "$RUNS" "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
# Several processes share the GPU: each takes memory as it needs it.
export TF_FORCE_GPU_ALLOW_GROWTH=true
# The data, carried in this call or an earlier one on the same machine.
if [ -d .gpu/data/fashion-mnist ]; then
  mkdir -p /tmp/keras/datasets/fashion-mnist
  cp -n .gpu/data/fashion-mnist/*.gz /tmp/keras/datasets/fashion-mnist/
fi
[ -d /tmp/keras/datasets/fashion-mnist ] && export KERAS_HOME=/tmp/keras
LOG="$RESULTS/gpu_cnn_study.log"
STUDY="$PYTHON -m tf_adasamp.experiment.cnn_study --scale=$SCALE \
  --runs_dir=$RUNS --report_dir=$RUNS/report --workers=$WORKERS"
[ -n "${EPOCHS:-}" ] && STUDY="$STUDY --epochs=$EPOCHS"

# stage NAME DONE_FILE COMMAND...: COMMAND unless DONE_FILE exists, cut by
# SIGINT at the deadline.
stage() {
  local name=$1 done_file=$2 left
  shift 2
  [[ "$STAGES" == *" $name "* ]] && [ ! -e "$done_file" ] || return 0
  left=$((DEADLINE - ($(date +%s) - T0)))
  [ "$left" -gt 20 ] || { echo "== $name: no time left" | tee -a "$LOG"; return 0; }
  echo "== $name (at $(($(date +%s) - T0)) s, $left s left)" | tee -a "$LOG"
  timeout -s INT -k 30 "$left" "$@" 2>&1 | grep --line-buffered -v "^W0000\|^I0000\|^E0000\|^WARNING: All log" | tee -a "$LOG"
  echo "== $name: exit ${PIPESTATUS[0]}" | tee -a "$LOG"
}

[ -e "$CARRIED/runs.tar.gz" ] &&
  $PYTHON -m benchmarks.carry unpack --carry_dir="$CARRIED" \
    --runs_dir="$RUNS" 2>&1 | tee -a "$LOG"
stage measure "$RUNS/report/throughput.json" $STUDY --stage=measure
stage tune "$RUNS/tuning/tuning.json" $PYTHON -m tf_adasamp.experiment.tuning \
  --dataset=fashion_mnist --model=cnn --jit_compile --train_eval_size=10000 \
  --steps=1500 --eval_interval=300 --seeds=100,101 --validation_size=10000 \
  --sgd_learning_rates=0.03,0.1 --sgd_lr_decays=0.0001,0.001 \
  --adagrad_learning_rates=0.01,0.03 --amplitudes=0.1,0.3,1 --decays=0.5 \
  --adaptive_lr_factors=0.5,2 --workers="$WORKERS" \
  --output_dir="$RUNS/tuning" --report="$RUNS/tuning/tuning.md"
TUNED=""
[ -e "$RUNS/tuning/tuning.json" ] && TUNED="--tuned=$RUNS/tuning/tuning.json"
if [[ "$STAGES" == *" tune "* ]] && [ -z "$TUNED" ]; then
  echo "== study waits for the tuning" | tee -a "$LOG"
else
  stage study "$RUNS/report/summary.md" $STUDY --stage=study $TUNED
fi

# What comes back. The measurement never resumes a run (it starts over), so
# its runs stay.
$PYTHON -m benchmarks.carry pack --runs_dir="$RUNS" --carry_dir="$RESULTS" \
  --skip=measure 2>&1 | tee -a "$LOG"
echo "== ended at $(($(date +%s) - T0)) s; $(ls "$RESULTS" | tr '\n' ' ')" | tee -a "$LOG"
