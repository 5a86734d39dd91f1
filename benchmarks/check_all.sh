#!/usr/bin/env bash
# Every candidate of every op checked on the GPU (benchmarks/check_candidates.py), one process per op side by side,
# then the split-row kernels alone (they need the whole GPU); merged into $OUT/check_candidates.json.
#   OUT=/tmp/x bash benchmarks/check_all.sh [SECONDS_PER_STAGE]
set -uo pipefail
export PYTHONPATH=$PWD/src:${PYTHONPATH:-}
export RBLOCK_CACHE_DIR=$(mktemp -d)  # the sweep's own tuning stays cold
limit=${1:-170}
tmp=$(mktemp -d)
for op in rms_norm layer_norm softmax log_softmax cross_entropy fused_add_rms_norm sum var; do
    timeout "$limit" python3 benchmarks/check_candidates.py "$tmp/$op.json" --ops "$op" --ns 3000,5120,24576,50257 \
        --total 16777216 > "$tmp/$op.log" 2>&1 &
done
timeout "$limit" python3 benchmarks/check_candidates.py "$tmp/sum_dim0.json" --ops sum --dim 0 \
    --ns 3000,5120,12288,24576 --total 16777216 > "$tmp/sum_dim0.log" 2>&1 &
wait
timeout "$limit" python3 benchmarks/check_candidates.py "$tmp/split_row.json" --kinds split_row \
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
for f in "$tmp"/*.log; do echo "== $f"; grep -v '"ok": true' "$f" | tail -5; done
