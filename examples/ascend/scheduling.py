"""The scheduling exercises: change num_stages or buffer versions of the GEMM and flash-attention
examples and watch AutoSchedule's II, its lower bound, the buffer versions, feasibility and the
modelled time change; write the timeline of a pipelined GEMM with and without double buffering.
Every time is modelled (tegula's cost and timing model, its version printed), not measured.

    python examples/ascend/scheduling.py gemm --num-stages 1 2 3 4 5
    python examples/ascend/scheduling.py gemm --versions 2,1 1,2 3,3
    python examples/ascend/scheduling.py flash-attention --num-stages 1 2
    python examples/ascend/scheduling.py timeline --out /tmp/gemm-timeline
    (any of them with --solver list: the list scheduler instead of z3)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tegula  # noqa: E402
from tegula.errors import ResourceError  # noqa: E402
from tegula.backends.npu import cost  # noqa: E402
from tegula.backends.npu.emu import timing  # noqa: E402
from tegula.backends.npu.sched import schedules  # noqa: E402


def _config(solver):
    return {"tl.ascend_auto_sync": True, "tegula.npu_scheduler": solver}


def _row(label, func, solver, arch="a2a3"):
    try:
        k = tegula.compile(func, target=f"ascend-emu:{arch}", pass_configs=_config(solver))
    except ResourceError as e:
        print(f"{label:18s} INFEASIBLE  {str(e).splitlines()[0]}")
        return None
    loops = [s for s in schedules(k) if s.where.startswith("loop")]
    t = timing.model(k)
    for s in loops:
        sc = s.schedule
        v = " ".join(f"{b}={n}" for b, n in sorted(sc.versions.items()) if n > 1) or "one each"
        print(f"{label:18s} II {sc.ii:6d}  bound {sc.bound:6d} (ResMII {sc.res_mii}, RecMII "
              f"{sc.rec_mii})  stages {sc.stages}  versions {v}  [{sc.solver}]  "
              f"modelled {t.time_us:9.2f} us")
    return k


def gemm(args):
    import gemm as G

    n, (bm, bn, bk) = args.size, (128, 256, 64)
    print(f"GEMM {n}^3 fp16, {bm}x{bn}x{bk} tiles, a2a3 ({cost.MODEL_VERSION}, modelled)")
    if args.versions:
        for v in args.versions:
            a, b = (int(x) for x in v.split(","))
            _row(f"A_L1={a} B_L1={b}", G.gemm(n, n, n, bm, bn, bk, num_stages=max(a, b),
                                                versions=(a, b)), args.solver)
        return
    for s in args.num_stages:
        _row(f"num_stages={s}", G.gemm(n, n, n, bm, bn, bk, num_stages=s), args.solver)


def flash_attention(args):
    import flash_attention as F

    S, D = args.size, 128
    print(f"flash attention S={S} D={D}, 64 x 64 blocks, a2a3 ({cost.MODEL_VERSION}, modelled)")
    for s in args.num_stages:
        _row(f"num_stages={s}", F.flash_attention(S, D, 64, 64, num_stages=s), args.solver)


def timeline(args):
    import gemm as G

    os.makedirs(args.out, exist_ok=True)
    for s in (1, 2):
        k = _row(f"num_stages={s}", G.gemm(512, 512, 1024, 128, 256, 64, num_stages=s), args.solver)
        t = timing.model(k)
        path = os.path.join(args.out, f"gemm-{'double' if s == 2 else 'single'}-buffered.json")
        t.chrome_trace(path)
        print(t.summary())
        print(f"timeline: {path} (open in chrome://tracing or ui.perfetto.dev)\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("exercise", choices=["gemm", "flash-attention", "timeline"])
    ap.add_argument("--num-stages", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--versions", nargs="+", help="A_L1,B_L1 version pairs (gemm)")
    ap.add_argument("--size", type=int, default=None)
    ap.add_argument("--solver", choices=["auto", "z3", "list"], default="auto")
    ap.add_argument("--out", default="ascend-timeline")
    args = ap.parse_args()
    if args.size is None:
        args.size = 4096 if args.exercise == "gemm" else 4096
    {"gemm": gemm, "flash-attention": flash_attention, "timeline": timeline}[args.exercise](args)


if __name__ == "__main__":
    main()
