"""Read the machine code of every candidate kernel for one op and shape, without a GPU: each candidate is compiled
for Hopper (sm_90) by Triton's own toolchain (cold: a cache of its own), as a launch on 16-byte aligned tensors
would specialize it, and its SASS is counted: global loads and stores by width, registers, stack bytes (spills),
and the seconds its compile took. What a measurement cannot say when no GPU is at hand: whether loads are
vectorized, whether a loop was unrolled, what spills, what takes long to compile.

    python benchmarks/sass.py sum 5461x12288 --dim 0 [--dtype bf16] [--kinds looped,split_row] [--maxnreg 40]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import replace

import torch

from rblock.compiler import recording
from rblock.ops.registry import OPS
from rblock.program import make_program

PTR = {"f32": "*fp32", "f16": "*fp16", "bf16": "*bf16", "i64": "*i64", "i32": "*i32", "b1": "*i1"}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

COMPILE = textwrap.dedent(
    """
    import importlib.util, json, os, re, subprocess, sys, tempfile, time, triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    bin_dir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    out = []
    for job in json.load(sys.stdin):
        spec = importlib.util.spec_from_file_location("k", job["path"])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sig = dict(job["sig"], xnumel="i32", XBLOCK="constexpr", RBLOCK="constexpr")
        aligned = [i for i in range(len(job["sig"]))] + ([len(job["sig"])] if job["xnumel"] % 16 == 0 else [])
        src = ASTSource(
            getattr(mod, job["name"]), sig, constexprs={"XBLOCK": job["XBLOCK"], "RBLOCK": job["RBLOCK"]},
            attrs={(i,): [["tt.divisibility", 16]] for i in aligned},
        )
        start = time.perf_counter()
        try:
            opts = {"num_warps": job["num_warps"]} | ({"maxnreg": job["maxnreg"]} if job["maxnreg"] else {})
            ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)
        except Exception as e:
            out.append({"error": str(e)[:300]})
            continue
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(ck.asm["cubin"])
            f.flush()
            sass = subprocess.run([os.path.join(bin_dir, "nvdisasm"), "-c", f.name], capture_output=True, text=True)
            res = subprocess.run([os.path.join(bin_dir, "cuobjdump"), "-res-usage", f.name], capture_output=True, text=True)
        ops = re.findall(r"\\b(LDG|STG)(\\.[A-Z0-9.]+)?", sass.stdout)
        regs, stack = (re.search(k + r":(\\d+)", res.stdout) for k in ("REG", "STACK"))
        out.append({"n_regs": int(regs.group(1)), "stack": int(stack.group(1)), "ops": ops,
                    "compile_s": time.perf_counter() - start, "sass": sass.stdout})
    print(json.dumps(out))
    """
)


def width(suffix: str) -> str:
    """The access width of an LDG/STG from its suffixes (no size suffix: 32 bits)."""
    for size in ("U8", "S8", "U16", "S16", "64", "128"):
        if re.search(rf"\.{size}\b", suffix):
            return {"U8": "8", "S8": "8", "U16": "16", "S16": "16"}.get(size, size)
    return "32"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("op", choices=sorted(OPS))
    ap.add_argument("shape", help="MxN")
    ap.add_argument("--dim", type=int, default=-1)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--kinds", default="", help="only candidates of these kinds (default: all)")
    ap.add_argument("--dump", default="", help="write each candidate's SASS to this folder")
    ap.add_argument("--maxnreg", type=int, default=0, help="cap every candidate's registers per thread at this")
    args = ap.parse_args()
    m, n = map(int, args.shape.split("x"))
    inputs = OPS[args.op].make_inputs(m, n, DTYPES[args.dtype], "cpu")
    with recording(launch=False) as log:
        OPS[args.op].run(inputs, args.dim)
    jobs, labels = [], []
    tmp = tempfile.mkdtemp()
    for k, compiled in enumerate(log):
        for cand in compiled.plan.candidates:
            if args.kinds and cand.config.kind not in args.kinds.split(","):
                continue
            cfg = replace(cand.config, maxnreg=args.maxnreg)
            for spec, stage in (
                (st.spec, st) for st in make_program(compiled.graph, cfg, interpret=False, pdl=True).stages
            ):
                path = os.path.join(tmp, f"k{len(jobs)}.py")
                with open(path, "w") as f:
                    f.write(spec.source)
                line = next(x for x in spec.source.splitlines() if x.startswith(f"def {spec.name}("))
                names = [a.strip() for a in line[line.index("(") + 1 :].split(",") if "_ptr" in a]
                jobs.append(
                    {
                        "path": path,
                        "name": spec.name,
                        "sig": {a: PTR[dt] for a, dt in zip(names, spec.pointer_dtypes)},
                        "xnumel": stage.xnumel,
                        "XBLOCK": spec.XBLOCK,
                        "RBLOCK": spec.RBLOCK,
                        "num_warps": spec.num_warps,
                        "maxnreg": spec.maxnreg,
                    }
                )
                labels.append(f"kernel {k} {cfg}{' ' + spec.name if len(labels) and 'combine' in spec.name else ''}")
    # a cache of its own, so that every compile is timed cold
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"TRITON_CACHE_DIR": tmp}
    done = subprocess.run(
        [sys.executable, "-c", COMPILE], input=json.dumps(jobs), capture_output=True, text=True, env=env
    )
    if done.returncode:
        sys.exit(done.stderr[-3000:])
    for i, (label, res) in enumerate(zip(labels, json.loads(done.stdout.strip().splitlines()[-1]))):
        if args.dump and "sass" in res:
            os.makedirs(args.dump, exist_ok=True)
            with open(os.path.join(args.dump, f"{i:02d}.sass"), "w") as f:
                f.write(f"// {label}\n{res['sass']}")
        if "error" in res:
            print(f"{label}: failed to compile: {res['error']}")
            continue
        counts: dict[str, int] = {}
        for op, suffix in res["ops"]:
            key = f"{op}.{width(suffix)}"
            counts[key] = counts.get(key, 0) + 1
        text = "  ".join(f"{k}x{v}" for k, v in sorted(counts.items()))
        print(f"{label}: regs {res['n_regs']} stack {res['stack']}  {text}  compiled in {res['compile_s']:.1f} s")


if __name__ == "__main__":
    main()
