#!/usr/bin/env bash
# Toto 2.0 on a GPU: conformance with the reference toto-2 (the same quantiles to 1e-4 on
# random checkpoints of the small, 4m and 22m configurations: one pass and block decoding,
# padding and a whole unobserved patch, a batch) and bench/toto2.py's cases, ours against the
# reference, each in fresh processes, on cuda. From the repository root, on a box with Python
# 3.12 and torch (kept as it is: nothing here installs or replaces torch), offline:
#   bash bench/toto2_gpu_check.sh [WHEELS_DIR]    (default: gpu-wheels, from toto2_gpu_wheels.sh)
# Writes $OUT/toto2_gpu_conformance.jsonl, toto2_gpu_bench.jsonl (4m, 22m) and
# toto2_gpu_313m.jsonl, a log beside each: JSON lines (the setup with the device, driver,
# torch and CUDA; one line per case the moment it ends; a summary), so a step cut short by its
# timeout keeps every case it finished, and each step's result comes back even if a later one
# runs out of time. Exit status: 1 when a step failed or ran out of time, else 0.
set -uo pipefail
cd "$(dirname "$0")/.."
wheels=${1:-gpu-wheels}
out=${OUT:-out}
device=${TOTO2_DEVICE:-cuda}
mkdir -p "$out"
env=/tmp/toto2-gpu-env
python3 -m venv --system-site-packages "$env"  # the box's torch, numpy, pandas, ...
# python3 may itself be a virtualenv, whose packages --system-site-packages does not see: put
# its site-packages behind this environment's own.
python3 -c 'import site; print(site.getsitepackages()[0])' \
    > "$("$env/bin/python" -c 'import site; print(site.getsitepackages()[0])')/box.pth"
"$env/bin/python" -m pip --disable-pip-version-check install --quiet --no-index --no-deps \
    "$wheels"/*.whl || exit 1
export PYTHONPATH=$PWD TRADER_TOTO2_REFERENCE_PYTHON=$env/bin/python
"$env/bin/python" -c "import torch, toto2, trader.forecast.toto2; print('torch', torch.__version__, torch.cuda.get_device_name())" || exit 1
status=0
step() {  # NAME SECONDS ARGS...
    local name=$1 seconds=$2
    shift 2
    timeout "$seconds" "$env/bin/python" bench/toto2.py --device "$device" --synthetic "$@" \
        > "$out/toto2_gpu_$name.jsonl" 2> "$out/toto2_gpu_$name.log"
    local rc=$?
    cat "$out/toto2_gpu_$name.jsonl"
    if [ $rc -ne 0 ]; then
        status=1
        echo "step $name failed or ran out of time (exit $rc): $out/toto2_gpu_$name.log"
        tail -5 "$out/toto2_gpu_$name.log"
    fi
}
step conformance 90 --conformance --sizes none
step bench 200 --sizes 4m,22m --repeats 5 --warmup 2
step 313m 60 --sizes 313m --repeats 3 --warmup 1
exit $status
