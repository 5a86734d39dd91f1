#!/usr/bin/env bash
# Run `rblock bench` on a GPU machine, from the repository root:
#   bash benchmarks/run_h200.sh --quick
# Wheels placed in .whl/ (e.g. liger_kernel) are installed first, without network access.
# Results go to $OUT (default benchmarks/results); extra flags are passed to `python -m rblock.bench`.
set -euo pipefail

if [ -d .whl ] && compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD/src:${PYTHONPATH:-}

out=${OUT:-benchmarks/results}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
# exec: a SIGTERM (e.g. from `timeout`) reaches Python, which then still reports the rows measured so far
PYTHONUNBUFFERED=1 exec python3 -m rblock.bench --out "$out" "$@"
