#!/usr/bin/env bash
# Device probe: where the GPU step's time goes, then the full suite.
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:$PWD/.gpu/py${PYTHONPATH:+:$PYTHONPATH}" TF_CPP_MIN_LOG_LEVEL=2
OUT=${OUT:-/tmp/probe_out}; mkdir -p $OUT
T0=$(date +%s)
f() { grep -v "^W0000\|^I0000\|^WARNING\|^E0000\|retracing"; }
echo "== default"; MLP=1 LABEL=default timeout 120 python3 probe/gpu_probe.py 500 2>&1 | f | tee -a $OUT/probe.log
echo "== gpu_private at $(( $(date +%s) - T0 ))"; TF_GPU_THREAD_MODE=gpu_private MLP=1 SIZES=50000 NOTRACE=1 LABEL=gpu_private timeout 90 python3 probe/gpu_probe.py 500 2>&1 | f | tee -a $OUT/probe.log
echo "== inter_op 2 at $(( $(date +%s) - T0 ))"; TF_NUM_INTEROP_THREADS=2 MLP=1 SIZES=50000 NOTRACE=1 LABEL=interop2 timeout 90 python3 probe/gpu_probe.py 500 2>&1 | f | tee -a $OUT/probe.log
echo "== suite at $(( $(date +%s) - T0 ))"
TF_FORCE_GPU_ALLOW_GROWTH=true timeout 330 python3 -m pytest -q -n 8 -p no:cacheprovider --continue-on-collection-errors tests 2>&1 | f > $OUT/suite.log
echo "suite exit $?"; tail -60 $OUT/suite.log
echo "== done at $(( $(date +%s) - T0 ))"
