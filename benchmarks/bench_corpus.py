"""The headline kernels of the TileLang corpus, built from the same source by tegula and by TileLang
0.1.15 in one process on one GPU, beside cuBLAS / SDPA where one computes the same thing.

    PYTHONPATH=/tmp/site:$PWD python benchmarks/bench_corpus.py --out results.json
        [--corpus DIR] [--only gemm,fa_fwd,...] [--per-case-s 120] [--budget-s 330] [--dry-run]

The corpus (``../shared/conformance/tilelang/examples``, or ``.conformance/...`` beside the tree
on the GPU machine) is data: each example module is imported as it is, twice. First with
``import tilelang`` resolved to tegula (``tegula.compat.alias_tilelang``), then, with the example
modules and the alias dropped from ``sys.modules``, with the real TileLang (``/tmp/site`` from the
peers archive). Both builds get the same fresh random inputs; each output is checked against the
corpus's own torch reference (relative error), then timed: the median of
``triton.testing.do_bench`` (CUDA events, L2 flushed between runs). tegula is timed again right
after TileLang, so each row has two tegula times (their spread is the noise of the run).

Each kernel runs under a time limit in a try/except: a kernel one framework cannot build gets its
error in the row instead of a number. Results are written after every step (``--out``).
``--dry-run`` (no GPU): only tegula's builds, compile-only for ``cuda:sm_90a``.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import json
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


# ---------------------------------------------------------------------------------------------
# The cases: what each corpus example is built with, fed, checked against and timed beside
# ---------------------------------------------------------------------------------------------

@dataclass
class Case:
    """One headline kernel of the corpus. ``build(mod)`` returns the kernel a framework builds from
    the example module ``mod``; ``inputs()`` fresh random CUDA tensors (made once, given to both);
    ``run(kernel, inputs)`` the output; ``reference(mod, inputs)`` the corpus's torch reference;
    ``peer`` (label, inputs -> callable) a library doing the same work; ``work`` (flops, bytes)."""

    key: str
    title: str
    directory: str
    module: str
    shape: str
    build: Callable[[Any], Any]
    inputs: Callable[[], tuple]
    reference: Callable[[Any, tuple], Any]
    run: Callable[[Any, tuple], Any] = lambda k, ins: k(*ins)
    peer: Optional[tuple[str, Callable[[tuple], Callable[[], Any]]]] = None
    work: tuple[float, float] = (0.0, 0.0)
    tol: float = 1e-2
    timed: Optional[Callable[[Any, Any, tuple], Callable[[], Any]]] = None  # what to time, if not run
    dry_build: Optional[Callable[[Any], Any]] = None  # the build without a GPU, if not build


def _randn(*shape, dtype="float16"):
    import torch

    return torch.randn(*shape, device="cuda", dtype=getattr(torch, dtype))


def _gemm_case() -> Case:
    n = 4096
    return Case(
        "gemm", "GEMM fp16 (example_gemm.matmul, 128x128x32, 3 stages)", "gemm", "example_gemm",
        f"M=N=K={n}",
        build=lambda m: m.matmul.compile(M=n, N=n, K=n, block_M=128, block_N=128, block_K=32),
        inputs=lambda: (_randn(n, n), _randn(n, n)),
        reference=lambda m, ins: ins[0] @ ins[1],
        peer=("cuBLAS (torch.matmul)", lambda ins: (lambda: ins[0] @ ins[1])),
        work=(2.0 * n**3, 3 * 2.0 * n * n))


def _fa_case() -> Case:
    b, h, s, d = 4, 32, 4096, 64

    def sdpa(ins):
        import torch.nn.functional as F

        return lambda: F.scaled_dot_product_attention(ins[0], ins[1], ins[2])

    return Case(
        "fa_fwd", "flash attention fwd (example_mha_fwd_bhsd, 128x128, 2 stages, 256 thr)",
        "flash_attention", "example_mha_fwd_bhsd", f"B={b} H={h} S={s} D={d} fp16, not causal",
        build=lambda m: m.flashattn(b, h, s, s, d, False, block_M=128, block_N=128, num_stages=2,
                                    threads=256),
        inputs=lambda: (_randn(b, h, s, d), _randn(b, h, s, d), _randn(b, h, s, d)),
        reference=lambda m, ins: m.ref_program(*ins, False),
        peer=("SDPA (torch default backend)", sdpa),
        work=(4.0 * b * h * s * s * d, 4 * 2.0 * b * h * s * d))


def _decode_case() -> Case:
    b, h, q, kv, d = 1, 32, 128, 8192, 128

    def sdpa(ins):
        import torch.nn.functional as F

        qq, kk, vv = (x.transpose(1, 2) for x in ins)
        return lambda: F.scaled_dot_product_attention(qq, kk, vv)

    return Case(
        "flash_decoding", "flash decoding, KV split in 4 (example_mha_inference, 128x64)",
        "flash_decoding", "example_mha_inference", f"B={b} H={h} Q={q} KV={kv} D={d} fp16",
        build=lambda m: m.flashattn(b, h, q, kv, d, False, 128, 64),
        inputs=lambda: (_randn(b, q, h, d), _randn(b, kv, h, d), _randn(b, kv, h, d)),
        reference=lambda m, ins: m.ref_program(*ins, False),
        peer=("SDPA (torch default backend)", sdpa),
        work=(4.0 * b * h * q * kv * d, 2.0 * (2 * b * q * h * d + 2 * b * kv * h * d)))


def _mla_case() -> Case:
    b, h, kv, d, pe = 32, 128, 8192, 512, 64
    return Case(
        "mla_decode", "DeepSeek MLA decode (example_mla_decode, block_N=64, block_H=64, no split)",
        "deepseek_mla", "example_mla_decode", f"B={b} H={h} KV={kv} dim={d} pe={pe} fp16",
        build=lambda m: m.flashattn(b, h, 1, kv, d, pe, 64, 64, 1, (d + pe) ** -0.5),
        inputs=lambda: (_randn(b, h, d), _randn(b, h, pe), _randn(b, kv, 1, d), _randn(b, kv, 1, pe)),
        reference=lambda m, ins: m.ref_program(*ins),
        work=(2.0 * b * h * kv * (2 * d + pe), 2.0 * b * kv * (d + pe)))


def _moe_sizes() -> dict:
    return dict(d_hidden=4096, d_expert=1024, n_routed_experts=8, n_shared_experts=1,
                n_experts_per_token=4, batch_size=1, seq_len=4096)


def _moe_case() -> Case:
    """The corpus's own ``run_regression_perf`` builds the MoE and times its routed grouped GEMM
    kernel through ``tilelang.profiler.do_bench``; that function is swapped for one that hands
    back what it was asked to time. Correctness: the corpus's ``main`` (tilelang vs torch)."""
    sz = _moe_sizes()
    tokens = sz["batch_size"] * sz["seq_len"] * sz["n_experts_per_token"]
    flops = 2.0 * tokens * sz["d_hidden"] * sz["d_expert"] * 3
    return Case(
        "fusedmoe", "fused MoE, routed experts (example_fusedmoe_tilelang, its run_regression_perf)",
        "fusedmoe", "example_fusedmoe_tilelang",
        f"hidden={sz['d_hidden']} expert={sz['d_expert']} experts=8 top-4 tokens={sz['seq_len']}",
        build=_moe_build, inputs=lambda: (), reference=lambda m, ins: None,
        run=lambda k, ins: None, timed=lambda k, m, ins: k, dry_build=_moe_kernels,
        work=(flops, 0.0))


def _moe_kernels(mod: Any) -> tuple:
    """The two kernels run_regression_perf compiles, at its sizes (no GPU needed)."""
    sz = _moe_sizes()
    tokens = sz["batch_size"] * sz["seq_len"]
    shared = mod.moe_forward_tilelang_shared.compile(
        dhidden=sz["d_hidden"], dexpert=sz["d_expert"] * sz["n_shared_experts"], num_tokens=tokens,
        dtype="float16")
    routed = mod.moe_forward_tilelang_routed.compile(
        dhidden=sz["d_hidden"], dexpert=sz["d_expert"], n_routed_experts=sz["n_routed_experts"],
        dtype="float16", group_sum=tokens * sz["n_experts_per_token"],
        group_count=sz["n_routed_experts"], block_token=128, block_dhidden=128, block_dexpert=128,
        threads=256, num_stages=1)
    return shared, routed


def _moe_build(mod: Any) -> Any:
    """The routed kernel's timed closure, as the corpus's run_regression_perf sets it up; checks
    the corpus's main() first at the regression test's sizes."""
    prof = importlib.import_module("tilelang.profiler")
    mod.main(d_hidden=1024, d_expert=256, n_routed_experts=8, n_shared_experts=1,
             n_experts_per_token=4, batch_size=1, seq_len=1024)  # asserts against torch
    asked: list = []
    original = prof.do_bench
    prof.do_bench = lambda fn, *a, **kw: asked.append(fn) or 1.0
    try:
        mod.run_regression_perf(**_moe_sizes())
    finally:
        prof.do_bench = original
    return asked[-1]


def _dequant_case() -> Case:
    m = n = k = 4096

    def peer(ins):  # cuBLAS on the weights dequantized once, outside the timing
        b = _fp4_to_fp16(ins[1])
        return lambda: ins[0] @ b.T

    def inputs():
        import torch

        return (_randn(m, k), torch.randint(0, 256, (n, k // 2), device="cuda", dtype=torch.uint8))

    return Case(
        "dequant_gemm", "dequantize GEMM fp16 x fp4 (example_dequant_gemm_fp4_hopper, 128x128x128)",
        "dequantize_gemm", "example_dequant_gemm_fp4_hopper", f"M=N=K={m}",
        build=lambda mod: mod.matmul(m, n, k, "float16", "float16", "float32", num_bits=4,
                                     block_M=128, block_N=128, block_K=128, num_stages=2,
                                     threads=256, split=1),
        inputs=inputs, reference=lambda mod, ins: mod.ref_program(*ins),
        peer=("cuBLAS fp16 on dequantized weights", peer),
        work=(2.0 * m * n * k, 2.0 * m * k + n * k / 2 + 2.0 * m * n))


_FP4_REF: dict = {}


def _fp4_to_fp16(qb):
    return _FP4_REF["convert"](qb)


def _fp8_case() -> Case:
    n = 4096

    def inputs():
        import torch

        return (_randn(n, n).to(torch.float8_e4m3fn), _randn(n, n).to(torch.float8_e4m3fn))

    def peer(ins):
        import torch

        one = torch.ones((), device="cuda")
        return lambda: torch._scaled_mm(ins[0], ins[1].T, one, one, out_dtype=torch.bfloat16)

    return Case(
        "gemm_fp8", "GEMM fp8 e4m3 (example_tilelang_gemm_fp8.matmul, 128x128x64)", "gemm_fp8",
        "example_tilelang_gemm_fp8", f"M=N=K={n}, C = A B^T",
        build=lambda m: m.matmul.compile(M=n, N=n, K=n, block_M=128, block_N=128, block_K=64,
                                         dtype=m.determine_fp8_type()),
        inputs=inputs,
        reference=lambda m, ins: (ins[0].half() @ ins[1].half().T),
        peer=("cuBLASLt fp8 (torch._scaled_mm, bf16 out)", peer),
        work=(2.0 * n**3, 3.0 * n * n), tol=0.08)


def _gemv_case() -> Case:
    n = k = 8192
    return Case(
        "gemv", "GEMV fp16 (example_gemv.splitk_gemv_vectorized, BLOCK_N=2, 32 reduce threads)",
        "gemv", "example_gemv", f"N=K={n}",
        build=lambda m: m.splitk_gemv_vectorized.compile(N=n, K=k, BLOCK_N=2, reduce_threads=32),
        inputs=lambda: (_randn(k), _randn(n, k)),
        reference=lambda m, ins: m.ref_program(*ins),
        peer=("cuBLAS (torch B @ a)", lambda ins: (lambda: ins[1] @ ins[0])),
        work=(2.0 * n * k, 2.0 * (n * k + n + k)))


CASES = [_gemm_case(), _fa_case(), _decode_case(), _mla_case(), _moe_case(), _dequant_case(),
         _fp8_case(), _gemv_case()]


# ---------------------------------------------------------------------------------------------
# Importing a corpus example under one framework or the other
# ---------------------------------------------------------------------------------------------

def default_corpus() -> Path:
    """The corpus's examples: ``TEGULA_CONFORMANCE``, else ``.conformance`` or ``shared/conformance``
    in the tree's root or a folder above it (``tegula.config.conformance_root``)."""
    from tegula import config

    found = config.conformance_root(ROOT)
    base = Path(found) if found is not None else config.conformance_candidates(ROOT)[0]
    return base / "tilelang" / "examples"


class Corpus:
    """Imports example modules from the corpus and forgets them again (and what they imported
    from their own folders), so the next framework imports them afresh."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.paths: list[str] = []

    def load(self, directory: str, module: str) -> Any:
        d = str(self.root / directory)
        if d not in sys.path:
            sys.path.insert(0, d)
            self.paths.append(d)
        return importlib.import_module(module)

    def forget(self) -> None:
        for name, mod in list(sys.modules.items()):
            f = getattr(mod, "__file__", None) or ""
            if f and str(Path(f).resolve()).startswith(str(self.root)):
                del sys.modules[name]
        for d in self.paths:
            while d in sys.path:
                sys.path.remove(d)
        self.paths.clear()


def use_tegula() -> str:
    from tegula.compat import alias_tilelang

    alias_tilelang()
    import tegula

    return f"tegula {getattr(tegula, '__version__', '?')}"


def use_tilelang() -> str:
    from tegula.compat.alias import unalias_tilelang

    unalias_tilelang()
    import tilelang

    if getattr(tilelang, "__name__", "") != "tilelang" or "tegula" in getattr(tilelang, "__file__", ""):
        raise ImportError("`import tilelang` still gives tegula")
    return f"TileLang {getattr(tilelang, '__version__', '?')} ({Path(tilelang.__file__).parent})"


# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------

class Timeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise Timeout in this thread after ``seconds`` (Python code only: a call stuck in C
    returns first)."""
    def fire(signum, frame):
        raise Timeout(f"over the {seconds:.0f} s limit")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(1.0, seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def median_ms(fn: Callable[[], Any]) -> float:
    """Median milliseconds of ``fn()`` (bench_cuda.bench: triton's do_bench, CUDA events)."""
    from bench_cuda import bench

    return bench(fn, warmup=15, rep=60)


def rel_err(out: Any, ref: Any) -> float:
    from bench_cuda import rel_err as err

    return err(out, ref)


def short_error(e: BaseException) -> str:
    """The error's first lines (a tegula error's message carries the user's line and a hint)."""
    text = f"{type(e).__name__}: {e}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[:4])[:600]


@dataclass
class Runner:
    args: Any
    results: dict = field(default_factory=dict)
    kernels: dict = field(default_factory=dict)   # (case, framework) -> what to time
    inputs: dict = field(default_factory=dict)    # case -> inputs
    t0: float = field(default_factory=time.time)

    def save(self) -> None:
        if self.args.out:
            Path(self.args.out).write_text(json.dumps(self.results, indent=1, default=str))

    def row(self, case: Case) -> dict:
        rows = self.results.setdefault("rows", {})
        return rows.setdefault(case.key, {"title": case.title, "shape": case.shape,
                                          "corpus": f"{case.directory}/{case.module}.py"})

    def left(self) -> float:
        return self.args.budget_s - (time.time() - self.t0)

    def framework(self, name: str, cases: list[Case], corpus: Corpus) -> None:
        for case in cases:
            row = self.row(case)
            if self.left() < 20:
                row[name] = {"error": "not run: the run's time budget was spent"}
                self.save()
                continue
            rec: dict = {}
            row[name] = rec
            t = time.time()
            try:
                with time_limit(min(self.args.per_case_s, self.left() - 10)):
                    self.one(name, case, corpus, rec)
            except BaseException as e:  # a kernel that fails must not stop the others
                if isinstance(e, KeyboardInterrupt):
                    raise
                rec["error"] = short_error(e)
                rec["traceback_tail"] = traceback.format_exc().splitlines()[-6:]
            rec["seconds"] = round(time.time() - t, 1)
            print(f"[{name}] {case.key}: {rec.get('ms', rec.get('error', 'built'))}", flush=True)
            self.save()

    def one(self, name: str, case: Case, corpus: Corpus, rec: dict) -> None:
        t = time.time()
        mod = corpus.load(case.directory, case.module)
        rec["import_s"] = round(time.time() - t, 2)
        if case.key == "dequant_gemm" and "convert" not in _FP4_REF:
            _FP4_REF["convert"] = mod.torch_convert
        t = time.time()
        if self.args.dry_run:
            (case.dry_build or case.build)(mod)
            rec["build_s"] = round(time.time() - t, 2)
            rec["built"] = True
            return
        kernel = case.build(mod)
        rec["build_s"] = round(time.time() - t, 2)
        if case.key not in self.inputs:
            self.inputs[case.key] = case.inputs()
        ins = self.inputs[case.key]
        if case.timed is None:
            out = case.run(kernel, ins)
            out = out[0] if isinstance(out, (tuple, list)) else out
            ref = case.reference(mod, ins)
            rec["rel_err"] = rel_err(out, ref)
            if not rec["rel_err"] <= case.tol:
                raise AssertionError(f"wrong result: relative error {rec['rel_err']:.3g} "
                                     f"(limit {case.tol}) against the corpus's reference")
            fn = lambda: case.run(kernel, ins)  # noqa: E731
        else:
            fn = case.timed(kernel, mod, ins)
            rec["checked"] = "the corpus's own main() against torch"
        rec["ms"] = median_ms(fn)
        self.kernels[(case.key, name)] = fn
        self.rates(case, rec)

    def rates(self, case: Case, rec: dict) -> None:
        flops, nbytes = case.work
        if flops:
            rec["tflops"] = flops / rec["ms"] * 1e-9
        if nbytes:
            rec["gbs"] = nbytes / rec["ms"] * 1e-6

    def peers(self, cases: list[Case]) -> None:
        for case in cases:
            done = "peer" in self.results.get("rows", {}).get(case.key, {})
            if case.peer is None or done or case.key not in self.inputs or self.left() < 15:
                continue
            label, make = case.peer
            rec = {"label": label}
            self.row(case)["peer"] = rec
            try:
                with time_limit(min(60, self.left() - 5)):
                    rec["ms"] = median_ms(make(self.inputs[case.key]))
                self.rates(case, rec)
            except BaseException as e:
                if isinstance(e, KeyboardInterrupt):
                    raise
                rec["error"] = short_error(e)
            self.save()

    def retime(self, cases: list[Case], name: str, field_name: str) -> None:
        for case in cases:
            fn = self.kernels.get((case.key, name))
            if fn is None or self.left() < 10:
                continue
            rec = self.row(case)[name]
            try:
                with time_limit(min(30, self.left() - 5)):
                    rec[field_name] = median_ms(fn)
            except BaseException as e:
                if isinstance(e, KeyboardInterrupt):
                    raise
                rec[field_name + "_error"] = short_error(e)
            self.save()


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def _cell(rec: Optional[dict], key: str = "ms") -> str:
    if not rec:
        return "-"
    if "error" in rec:
        return "error"
    v = rec.get(key)
    return f"{v:.3f}" if isinstance(v, float) else "-"


def markdown(results: dict) -> str:
    """The table BENCHMARKS.md shows: times in ms, rates, ratios (peer / tegula: above 1, tegula
    is faster), and each framework's error where it could not build or run the kernel."""
    out = ["| kernel | shape | tegula ms (again) | TileLang ms | peer ms (which) | TileLang / tegula | "
           "peer / tegula | tegula rel. err |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    notes = []
    for key, row in results.get("rows", {}).items():
        tg, tl, pr = row.get("tegula"), row.get("tilelang"), row.get("peer")
        ms = lambda r: r.get("ms") if r and "error" not in r else None  # noqa: E731
        ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"  # noqa: E731
        again = f" ({tg['again_ms']:.3f})" if tg and isinstance(tg.get("again_ms"), float) else ""
        peer = f"{_cell(pr)} ({pr['label']})" if pr else "-"
        err = f"{tg['rel_err']:.1e}" if tg and isinstance(tg.get("rel_err"), float) else "-"
        out.append(f"| {key} | {row['shape']} | {_cell(tg)}{again} | {_cell(tl)} | {peer} | "
                   f"{ratio(ms(tl), ms(tg))} | {ratio(ms(pr), ms(tg))} | {err} |")
        for name, rec in (("tegula", tg), ("TileLang", tl), ("peer", pr)):
            if rec and "error" in rec:
                notes.append(f"- {key}, {name}: {rec['error']}")
    return "\n".join(out + ([""] + notes if notes else []))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="")
    ap.add_argument("--corpus", default="")
    ap.add_argument("--only", default="")
    ap.add_argument("--per-case-s", type=float, default=120)
    ap.add_argument("--budget-s", type=float, default=330)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--no-tilelang", action="store_true")
    ap.add_argument("--table", default="", help="print the markdown table of a results file and exit")
    args = ap.parse_args()
    if args.table:
        print(markdown(json.loads(Path(args.table).read_text())))
        return
    cases = [c for c in CASES if not args.only or c.key in args.only.split(",")]
    corpus = Corpus(Path(args.corpus) if args.corpus else default_corpus())
    r = Runner(args)
    r.results.update({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      "corpus": str(corpus.root), "command": " ".join(sys.argv), "rows": {}})
    if args.dry_run:
        os.environ.setdefault("TEGULA_TARGET", "cuda:sm_90a")
    else:
        import torch

        r.results["device"] = torch.cuda.get_device_name()
        r.results["torch"] = torch.__version__
    r.results["tegula"] = use_tegula()
    r.framework("tegula", cases, corpus)
    corpus.forget()
    if not args.dry_run:
        r.peers(cases)
    if not args.no_tilelang and not args.dry_run:
        try:
            r.results["tilelang"] = use_tilelang()
            r.framework("tilelang", cases, corpus)
        except Exception as e:
            r.results["tilelang"] = f"unavailable: {short_error(e)}"
        corpus.forget()
        r.retime(cases, "tegula", "again_ms")
        r.peers(cases)  # those whose inputs only TileLang's phase made
    r.results["seconds"] = round(time.time() - r.t0, 1)
    r.save()
    print(markdown(r.results))


if __name__ == "__main__":
    main()
