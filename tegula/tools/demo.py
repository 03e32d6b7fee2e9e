"""``python -m tegula demo``: build and run a GEMM, a row softmax and a flash-attention forward.

The kernels are :mod:`tegula.kernels`; each is checked against its float64 numpy reference on
fresh random inputs.
"""
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

import tegula
from tegula.kernels import (attention_kernel, attention_reference, gemm_kernel, gemm_reference, softmax_kernel,
                            softmax_reference)
from tegula.target import parse_target


# ---------------------------------------------------------------------------------------------
# the demo
# ---------------------------------------------------------------------------------------------

@dataclass
class Case:
    """One kernel of the demo: how to build it, make inputs, and the float64 answer."""

    name: str
    shape: str
    build: Callable[[], Any]
    inputs: Callable[[np.random.Generator], list]
    reference: Callable[..., np.ndarray]
    atol: float


@dataclass
class Result:
    name: str
    target: str
    shape: str
    max_error: Optional[float]
    ok: bool
    ms: Optional[float]
    error: str = ""


def _randn(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float16)


def cases() -> list[Case]:
    M, N, K = 256, 256, 256
    R, C = 300, 512
    B, H, S, D = 1, 2, 200, 64
    return [
        Case("gemm", f"{M}x{N}x{K} fp16", lambda: gemm_kernel(M, N, K),
             lambda r: [_randn(r, M, K), _randn(r, K, N)], gemm_reference,
             atol=0.1),  # |C| ~ 16 stored in fp16: half an ulp is 2**-7
        Case("softmax", f"{R}x{C} fp16", lambda: softmax_kernel(C),
             lambda r: [_randn(r, R, C)], softmax_reference, atol=2e-3),
        Case("flash_attention", f"{B}x{H}x{S}x{D} causal fp16", lambda: attention_kernel(B, H, S, D),
             lambda r: [_randn(r, B, H, S, D) for _ in range(3)], attention_reference, atol=5e-3),
    ]


def run_case(case: Case, target: str, rng: np.random.Generator) -> Result:
    """Compile, run once to warm up, time one run, compare with the reference."""
    tname = target
    try:
        tname = str(parse_target(target))
        kernel = tegula.compile(case.build(), out_idx=[-1], target=target)
        args = case.inputs(rng)
        kernel(*args)
        t0 = time.perf_counter()
        out = kernel(*args)
        ms = (time.perf_counter() - t0) * 1e3
        out = out.detach().cpu().float().numpy() if hasattr(out, "detach") else np.asarray(out)
        err = float(np.abs(out.astype(np.float64) - case.reference(*args)).max())
        ok = bool(np.isfinite(err) and err <= case.atol)
        return Result(case.name, tname, case.shape, err, ok, ms)
    except Exception as e:  # noqa: BLE001 - the demo reports every failure in its table
        return Result(case.name, tname, case.shape, None, False, None, f"{type(e).__name__}: {e}")


def format_table(results: list[Result]) -> str:
    head = ("kernel", "target", "shape", "max error", "status", "time (ms)")
    rows = [(r.name, r.target, r.shape, "-" if r.max_error is None else f"{r.max_error:.2e}",
             "ok" if r.ok else ("ERROR" if r.error else "FAIL"),
             "-" if r.ms is None else f"{r.ms:.1f}") for r in results]
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    out = [line(head), line(tuple("-" * w for w in widths))] + [line(r) for r in rows]
    out += [f"{r.name}: {r.error}" for r in results if r.error]
    return "\n".join(out)


def run(target: str = "auto", seed: Optional[int] = None) -> int:
    """Run the demo, print the table; returns the process exit code (0: every kernel passed)."""
    rng = np.random.default_rng(seed)
    results = [run_case(c, target, rng) for c in cases()]
    print(format_table(results))
    return 0 if all(r.ok for r in results) else 1
