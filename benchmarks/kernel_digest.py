"""A digest of every candidate kernel of every op at the sweep's points, as generated for an H200: to check that a
refactor leaves the generated programs as they were (no GPU needed; inputs left uninitialized, nothing runs).

    python benchmarks/kernel_digest.py --out before.json          # at the base commit
    python benchmarks/kernel_digest.py --against before.json      # after the change: lists what differs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

import torch

import rblock
from rblock.compiler import header_lines, recording
from rblock.ops.registry import OPS
from rblock.program import make_program

TOTAL = 2**26
NS = [1024, 2048, 3000, 4096, 5120, 6144, 8192, 12288, 16384, 24576, 32768, 50257, 65536, 131072, 151936, 262144]
FEW = [(4, 2**24), (16, 2**22)]


def points():
    for op in sorted(OPS):
        for n in NS:
            yield op, (TOTAL // n, n), -1
        if op in ("sum", "var", "rms_norm", "layer_norm"):
            for m, n in FEW:
                yield op, (m, n), -1
    for n in (1024, 3000, 8192):
        yield "sum", (TOTAL // n, n), 0
    yield "cross_entropy smoothed", (1335, 50257), -1


def digests() -> dict[str, str]:
    out: dict[str, str] = {}
    for op, (m, n), dim in points():
        name = op.split()[0]
        shapes = OPS[name].make_inputs(m, n, torch.bfloat16, "meta")
        inputs = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype) for t in shapes]
        with recording(launch=False) as log:
            if op == "cross_entropy smoothed":
                rblock.cross_entropy(*inputs, label_smoothing=0.1)
            else:
                OPS[name].run(inputs, dim)
        for k, c in enumerate(log):
            for cand in c.plan.candidates:
                program = make_program(c.graph, cand.config, header_lines(c.features, c.plan, cand.config), False, True)
                text = "\n".join(st.spec.source for st in program.stages)
                out[f"{op} {m}x{n} dim {dim} kernel {k} {cand.config}"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write the digests to this JSON file")
    ap.add_argument("--against", help="compare with the digests in this JSON file")
    args = ap.parse_args()
    now = digests()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(now, f, indent=1, sort_keys=True)
    print(f"{len(now)} candidate programs")
    if not args.against:
        return 0
    with open(args.against) as f:
        before = json.load(f)
    changed = sorted(k for k in now.keys() & before.keys() if now[k] != before[k])
    gone, new = sorted(before.keys() - now.keys()), sorted(now.keys() - before.keys())
    for label, keys in (("changed", changed), ("no longer offered", gone), ("newly offered", new)):
        print(f"{label}: {len(keys)}")
        for key in keys[:50]:
            print("  " + key)
    return 1 if changed or gone or new else 0


if __name__ == "__main__":
    sys.exit(main())
