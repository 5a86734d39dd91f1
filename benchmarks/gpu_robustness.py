"""On a GPU, what tests/test_robustness.py checks in the interpreter: calls and first compiles from many threads at
once, a changed closure value, a captured tensor, an input updated in place, tanh (libdevice on the GPU); and the
host time a call's guards cost (time per call of compiled functions that read nothing, a number, a tensor besides
their arguments).

    python benchmarks/gpu_robustness.py OUT_JSON
"""

from __future__ import annotations

import json
import sys
import threading

import torch
from host_overhead import host_us  # benchmarks/ is the script's own folder

import rblock

DEV = "cuda"


def close(out: torch.Tensor, ref: torch.Tensor, tol: float = 2e-2) -> bool:
    return bool(((out.double() - ref).abs() <= tol * (ref.abs() + 1e-2)).all())


def threads(calls: int = 40) -> dict:
    x = torch.randn(256, 4096, device=DEV, dtype=torch.bfloat16)
    ref = torch.softmax(x.double(), -1)
    rblock.softmax(x, -1)
    torch.cuda.synchronize()
    problems: list[str] = []

    def compiled(i: int) -> None:
        for k in range(calls):
            try:
                if not close(rblock.softmax(x, -1), ref):
                    problems.append(f"softmax thread {i} call {k}: wrong")
            except Exception as e:  # noqa: BLE001 -- every failure is reported
                problems.append(f"softmax thread {i} call {k}: {type(e).__name__}: {e}"[:300])

    def first(i: int) -> None:
        n = 1000 + 97 * i
        a, w = torch.randn(64, n, device=DEV), torch.randn(n, device=DEV)
        want = torch.nn.functional.rms_norm(a.double(), (n,), w.double(), 1e-6)
        for k in range(calls // 4):
            try:
                if not close(rblock.rms_norm(a, (n,), w, 1e-6), want, 1e-4):
                    problems.append(f"rms_norm {n} thread {i} call {k}: wrong")
            except Exception as e:  # noqa: BLE001
                problems.append(f"rms_norm {n} thread {i} call {k}: {type(e).__name__}: {e}"[:300])

    pool = [threading.Thread(target=compiled, args=(i,)) for i in range(4)]
    pool += [threading.Thread(target=first, args=(i,)) for i in range(8)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return {"calls": 4 * calls + 8 * (calls // 4), "problems": problems}


def guards() -> dict:
    x = torch.randn(512, 3000, device=DEV)
    scale = 2.0
    f = rblock.compile(lambda a: (a * scale).sum(-1))
    first = close(f(x), (x.double() * 2).sum(-1), 1e-5)
    scale = 5.0  # noqa: F841 -- read by the lambda
    second = close(f(x), (x.double() * 5).sum(-1), 1e-5)
    w = torch.randn(3000, device=DEV)
    g = rblock.compile(lambda a: torch.softmax(a * w, -1))
    captured = close(g(x), torch.softmax(x.double() * w.double(), -1), 1e-5)
    w.mul_(-1)
    captured_new_data = close(g(x), torch.softmax(x.double() * w.double(), -1), 1e-5)

    def h(a, b):
        a.mul_(2)
        b.copy_(a - 1)
        return torch.softmax(a, -1)

    a, b = torch.randn(512, 3000, device=DEV), torch.empty(512, 3000, device=DEV)
    a0 = a.double()
    out = rblock.compile(h)(a, b)
    mutated = close(out, torch.softmax(a0 * 2, -1), 1e-5) and close(a, a0 * 2, 1e-6) and close(b, a0 * 2 - 1, 1e-6)
    soft = rblock.compile(lambda a: torch.logsumexp(30 * torch.tanh(a / 30), -1))
    big = torch.randn(64, 50257, device=DEV, dtype=torch.bfloat16) * 40
    soft_capped = close(soft(big), torch.logsumexp(30 * torch.tanh(big.double() / 30), -1), 1e-2)
    return {
        "soft_capped_logsumexp_tanh": soft_capped,
        "closure_first": first,
        "closure_changed": second,
        "captured_tensor": captured,
        "captured_new_data": captured_new_data,
        "input_updated_in_place": mutated,
    }


def guard_cost() -> dict:
    """Host time per call (the GPU runs behind) of three compiled functions of one small kernel."""
    x, w = torch.randn(8, 4096, device=DEV), torch.randn(4096, device=DEV)
    k, eps = 2.0, 1e-6
    plain = rblock.compile(lambda a, b: (a * b).sum(-1))
    numbers = rblock.compile(lambda a, b: (a * b * k + eps).sum(-1))
    tensor = rblock.compile(lambda a: (a * w).sum(-1))
    return {
        "arguments only": host_us(lambda: plain(x, w)),
        "two closure numbers": host_us(lambda: numbers(x, w)),
        "a captured tensor": host_us(lambda: tensor(x)),
        "rblock.rms_norm (op)": host_us(lambda: rblock.rms_norm(x, (4096,), w)),
    }


def main() -> None:
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    for name, fn in (("threads", threads), ("guards", guards), ("guard_cost_host_us", guard_cost)):
        try:
            out[name] = fn()
        except Exception as e:  # noqa: BLE001 -- one failing part leaves the others' results
            out[name] = f"{type(e).__name__}: {e}"[:500]
        print(name, json.dumps(out[name], indent=1), flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
