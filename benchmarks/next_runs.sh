#!/usr/bin/env bash
# The runs listed under "Next GPU runs" in benchmarks/NOTES.md, as steps of one script, each step bounded in time so
# that one call of at most 600 s brings back what it measured (every bench process is stopped with SIGTERM, which
# still writes its rows; a step with under 20 s left is skipped). From the repository root of the GPU machine, results
# under $OUT:
#   OUT=/path bash benchmarks/next_runs.sh STEP
# Steps:
#   sweep   rblock alone at every point of the targets, each op group in a process of its own (limits that fit an
#           H100 too: there rms_norm to log_softmax up to 32K took about 190 s, the long rows about 80)
#   peers   compile, compile_max and Liger beside rblock where a point misses by its ratio alone (runs 1 and 7)
#   probes  cross_entropy's timed call traced, host time, back to back, flush kinds, trials where the H200 and the
#           H100 disagree, small batches (runs 0, 2, 4, 5)
#   walk_ab cross_entropy and fused_add_rms_norm at 50257 against 26d1ae4, and fused_add's walked form forced at
#           other warp counts and register caps (run 9); needs .base (git-ignored: extract it where the run starts
#           from, and carry it): rm -rf .base && mkdir .base && git archive 26d1ae4 src | tar -x -C .base
#   auto    sweep on an H200, walk_ab on any other GPU
# Liger's wheel goes in .whl/ (see run_h200.sh).
set -u
step=${1:?usage: OUT=DIR bash benchmarks/next_runs.sh sweep|peers|probes|walk_ab|auto}
mkdir -p "${OUT:?set OUT}"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt"
cat "$OUT/gpu.txt"
if [ "$step" = auto ]; then
    [[ $gpu == *H200* ]] && step=sweep || step=walk_ab
    echo "auto: $step"
fi
t0=$SECONDS
left() { echo $(($1 - (SECONDS - t0))); }  # seconds from now until $1 s into the step
# run NAME SECONDS LOG COMMAND...: one bounded process (SIGTERM at the limit, SIGKILL 5 s later)
run() {
    local name=$1 limit=$2 log=$3
    shift 3
    if [ "$limit" -lt 20 ]; then
        echo "$name: skipped, $limit s left"
        return
    fi
    PYTHONUNBUFFERED=1 timeout -k 5 -s TERM "$limit" "$@" > "$log" 2>&1
    echo "$name: rc $? at $((SECONDS - t0)) s"
}
# bench NAME SECONDS FLAGS...: one `rblock bench` process
bench() {
    OUT=$OUT/bench run "$1" "$2" "$OUT/$1.log" bash benchmarks/run_h200.sh --name "$1" "${@:3}"
}
# probe NAME SECONDS SCRIPT ARGS...: one script of benchmarks/, in fresh rblock and Triton caches
probe() {
    local cache
    cache=$(mktemp -d)
    RBLOCK_CACHE_DIR=$cache TRITON_CACHE_DIR=$cache/triton PYTHONPATH=$PWD/src run "$1" "$2" "$OUT/$1.txt" python3 "${@:3}"
}
UP_TO_32K=1024,2048,3000,4096,5120,6144,8192,12288,16384,24576,32768
PEERS=rblock,compile,compile_max,liger

case $step in
sweep)
    probe ceilings 35 benchmarks/ceilings.py
    bench rows 95 --providers rblock --ops rms_norm,fused_add_rms_norm --ns $UP_TO_32K
    bench rows_sm 95 --providers rblock --ops softmax,log_softmax --ns $UP_TO_32K
    bench rows2 120 --providers rblock --ops layer_norm,sum,var,sum_dim0 --ns $UP_TO_32K
    bench ce 95 --providers rblock --graphs --ops cross_entropy \
        --ns 4096,8192,16384,32768,50257,65536,128256,131072,151936,256000,262144
    bench big 85 --providers rblock --ops rms_norm,layer_norm,softmax,log_softmax,fused_add_rms_norm \
        --ns 65536,131072,262144
    bench few "$(left 575)" --providers rblock --graphs --ops sum,var --ns 4194304,16777216
    ;;
peers)
    bench peers_rms 190 --providers $PEERS --ops rms_norm --ns $UP_TO_32K
    bench peers_fa 150 --providers $PEERS --ops fused_add_rms_norm --ns $UP_TO_32K
    bench peers_short 120 --providers $PEERS --ops softmax,log_softmax,layer_norm --ns 1024,2048
    bench peers_sum "$(left 525)" --providers $PEERS --ops sum --ns 6144,8192,12288,16384,24576,32768
    probe trials_1536 "$(left 575)" benchmarks/trials.py "$OUT/trials_1536" --ops rms_norm,fused_add_rms_norm \
        --ns 1536,2048
    ;;
probes)
    probe timeline_ce 80 benchmarks/timeline.py --ops cross_entropy --ns 4096,8192,32768
    probe host_overhead 40 benchmarks/host_overhead.py
    probe back_to_back 70 benchmarks/back_to_back.py --ops cross_entropy --ns 4096,8192,16384,32768
    probe flush_kinds 60 benchmarks/flush_kinds.py
    probe trials_ln 120 benchmarks/trials.py "$OUT/trials_ln" --ops layer_norm --ns 12288,16384,24576,32768
    probe trials_sm 40 benchmarks/trials.py "$OUT/trials_sm" --ops softmax --ns 16384
    for i in 1 2 3; do
        probe trials_var$i 25 benchmarks/trials.py "$OUT/trials_var$i" --ops var --ns 2048
    done
    bench small "$(left 575)" --providers rblock --ops rms_norm --ns 4096 --small-batch
    ;;
walk_ab)
    [ -d .base/src ] || { echo "walk_ab needs .base/src (see above)" >&2; exit 2; }
    probe ceilings 40 benchmarks/ceilings.py
    OUT=$OUT/ab run ab 380 "$OUT/ab.txt" bash benchmarks/ab_trials.sh --ops cross_entropy,fused_add_rms_norm --ns 50257
    probe fa_forms "$(left 575)" benchmarks/trials.py "$OUT/fa_forms" --ops fused_add_rms_norm --ns 50257 --configs \
        '[{"kind": "looped", "XBLOCK": 1, "RBLOCK": 4096, "num_warps": 8, "align": true},
          {"kind": "looped", "XBLOCK": 1, "RBLOCK": 4096, "num_warps": 16, "align": true, "maxnreg": 64},
          {"kind": "looped", "XBLOCK": 1, "RBLOCK": 2048, "num_warps": 8, "align": true}]'
    ;;
*)
    echo "unknown step $step" >&2
    exit 2
    ;;
esac
