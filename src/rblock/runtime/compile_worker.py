"""A compile worker's main loop, run as `python -c` with this file's text: Triton alone is imported (not rblock,
which imports torch), so a worker starts in a fraction of a second. The first line of stdin is the parent's
sys.path; each later line a job, a kernel the parent's JIT was about to compile: the file and module it came from,
its name, the JIT's specialization data, the target and Triton's cache folder. The worker compiles it into that
cache as `JITFunction.preload` would, without a device, and answers one line per job: {"error": null} or the
error's text.
"""

import importlib.util
import json
import os
import sys


def compile_job(job: dict, modules: dict) -> None:
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    triton.knobs.cache.dir = job["cache_dir"]
    if job["path"] not in modules:
        spec = importlib.util.spec_from_file_location(job["module"], job["path"])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules[job["path"]] = module
    fn = getattr(modules[job["path"]], job["name"])
    data = json.loads(job["data"])
    constexprs = {
        tuple(k): tl.dtype(v) if tl.dtype.is_dtype(v) else tl.constexpr(v["constexpr"]) if isinstance(v, dict) else v
        for k, v in zip(data["constant_keys"], data["constant_vals"])
    }
    attrs = dict(zip(map(tuple, data["attrs_keys"]), data["attrs_vals"]))
    signature = {k: tuple(v) if isinstance(v, list) else v for k, v in data["signature"].items()}
    target = GPUTarget(*job["target"])
    options = make_backend(target).parse_options(
        {k: tuple(v) if isinstance(v, list) else v for k, v in data["options"].items()}
    )
    triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__)


def main() -> None:
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever a compile prints goes where the parent sends stderr, not into the replies
    sys.path[:] = json.loads(sys.stdin.readline())
    modules: dict = {}
    for line in sys.stdin:
        try:
            compile_job(json.loads(line), modules)
            error = None
        except Exception as e:  # the parent compiles it itself, and reports what fails there
            error = f"{type(e).__name__}: {e}"[:500]
        replies.write(json.dumps({"error": error}) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
