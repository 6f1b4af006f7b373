#!/usr/bin/env bash
# Toto 2.0 on a GPU: conformance with the reference toto-2 (the same quantiles to 1e-4 on
# random checkpoints of the small, 4m and 22m configurations, one pass and block decoding,
# missing values) and bench/toto2.py's cases, ours against the reference, on cuda. Writes
# $OUT/toto2_gpu.json (and the log beside it). From the repository root, on a box with Python
# 3.12 and torch (kept as it is: nothing here installs or replaces torch), offline:
#   bash bench/toto2_gpu_check.sh [WHEELS_DIR]    (default: gpu-wheels, from toto2_gpu_wheels.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=${1:-gpu-wheels}
out=${OUT:-out}
mkdir -p "$out"
env=/tmp/toto2-gpu-env
python3 -m venv --system-site-packages "$env"  # the box's torch, numpy, pandas, ...
"$env/bin/python" -m pip --disable-pip-version-check install --quiet --no-index --no-deps \
    "$wheels"/*.whl
"$env/bin/python" -m pip --disable-pip-version-check install --quiet --no-index --no-deps \
    --no-build-isolation -e . 2>/dev/null || echo "editable install skipped: running from the tree"
export PYTHONPATH=$PWD TRADER_TOTO2_REFERENCE_PYTHON=$env/bin/python
"$env/bin/python" -c "import torch, toto2; print('torch', torch.__version__, torch.cuda.get_device_name())"
# One process per implementation and case (peak memory of each); timings after 2 warm-ups.
timeout 200 "$env/bin/python" bench/toto2.py --device "${TOTO2_DEVICE:-cuda}" --synthetic --conformance \
    --repeats 5 --warmup 2 > "$out/toto2_gpu.json" 2> "$out/toto2_gpu.log" \
    || { echo "bench/toto2.py failed: see $out/toto2_gpu.log"; tail -20 "$out/toto2_gpu.log"; exit 1; }
cat "$out/toto2_gpu.json"
