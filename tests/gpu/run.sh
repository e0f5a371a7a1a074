#!/usr/bin/env bash
# The GPU checks of issue 12, as one script for a machine with a CUDA GPU (an H200 here), no
# network, and torch, pytest, numpy, nvidia-ml-py and cuobjdump installed. Never part of the
# test suite; see README "Verifying a machine's bits" (On a real GPU).
#
#   tests/gpu/run.sh prepare   # HERE, before: copy samebits' two pure-Python imports the GPU
#                              # machine may lack (yaml, elftools) into build/gpu-site
#   tests/gpu/run.sh           # THERE, from the repository root (build/gpu-site carried along)
#
# Each step has its own time limit and the run stops starting steps after $BUDGET seconds
# (default 480), so it ends well inside ten minutes. ONLY=gemm_fp32,... limits verify gpu's
# workloads (for a dry run on a CPU machine, where the gpu tests skip and cuobjdump is absent). Everything lands in $OUT (default
# build/gpu-check): one log per step, summary.txt (a line per step: its exit code, seconds),
# the two attestations (compared byte for byte), the --probe attestation, the cuobjdump
# comparison, `samebits check` on torch's own prefix, and the fleet reports.
# Commit $OUT/hopper-h200.attestation.json as lockfiles/reference/hopper-h200.attestation.json.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD

if [ "${1:-}" = prepare ]; then
    rm -rf build/gpu-site && mkdir -p build/gpu-site
    for mod in yaml elftools; do
        src=$(python -c "import $mod, os; print(os.path.dirname($mod.__file__))") || exit 2
        cp -r "$src" build/gpu-site/
    done
    find build/gpu-site -name __pycache__ -prune -exec rm -rf {} +
    find build/gpu-site -name '*.so' -delete   # yaml falls back to its pure-Python parser
    du -sh build/gpu-site
    exit 0
fi

OUT=${OUT:-$ROOT/build/gpu-check}
BUDGET=${BUDGET:-480}
mkdir -p "$OUT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
python -c "import yaml, elftools" 2>/dev/null || export PYTHONPATH="$PYTHONPATH:$ROOT/build/gpu-site"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
START=$SECONDS

# step NAME LIMIT_S EXPECTED_RC COMMAND...: runs COMMAND, its output in $OUT/NAME.log
step() {
    local name=$1 limit=$2 want=$3; shift 3
    if (( SECONDS - START > BUDGET )); then
        echo "skipped  $name (past the ${BUDGET} s budget)" | tee -a "$SUMMARY"; return
    fi
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$? verdict=ok
    [ "$rc" = "$want" ] || verdict=FAILED
    printf '%-7s  %-22s rc=%-3s (want %s) %4ss\n' "$verdict" "$name" "$rc" "$want" \
        "$((SECONDS - t0))" | tee -a "$SUMMARY"
    tail -n 3 "$OUT/$name.log" | sed 's/^/           | /'
}

{
    nvidia-smi --query-gpu=name,uuid,compute_cap,driver_version,mig.mode.current --format=csv
    python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_arch_list())"
    command -v cuobjdump && cuobjdump --version | tail -1
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

gpu_tests=$(grep -l 'mark.gpu' tests/test_gpu_*.py tests/test_facts.py tests/test_fleet.py \
            2>/dev/null | tr '\n' ' ')
# shellcheck disable=SC2086
step gpu-tests 240 0 python -m pytest -q -m gpu -p no:cacheprovider $gpu_tests
step verify-gpu-1 150 0 python -m verify gpu ${ONLY:+--only "$ONLY"} --out "$OUT/run1.intoto.json"
step verify-gpu-2 150 0 python -m verify gpu ${ONLY:+--only "$ONLY"} --out "$OUT/run2.intoto.json"
step identical 10 0 cmp "$OUT/run1.intoto.json" "$OUT/run2.intoto.json"
cp "$OUT/run1.intoto.json" "$OUT/hopper-h200.attestation.json" 2>/dev/null
step compare 60 0 python -m verify compare "$OUT/run1.intoto.json" "$OUT/run2.intoto.json"
step cuobjdump 180 0 python -m tests.gpu.cuobjdump_compare
# the prefix torch is installed in: PREFIX/lib/pythonX.Y/site-packages/torch/__init__.py
prefix=$(python -c "import torch, pathlib; print(pathlib.Path(torch.__file__).resolve().parents[4])")
step check-h200 120 0 python -m samebits check --prefix "$prefix" --gpu H200
# two ranks on the one GPU: refused before anything runs (exit 1, "two ranks ... one GPU")
step fleet-shared-gpu 120 1 python -m torch.distributed.run --standalone --nproc-per-node 2 -m verify fleet \
    --only gemm_fp32 --no-env-digest --rank-timeout 60 --out "$OUT/fleet-shared.json"
step fleet-one-rank 120 0 python -m torch.distributed.run --standalone --nproc-per-node 1 -m verify fleet \
    --only gemm_fp32,sum_fp32 --no-env-digest --rank-timeout 60 --out "$OUT/fleet-one.json"
step verify-gpu-probe 200 0 python -m verify gpu --probe ${ONLY:+--only "$ONLY"} \
    --out "$OUT/probe.intoto.json"

echo "total $((SECONDS - START)) s; results in $OUT"
! grep -q '^FAILED' "$SUMMARY"
