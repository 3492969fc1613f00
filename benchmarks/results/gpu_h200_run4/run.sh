#!/usr/bin/env bash
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:$PWD/.gpu/py${PYTHONPATH:+:$PYTHONPATH}" TF_CPP_MIN_LOG_LEVEL=2
OUT=${OUT:-/tmp/probe_out}; mkdir -p $OUT
T0=$(date +%s)
f() { grep -v "^W0000\|^I0000\|^WARNING\|^E0000\|retracing"; }
bash benchmarks/gpu_session.sh gpu_steps train_step trainer 2>&1 | tail -25
echo "== probe at $(( $(date +%s) - T0 ))"
SIZES=50000 NOTRACE=1 LABEL=probe2 timeout 60 python3 probe/gpu_probe.py 500 2>&1 | f | tee $OUT/probe2.log
echo "== tests at $(( $(date +%s) - T0 ))"
TF_FORCE_GPU_ALLOW_GROWTH=true timeout 130 python3 -m pytest -q -n 12 -p no:cacheprovider tests/test_gpu_ops.py tests/test_gpu_kernels.py tests/test_gpu_steps_on_host.py tests/test_distribute.py tests/test_stage_hangs.py tests/test_sampler.py tests/test_fast_paths.py tests/experiment/test_train.py tests/test_data.py tests/experiment/test_datasets.py 2>&1 | f > $OUT/tests2.log
echo "tests exit $?"; grep -v "^\.\|^s" $OUT/tests2.log | tail -25
echo "== done at $(( $(date +%s) - T0 ))"
