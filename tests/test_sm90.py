"""Every candidate kernel of every op compiles for Hopper (sm_90) with Triton's own toolchain; no GPU needed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import torch

import rblock
from rblock.compiler import recording
from rblock.ops.registry import OPS
from rblock.program import make_program

PTR = {"f32": "*fp32", "f16": "*fp16", "bf16": "*bf16", "i64": "*i64", "i32": "*i32", "b1": "*i1"}

COMPILE = textwrap.dedent(
    """
    import importlib.util, json, sys, triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    failures = []
    for job in json.load(sys.stdin):
        spec = importlib.util.spec_from_file_location("k", job["path"])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sig = dict(job["sig"], xnumel="i32", XBLOCK="constexpr", RBLOCK="constexpr")
        src = ASTSource(getattr(mod, job["name"]), sig, constexprs={"XBLOCK": job["XBLOCK"], "RBLOCK": job["RBLOCK"]})
        try:
            opts = {"num_warps": job["num_warps"], "launch_pdl": job["pdl"]}
            triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)
        except Exception as e:
            failures.append(job["config"] + ": " + str(e)[:500])
    print(json.dumps(failures))
    """
)


def test_every_candidate_compiles_for_sm90(tmp_path):
    jobs = []
    runs = [
        (op, lambda op=op, m=m, n=n, dim=dim: OPS[op].run(OPS[op].make_inputs(m, n, torch.bfloat16, "cpu"), dim))
        for op, (m, n), dim in [
            ("rms_norm", (2048, 32768), -1), ("rms_norm", (64, 1000), -1), ("softmax", (2048, 32768), -1),
            ("layer_norm", (16, 5120), -1), ("cross_entropy", (64, 50257), -1), ("fused_add_rms_norm", (64, 4096), -1),
            ("fused_add_rms_norm", (64, 50257), -1), ("fused_add_rms_norm", (64, 1536), -1),
            ("var", (64, 8192), -1), ("sum", (4096, 4096), 0), ("sum", (5461, 12288), 0), ("sum", (22369, 3000), 0),
            ("logsumexp", (16, 3000), -1),
            ("amax", (8, 3000), -1),
            ("layer_norm", (512, 131072), -1), ("var", (8, 2**20), -1), ("rms_norm", (2, 2**21), -1),
        ]
    ]  # fmt: skip
    for fn, (m, n), dt in [(torch.amax, (8, 70000), torch.int64), (torch.argmin, (64, 3000), torch.int32)]:
        op = f"{fn.__name__} {dt}"  # integer identities
        f = rblock.compile(lambda x, fn=fn: fn(x, -1), name=fn.__name__)
        runs.append((op, lambda f=f, m=m, n=n, dt=dt: f(torch.randint(-(2**31), 2**31 - 1, (m, n), dtype=dt))))
    logits, target = torch.randn(64, 65536, dtype=torch.bfloat16), torch.randint(0, 65536, (64,))
    for reduction in ("none", "mean"):  # a plain sum of the row beside its logsumexp; bf16 losses, then fp32 ones
        runs.append(
            (
                f"cross_entropy label_smoothing {reduction}",
                lambda r=reduction: rblock.cross_entropy(logits, target, reduction=r, label_smoothing=0.1),
            )
        )
    for op, run in runs:
        with recording(launch=False) as log:
            run()
        for compiled in log:
            for cand in compiled.plan.candidates:
                program = make_program(compiled.graph, cand.config, interpret=False, pdl=True)  # as on an H200
                for spec in (st.spec for st in program.stages):
                    path = tmp_path / f"k{len(jobs)}.py"
                    path.write_text(spec.source)
                    jobs.append(
                        {
                            "path": str(path),
                            "name": spec.name,
                            "sig": {name: PTR[dt] for name, dt in zip(_arg_names(spec), spec.pointer_dtypes)},
                            "XBLOCK": spec.XBLOCK,
                            "RBLOCK": spec.RBLOCK,
                            "num_warps": spec.num_warps,
                            "pdl": spec.pdl,
                            "config": f"{op} {compiled.graph.xnumel}x{compiled.graph.rnumel} {cand.config}",
                        }
                    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", COMPILE], input=json.dumps(jobs), capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
    assert len(jobs) >= 20
    assert any("_combine" in j["name"] for j in jobs)  # split reductions are among the candidates
    assert any("split_row" in j["config"] for j in jobs)
    assert any("prefetch" in j["config"] and "split_row" not in j["config"] for j in jobs)  # looping single passes


def _arg_names(spec):
    """in_ptr0.., out_ptr0.. (then a split row's ws_ptr0.. and sync_ptr), read off the kernel's signature line."""
    line = next(x for x in spec.source.splitlines() if x.startswith(f"def {spec.name}("))
    return [a.strip() for a in line[line.index("(") + 1 :].split(",") if "_ptr" in a]


REGS = textwrap.dedent(
    """
    import importlib.util, json, os, re, subprocess, sys, tempfile, triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    bin_dir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    job = json.load(sys.stdin)
    spec = importlib.util.spec_from_file_location("k", job["path"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sig = dict(job["sig"], xnumel="i32", XBLOCK="constexpr", RBLOCK="constexpr")
    src = ASTSource(getattr(mod, job["name"]), sig, constexprs={"XBLOCK": job["XBLOCK"], "RBLOCK": job["RBLOCK"]})
    ck = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=job["options"])
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(ck.asm["cubin"])
        f.flush()
        res = subprocess.run([os.path.join(bin_dir, "cuobjdump"), "-res-usage", f.name], capture_output=True, text=True)
    print(re.search(r"REG:(\\d+)", res.stdout).group(1))
    """
)


def test_a_register_cap_reaches_ptxas(tmp_path):
    """A config's maxnreg travels through the kernel spec into the launch options, and ptxas keeps to it."""
    from dataclasses import replace

    with recording(launch=False) as log:
        OPS["layer_norm"].run(OPS["layer_norm"].make_inputs(64, 16384, torch.bfloat16, "cpu"), -1)
    g = log[0].graph
    base = rblock.Config("persistent_rblock", 1, 16384, 16, no_rblock_scaling=True)
    regs = {}
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    for cap in (0, 40):
        stage = make_program(g, replace(base, maxnreg=cap), interpret=False, pdl=False).stages[0]
        spec = stage.spec
        assert spec.maxnreg == cap
        options = {k: v for k, v in stage.options().items() if k not in ("XBLOCK", "RBLOCK")}
        assert ("maxnreg" in options) == bool(cap)
        path = tmp_path / f"cap{cap}.py"
        path.write_text(spec.source)
        job = {
            "path": str(path),
            "name": spec.name,
            "sig": {name: PTR[dt] for name, dt in zip(_arg_names(spec), spec.pointer_dtypes)},
            "XBLOCK": spec.XBLOCK,
            "RBLOCK": spec.RBLOCK,
            "options": options,
        }
        done = subprocess.run(
            [sys.executable, "-c", REGS], input=json.dumps(job), capture_output=True, text=True, env=env
        )
        assert done.returncode == 0, done.stderr[-3000:]
        regs[cap] = int(done.stdout.strip().splitlines()[-1])
    assert regs[40] <= 40 < regs[0]
