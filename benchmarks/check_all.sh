#!/usr/bin/env bash
# Every candidate of every op checked on the GPU (benchmarks/check_candidates.py), one process per op and row length
# side by side (their time goes to compiling), then the split-row kernels alone (they need the whole GPU); merged
# into $OUT/check_candidates.json.
#   OUT=/tmp/x bash benchmarks/check_all.sh [SECONDS_PER_PROCESS]
# CHECKS="softmax -1 50257;sum 0 4096" checks those (op, dim, N) alone; SPLIT_ROW=0 skips the split-row step.
set -uo pipefail
export PYTHONPATH=$PWD/src:${PYTHONPATH:-}
export RBLOCK_CACHE_DIR=$(mktemp -d)  # the sweep's own tuning stays cold
export limit=${1:-170} tmp=$(mktemp -d)
check() {  # OP DIM N
    timeout "$limit" python3 benchmarks/check_candidates.py "$tmp/$1_$2_$3.json" --ops "$1" --dim "$2" --ns "$3" \
        --total 16777216 > "$tmp/$1_$2_$3.log" 2>&1
}
export -f check
if [ -n "${CHECKS:-}" ]; then
    tr ';' '\n' <<< "$CHECKS"
else
    for n in 24576 50257 3000 5120; do
        for op in rms_norm layer_norm softmax log_softmax cross_entropy fused_add_rms_norm sum var; do
            echo "$op -1 $n"
        done
    done
    for n in 3000 5120 12288 24576; do echo "sum 0 $n"; done
fi | xargs -P "$(nproc)" -L 1 bash -c 'check "$@"' _
[ "${SPLIT_ROW:-1}" = 0 ] || timeout "$limit" python3 benchmarks/check_candidates.py "$tmp/split_row.json" --kinds split_row \
    --ops softmax,layer_norm,cross_entropy,var --ns 65536,262144 --views contiguous > "$tmp/split_row.log" 2>&1
python3 - "$tmp" "${OUT:?}/check_candidates.json" <<'PY'
import glob, json, sys
rows = [r for f in sorted(glob.glob(f"{sys.argv[1]}/*.json")) for r in json.load(open(f))["rows"]]
json.dump({"rows": rows}, open(sys.argv[2], "w"), indent=1)
bad = [r for r in rows if not r["ok"]]
print(f"{len(rows)} checks, {len(bad)} failed")
for r in bad:
    print(json.dumps(r)[:600])
PY
for f in "$tmp"/*.log; do grep -q "checks, 0 failed" "$f" || echo "cut short or failed: $(basename "$f" .log)"; done
