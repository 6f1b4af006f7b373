#!/usr/bin/env bash
# The GPU check of `trader finetune`, for a fresh GPU machine with no internet: run it from the
# repository root. It installs into the python3 it finds ($PYTHON to choose another; no venv:
# the machine's own torch is the one to check), from the wheels bench/gpu_wheels.sh downloaded
# ($WHEELS, default var/gpu-wheels), only what that python lacks, each with --no-deps so pip
# never replaces torch; then trader itself with `pip install --no-deps -e .`.
#
# Then, with everything written under $OUT (default var/gpu-check):
#   nvidia-smi.txt, doctor/ (`trader doctor --device cuda --evidence`),
#   finetune-toto/ and finetune-kronos/ (a 60-step `trader finetune --device cuda` each from
#   --base random:small, Kronos with --lora), finetune-qlora/ (only where bitsandbytes loads),
#   bench_finetune.jsonl (bench/finetune.py on cuda: published configurations, ours against
#   the reference packages; JSON lines, the setup with device, driver, torch and CUDA, a line
#   per model the moment it ends, a summary; $BENCH_SECONDS, default 600, cuts it short and
#   keeps the finished lines), steps.jsonl (a line per step as it ends: its exit status and
#   seconds), and gpu_check.log (everything printed).
# A few minutes on one GPU. $STEPS picks steps (default: "doctor toto kronos qlora bench").
# Exit status: the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-var/gpu-wheels}
OUT=${OUT:-var/gpu-check}
DEVICE=${DEVICE:-cuda}
STEPS=" ${STEPS:-doctor toto kronos qlora bench} "
wanted() { [[ $STEPS == *" $1 "* ]]; }
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
status=0
current=setup
step() { current=$1; shift; echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
# Each command's outcome, one JSON line in steps.jsonl the moment it ends.
run() {
    local began=$SECONDS
    "$@"
    local rc=$?
    printf '{"step": "%s", "exit": %d, "seconds": %d}\n' "$current" $rc $((SECONDS - began)) \
        >> "$OUT/steps.jsonl"
    [ $rc -eq 0 ] || { echo "FAILED ($rc): $*"; [ $status -ne 0 ] || status=$rc; }
    return $rc
}

step setup "python and torch"
$PY -c 'import sys, torch; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
command -v nvidia-smi >/dev/null && nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 && cat "$OUT/nvidia-smi.txt"

step install "install what is missing (no index, no dependencies)"
# module to import : wheel of the distribution that provides it
needed=(
    pydantic:pydantic pydantic_core:pydantic_core annotated_types:annotated_types
    typing_inspection:typing_inspection typing_extensions:typing_extensions
    pydantic_settings:pydantic_settings dotenv:python_dotenv structlog:structlog
    exchange_calendars:exchange_calendars korean_lunar_calendar:korean_lunar_calendar
    pyluach:pyluach toolz:toolz tzdata:tzdata scoringrules:scoringrules
    gluonts:gluonts toto:toto_ts
    model:kronos_model_arch rotary_embedding_torch:rotary_embedding_torch
    setuptools:setuptools
)
missing=()
for pair in "${needed[@]}"; do
    module=${pair%%:*}; wheel=${pair#*:}
    $PY -c "import $module" 2>/dev/null || missing+=("$(ls "$WHEELS"/"$wheel"-*.whl 2>/dev/null | head -1)")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    PIP_BREAK_SYSTEM_PACKAGES=1 run $PY -m pip install --disable-pip-version-check --no-index \
        --find-links "$WHEELS" --no-deps "${missing[@]}"
fi
# bitsandbytes (QLoRA) only where its wheel was downloaded (`QLORA=1 bench/gpu_wheels.sh`).
bnb=$(ls "$WHEELS"/bitsandbytes-*.whl 2>/dev/null | head -1)
if [ -n "$bnb" ] && ! $PY -c "import bitsandbytes" 2>/dev/null; then
    PIP_BREAK_SYSTEM_PACKAGES=1 run $PY -m pip install --disable-pip-version-check --no-index \
        --no-deps "$bnb"
fi
if ! PIP_BREAK_SYSTEM_PACKAGES=1 $PY -m pip install --disable-pip-version-check --no-index \
    --no-deps --no-build-isolation -e .; then
    # `python -m trader` from the repository root needs no install: say so and go on.
    echo "pip install -e . failed (an old setuptools?): running trader from the source tree"
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
$PY -c 'import torch; print("torch after installing:", torch.__version__)'

DATA=${BENCH_DATA:-../shared/data}/SOLUSDT_1h.csv
[ -f "$DATA" ] || DATA=tests/data/SOLUSDT_1h.csv.gz  # the excerpt in the repository
cat > "$OUT/finetune.toml" <<'TOML'
[finetune]
context = 256
horizon = 16
batch_size = 32
learning_rate = 0.001
min_learning_rate = 0.0001
warmup_steps = 5
log_interval = 5
validation_interval = 20
checkpoint_interval = 20
kronos_train = "both"
TOML
finetune() {
    local name=$1; shift
    rm -rf "${OUT:?}/finetune-$name"
    run $PY -m trader finetune --config "$OUT/finetune.toml" --data "$DATA" --symbol SOL/USDT \
        --base random:small --out "$OUT/finetune-$name" --device "$DEVICE" --max-steps 60 "$@"
}

if wanted doctor; then
    step doctor "trader doctor --device $DEVICE"
    run $PY -m trader doctor --device "$DEVICE" --evidence "$OUT/doctor" --size small --model toto
fi
if wanted toto; then
    step toto "trader finetune --model toto --device $DEVICE"
    finetune toto --model toto
fi
if wanted kronos; then
    step kronos "trader finetune --model kronos --lora --device $DEVICE"
    finetune kronos --model kronos --lora
fi
if wanted qlora; then
    if $PY -c "import bitsandbytes" 2>/dev/null; then
        step qlora "trader finetune --model toto --qlora --device $DEVICE"
        finetune qlora --model toto --qlora
        step qlora-kronos "trader finetune --model kronos --qlora --device $DEVICE"
        finetune qlora-kronos --model kronos --qlora
    else
        echo "bitsandbytes is not installed: no QLoRA run"
    fi
fi
if wanted bench; then
    step bench "bench/finetune.py --device $DEVICE"
    run timeout "${BENCH_SECONDS:-600}" $PY bench/finetune.py --device "$DEVICE" ${BENCH_ARGS:-} \
        > "$OUT/bench_finetune.jsonl"
    cat "$OUT/bench_finetune.jsonl"
fi

step done "done: exit $status"
exit $status
