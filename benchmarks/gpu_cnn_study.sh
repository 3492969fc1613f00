#!/usr/bin/env bash
# The paper's experiment at its own scale on one GPU, then the GPU step
# targets (issue 55), in one call: the paper's CNN on all 60,000
# Fashion-MNIST training images, XLA, batch 100, the six algorithms, the
# methods from the field and the amplitude sweep 0.1, 0.3, 1, 3, 10 trials
# (tf_adasamp.experiment.cnn_study). Stages, each skipped when done before:
#
#   measure  steps/s of 1 process against $WORKERS sharing the GPU (3,000
#            steps per process) and an evaluation's seconds, to
#            throughput.json
#   tune     tf_adasamp.experiment.tuning on validation splits of the
#            training images (the grid: its command below), to tuning.*
#   study    the 110 runs (11 per trial), $WORKERS at once, as many epochs
#            (up to 20) as throughput.json predicts to finish by the study's
#            deadline (cnn_study --fit_seconds: chosen before the first run,
#            kept for the calls that resume it); then raw_metrics.jsonl.gz,
#            Figure 1 and summary.md
#   targets  the GPU step targets (benchmarks/gpu_steps.py): correctness of
#            compiled steps with the FFI handlers in CUDA graphs, then the
#            step loops with the handlers registered command-buffer
#            compatible and without (TF_ADASAMP_FFI_COMMAND_BUFFERS), each in
#            its own process, with XLA's optimized HLO of both
#
# The script ends by $END seconds after it started: the study stops itself
# (SIGINT: a cut run keeps its last checkpoint, each evaluation) $TARGETS_S
# + 30 seconds before, leaving those to the packing and the step targets. The study runs with the
# handlers outside CUDA graphs (TF_ADASAMP_FFI_COMMAND_BUFFERS=0, as every
# earlier GPU run) and an XLA compilation cache shared by its processes
# (runs that differ only in their seed compile once). Runs live in $RUNS
# (default /tmp/cnn_runs), which the device keeps only while it stays warm
# (30 s idle); the same command in the next call resumes. What comes back in
# $OUT (at most 8 files): the log; runs.tar.gz (tf_adasamp.experiment.carry:
# the finished runs' metrics, report/ with throughput.json, length.json and once
# the study is done raw_metrics.jsonl.gz, summary.md and the figures, which
# belong in docs/experiment/cnn/; tuning/ with tuning.md); targets.tar.gz
# (the step targets' JSON, log and HLO); and up to 5 cut-<i>.tar.gz, a cut
# run each. Copied into .gpu/cnn_carried and carried, they resume the study
# on a fresh machine (or in a later session): it is unpacked when $RUNS
# holds no run.
#
# On the device, after ../shared/gpu/README.md's set-up (the six pieces and
# on-device.sh), with Fashion-MNIST's four files copied here into the
# git-ignored .gpu/data/fashion-mnist/ (cp /usr/share/datasets/fashion-mnist/*.gz),
# END a little under the call's timeout:
#
#   run(carry=["tf_adasamp/_sum_tree_ops.so", ".gpu/data"], timeout_s=T,
#       command="source /tmp/tfenv.sh && END=<T - 15> bash benchmarks/gpu_cnn_study.sh")
#
# Here, the same path at toy size on the CPU (no tuning: it reads all 60,000
# images; no step targets: XLA's CPU convolutions take minutes; runs/cnn_smoke):
#
#   [PYTHON=.venv/bin/python] bash benchmarks/gpu_cnn_study.sh --cpu
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
PYTHON=${PYTHON:-python3}
SCALE=gpu
WORKERS=${WORKERS:-8}
END=${END:-540}
TARGETS_S=${TARGETS_S:-120}
MEASURE_STEPS=${MEASURE_STEPS:-3000}
CARRIED=${CARRIED:-.gpu/cnn_carried}
STAGES=" measure tune study targets "
if [ "${1:-}" = "--cpu" ]; then
  SCALE=cpu_smoke WORKERS=2 RUNS=${RUNS:-runs/cnn_smoke} TARGETS_S=0
  MEASURE_STEPS=${MEASURE_STEPS_CPU:-20} STAGES=" measure study "
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
# After the study's deadline: its processes' exit (at most 15 s after the
# SIGINT) and the packing, about 10 s.
STUDY_END=$((END - TARGETS_S - 30))

elapsed() { echo $(($(date +%s) - T0)); }

# stage NAME DONE_FILE DEADLINE COMMAND...: COMMAND unless DONE_FILE exists,
# cut by SIGINT at DEADLINE seconds after the start.
stage() {
  local name=$1 done_file=$2 left=$(($3 - $(elapsed)))
  shift 3
  [[ "$STAGES" == *" $name "* ]] && [ ! -e "$done_file" ] || return 0
  [ "$left" -gt 20 ] || { echo "== $name: no time left" | tee -a "$LOG"; return 0; }
  echo "== $name (at $(elapsed) s, $left s left)" | tee -a "$LOG"
  timeout -s INT -k 15 "$left" "$@" 2>&1 | grep --line-buffered -v "^W0000\|^I0000\|^E0000\|^WARNING: All log" | tee -a "$LOG"
  echo "== $name: exit ${PIPESTATUS[0]}" | tee -a "$LOG"
}

[ -e "$CARRIED/runs.tar.gz" ] &&
  $PYTHON -m tf_adasamp.experiment.carry unpack --carry_dir="$CARRIED" \
    --runs_dir="$RUNS" 2>&1 | tee -a "$LOG"
(
  # The study's processes: handlers outside CUDA graphs, one compilation
  # cache (outside $RUNS, which carry packs). Where the measurement fails
  # with the cache, it runs again without, and so does the rest.
  export TF_ADASAMP_FFI_COMMAND_BUFFERS=0
  [ "$SCALE" = gpu ] &&
    export TF_XLA_FLAGS="--tf_xla_persistent_cache_directory=/tmp/xla_cache"
  stage measure "$RUNS/report/throughput.json" "$STUDY_END" $STUDY \
    --stage=measure --measure_steps="$MEASURE_STEPS"
  if [ ! -e "$RUNS/report/throughput.json" ] && [ -n "${TF_XLA_FLAGS:-}" ]; then
    echo "== without the XLA cache" | tee -a "$LOG"
    unset TF_XLA_FLAGS
    stage measure "$RUNS/report/throughput.json" "$STUDY_END" $STUDY \
      --stage=measure --measure_steps="$MEASURE_STEPS"
  fi
  # The tuning takes at most 45% of the time left; once the study has begun
  # (length.json), its settings are fixed, tuned or not.
  TUNED_BY="$RUNS/tuning/tuning.json"
  [ -e "$RUNS/report/length.json" ] && TUNED_BY="$RUNS/report/length.json"
  stage tune "$TUNED_BY" $(($(elapsed) + (STUDY_END - $(elapsed)) * 45 / 100)) \
    $PYTHON -m tf_adasamp.experiment.tuning \
    --dataset=fashion_mnist --model=cnn --jit_compile --train_eval_size=10000 \
    --steps=1500 --eval_interval=300 --seeds=100,101 --validation_size=10000 \
    --sgd_learning_rates=0.03,0.1 --sgd_lr_decays=0.0001 \
    --adagrad_learning_rates=0.01,0.03 --amplitudes=0.1,0.3,1 --decays=0.5 \
    --adaptive_lr_factors=0.5,2 --workers="$WORKERS" \
    --output_dir="$RUNS/tuning" --report="$RUNS/tuning/tuning.md"
  TUNED=""
  [ -e "$RUNS/tuning/tuning.json" ] && TUNED="--tuned=$RUNS/tuning/tuning.json"
  # The archive, figures and summary take about half a minute after the runs.
  # The fit takes 90% of what is left, for what the throughput misses.
  FIT=""
  [ "$SCALE" = gpu ] &&
    FIT="--fit_seconds=$(((STUDY_END - $(elapsed) - 45) * 9 / 10))"
  [[ "$STAGES" == *" tune "* ]] && [ -z "$TUNED" ] &&
    echo "== the tuning did not finish: the study runs the preset's values" |
    tee -a "$LOG"
  stage study "$RUNS/report/summary.md" "$STUDY_END" $STUDY --stage=study \
    $TUNED $FIT
)

# What comes back. The measurement never resumes a run (it starts over), so
# its runs stay. At most 5 cut runs: 8 files in all.
$PYTHON -m tf_adasamp.experiment.carry pack --runs_dir="$RUNS" --carry_dir="$RESULTS" \
  --skip=measure 2>&1 | tee -a "$LOG"
ls "$RESULTS"/cut-*.tar.gz 2>/dev/null | tail -n +6 | while read -r extra; do
  echo "== left out: $(basename "$extra")" | tee -a "$LOG"; rm -f "$extra"
done

# targets: each step of the command holds a share of the time left.
left=$((END - $(elapsed) - 10))
if [[ "$STAGES" == *" targets "* ]] && [ "$left" -gt 45 ]; then
  echo "== targets (at $(elapsed) s, $left s left)" | tee -a "$LOG"
  T="$RESULTS/targets"
  mkdir -p "$T"
  target() {  # target SECONDS COMMAND...: COMMAND if SECONDS >= 10
    local limit=$1; shift
    [ "$limit" -ge 10 ] || { echo "== no time left: $*" | tee -a "$T/targets.log"; return 0; }
    timeout -s INT -k 10 "$limit" "$@" 2>&1 | grep --line-buffered -v "^W0000\|^I0000\|^E0000\|^WARNING: All log" | tee -a "$T/targets.log"
    echo "== exit ${PIPESTATUS[0]}: $*" | tee -a "$T/targets.log"
  }
  # The step loops with the handlers in CUDA graphs and without, then
  # whether compiled steps with them in graphs (formed from 1 command up)
  # give the ops' results bit for bit.
  target $((left * 2 / 5)) env TF_ADASAMP_FFI_COMMAND_BUFFERS=1 \
    XLA_FLAGS="--xla_dump_to=$T/hlo_on --xla_dump_hlo_as_text" \
    $PYTHON -m benchmarks.gpu_steps --steps 200 --repeats 7 \
    --output "$T/gpu_steps_command_buffers_on.json"
  target $((left * 3 / 10)) env TF_ADASAMP_FFI_COMMAND_BUFFERS=0 \
    XLA_FLAGS="--xla_dump_to=$T/hlo_off --xla_dump_hlo_as_text" \
    $PYTHON -m benchmarks.gpu_steps --compiled_only --steps 200 --repeats 7 \
    --output "$T/gpu_steps_command_buffers_off.json"
  target $((END - $(elapsed) - 10)) env TF_ADASAMP_FFI_COMMAND_BUFFERS=1 \
    XLA_FLAGS="--xla_gpu_graph_min_graph_size=1" \
    $PYTHON -m pytest -q -p no:cacheprovider tests/test_gpu_ops.py -k compiled
  (cd "$T" && find . -name '*after_optimizations.txt' -o -name '*.json' \
     -o -name '*.log' | tar czf "$RESULTS/targets.tar.gz" -T -)
  rm -rf "$T"
fi
echo "== ended at $(elapsed) s; $(ls "$RESULTS" | tr '\n' ' ')" | tee -a "$LOG"
