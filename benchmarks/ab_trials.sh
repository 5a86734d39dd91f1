#!/usr/bin/env bash
# The same trials (benchmarks/trials.py) on a base revision and on the working tree, one after the other on one GPU,
# each with a cold tuning cache; prints each point's time on both sides. Extract the base here first and carry it:
#   rm -rf .base && mkdir .base && git archive REV src | tar -x -C .base
#   OUT=/tmp/x bash benchmarks/ab_trials.sh --ops softmax,cross_entropy --ns 4096,131072
set -euo pipefail
for side in base new; do
    src=$PWD/src
    [ "$side" = base ] && src=$PWD/.base/src
    mkdir -p "${OUT:?}/$side"
    RBLOCK_CACHE_DIR=$(mktemp -d) PYTHONPATH=$src python3 benchmarks/trials.py "$OUT/$side" "$@" > "$OUT/$side/log.txt" 2>&1 \
        || echo "$side: trials failed or were cut short (see $side/log.txt)"
done
python3 - "$OUT" <<'PY'
import json, sys
sides = {s: json.load(open(f"{sys.argv[1]}/{s}/trials.json"))["rows"] for s in ("base", "new")}
def ops(rows):
    return {(r["op"], r["M"], r["N"]): r for r in rows if r.get("kernel") == 0}
base, new = ops(sides["base"]), ops(sides["new"])
for key in base:
    b, n = base[key], new.get(key)
    if n:
        print(f"{key[0]} ({key[1]}, {key[2]}): base {b['median_us']:.1f} us ({b['graph_us']} in a graph), "
              f"new {n['median_us']:.1f} us ({n['graph_us']}), {b['median_us'] / n['median_us']:.3f}x; "
              f"chosen {n['chosen']}, err {n['max_rel_error']:.1e}")
PY
