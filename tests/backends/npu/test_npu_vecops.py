"""The T.tile library, one vector-op table row at a time (tegula/ir/vecops.py).

Every case runs one ``T.tile`` op in a small kernel (each vector core its own rows of the GM
tensors) on fresh random inputs, on the interpreter and the emulator of both machines, against a
float64 numpy reference; the PTO and Ascend C sources print the row's spelling of the case's
operand form, or the emitter names the op it cannot print.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import KernelTypeError, ShapeError, UnsupportedError
from tegula.ir import vecops

AUTO = {"tl.ascend_auto_sync": True}
TARGETS = ["cpu", "ascend-emu:a2a3", "ascend-emu:a5"]
R, C = 8, 32     # each vector core's tile


def _kernel(op, ins, out, call):
    """A kernel of GM inputs ``ins`` [(per-core shape, dtype)] and output ``out``: each vector
    core loads its rows into UB tiles, runs ``call(T.tile.<op>, dst, *tiles)`` and stores dst."""
    f = getattr(T.tile, op)

    def gm(shape):
        return (2 * shape[0],) + tuple(shape[1:])

    def at(buf, shape, vid):
        r = shape[0]
        return buf[vid * r:vid * r + r, 0:shape[1]] if len(shape) == 2 else buf[vid * r:vid * r + r]

    (s0, t0), (so, to) = (ins + [((1,), "float32")])[0], out
    if len(ins) <= 1:
        @T.prim_func
        def main(X0: T.Tensor(gm(s0), t0), Y: T.Tensor(gm(so), to)):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub(s0, t0)
                y = T.alloc_ub(so, to)
                with T.Scope("V"):
                    T.copy(at(X0, s0, vid), a)
                    T.copy(at(Y, so, vid), y)
                    call(f, y, a)
                    T.copy(y, at(Y, so, vid))
        return main
    (s1, t1) = ins[1]
    if len(ins) == 2:
        @T.prim_func
        def main2(X0: T.Tensor(gm(s0), t0), X1: T.Tensor(gm(s1), t1), Y: T.Tensor(gm(so), to)):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub(s0, t0)
                b = T.alloc_ub(s1, t1)
                y = T.alloc_ub(so, to)
                with T.Scope("V"):
                    T.copy(at(X0, s0, vid), a)
                    T.copy(at(X1, s1, vid), b)
                    T.copy(at(Y, so, vid), y)
                    call(f, y, a, b)
                    T.copy(y, at(Y, so, vid))
        return main2
    (s2, t2) = ins[2]

    @T.prim_func
    def main3(X0: T.Tensor(gm(s0), t0), X1: T.Tensor(gm(s1), t1), X2: T.Tensor(gm(s2), t2),
              Y: T.Tensor(gm(so), to)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub(s0, t0)
            b = T.alloc_ub(s1, t1)
            c = T.alloc_ub(s2, t2)
            y = T.alloc_ub(so, to)
            with T.Scope("V"):
                T.copy(at(X0, s0, vid), a)
                T.copy(at(X1, s1, vid), b)
                T.copy(at(X2, s2, vid), c)
                T.copy(at(Y, so, vid), y)
                call(f, y, a, b, c)
                T.copy(y, at(Y, so, vid))
    return main3


def _rand(rng, shape, dtype, kind="normal"):
    shape = (2 * shape[0],) + tuple(shape[1:])
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 100, shape).astype(dtype)
    x = rng.standard_normal(shape)
    if kind == "halves":
        x = rng.integers(-20, 21, shape) / 2 + rng.choice([0, 0.1, -0.1], shape) * (rng.random(shape) < 0.3)
    if kind == "pos":
        x = np.abs(x) + 0.5
    return x.astype(dtype)


def _rows(x):
    """The GM tensor as its two vector cores' parts."""
    return np.split(x, 2, axis=0)


def _per_core(fn, *xs):
    return np.concatenate([fn(*parts) for parts in zip(*[_rows(x) for x in xs])], axis=0)


def _bits(mask, n):
    return np.unpackbits(mask.view(np.uint8), bitorder="little")[:n].astype(bool)


F = "float32"
T2 = ((R, C), F)
MASK = ((R * C // 8,), "uint8")


def _unary(op, ref, kind="normal", dtype=F):
    return (op, "t", [((R, C), dtype, kind)], ((R, C), dtype), lambda f, y, a: f(y, a),
            lambda x0, y: ref(x0.astype(np.float64 if x0.dtype.kind == "f" else np.int64)))


def _bin_tt(op, ref, dtype=F, kind="normal"):
    return (op, "tt", [((R, C), dtype, kind), ((R, C), dtype, kind)], ((R, C), dtype),
            lambda f, y, a, b: f(y, a, b), lambda x0, x1, y: ref(x0.astype(np.float64), x1.astype(np.float64)))


def _bin_ts(op, ref, v=1.5, dtype=F):
    return (op, "ts", [((R, C), dtype, "normal")], ((R, C), dtype), lambda f, y, a: f(y, a, v),
            lambda x0, y: ref(x0.astype(np.float64), v))


def _bin_tr(op, ref):
    return (op, "tr", [((R, C), F, "pos"), ((R,), F, "pos")], ((R, C), F),
            lambda f, y, a, b: f(y, a, b), lambda x0, x1, y: _per_core(lambda a, b: ref(a, b[:, None]),
                                                                        x0.astype(np.float64), x1.astype(np.float64)))


def _cmp_ref(mode, scalar=None):
    fn = {"EQ": np.equal, "NE": np.not_equal, "GT": np.greater, "GE": np.greater_equal,
          "LT": np.less, "LE": np.less_equal}[mode]

    def ref(*xs):
        y = xs[-1]

        def core(a, *rest):
            b = rest[0] if scalar is None else scalar
            return np.packbits(fn(a.astype(np.float64), b).reshape(-1), bitorder="little")
        return _per_core(core, *xs[:-1]) if y is not None else None
    return ref


def _select_ref(x0, x1, x2, y):
    def core(m, a, b):
        return np.where(_bits(m, a.size).reshape(a.shape), a, b)
    return _per_core(core, x0, x1.astype(np.float64), x2.astype(np.float64))


def _gather_case():
    # offsets in bytes into the core's source tile (a rotation of each row's pairs, as RoPE does)
    idx = np.arange(R * C).reshape(R, C) ^ 1
    offs = np.concatenate([idx, idx]).astype(np.uint32) * 4

    def ref(x0, x1, y):
        return _per_core(lambda a, o: a.reshape(-1)[(o.reshape(-1) // 4)].reshape(a.shape), x0.astype(np.float64), x1)
    return ("gather", "tt", [((R, C), F, "normal"), ((R, C), "uint32", offs)], ((R, C), F),
            lambda f, y, a, b: f(y, a, b, 0), ref)


CASES = [
    *[_unary(op, ref, kind) for op, ref, kind in (
        ("exp", np.exp, "normal"), ("ln", np.log, "pos"), ("abs", np.abs, "normal"),
        ("reciprocal", lambda x: 1 / x, "pos"), ("sqrt", np.sqrt, "pos"), ("rsqrt", lambda x: 1 / np.sqrt(x), "pos"),
        ("relu", lambda x: np.maximum(x, 0), "normal"), ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), "normal"),
        ("silu", lambda x: x / (1 + np.exp(-x)), "normal"), ("sin", np.sin, "normal"), ("cos", np.cos, "normal"),
        ("round", np.rint, "normal"), ("copy", lambda x: x, "normal"))],
    _unary("exp", np.exp, dtype="float16"),
    _unary("bitwise_not", np.invert, dtype="int16"),
    *[_bin_tt(op, ref) for op, ref in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                       ("max", np.maximum), ("min", np.minimum))],
    _bin_tt("div", np.divide, kind="pos"),
    _bin_tt("pow", np.power, kind="pos"),
    _bin_tt("mul", np.multiply, dtype="float16"),
    *[_bin_tt(op, lambda a, b, op=op: getattr(np, op)(a.astype(np.int64), b.astype(np.int64)), dtype="int16")
      for op in ("bitwise_and", "bitwise_or", "bitwise_xor")],
    *[_bin_ts(op, ref) for op, ref in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                       ("div", np.divide), ("max", np.maximum), ("min", np.minimum),
                                       ("leaky_relu", lambda x, a: np.where(x >= 0, x, x * a)),
                                       ("clamp_max", np.minimum), ("clamp_min", np.maximum))],
    ("bitwise_lshift", "ts", [((R, C), "int16", "normal")], ((R, C), "int16"), lambda f, y, a: f(y, a, 2),
     lambda x0, y: x0.astype(np.int64) << 2),
    ("bitwise_rshift", "ts", [((R, C), "int16", "normal")], ((R, C), "int16"), lambda f, y, a: f(y, a, 2),
     lambda x0, y: x0.astype(np.int64) >> 2),
    *[_bin_tr(op, ref) for op, ref in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                       ("div", np.divide), ("max", np.maximum), ("row_expand_mul", np.multiply))],
    ("axpy", "ts", [T2 + ("normal",)], T2, lambda f, y, a: f(y, a, 0.5),
     lambda x0, y: y.astype(np.float64) + 0.5 * x0),
    ("mul_add_dst", "tt", [T2 + ("normal",), T2 + ("normal",)], T2, lambda f, y, a, b: f(y, a, b),
     lambda x0, x1, y: y.astype(np.float64) + x0.astype(np.float64) * x1),
    ("clamp", "tss", [T2 + ("normal",)], T2, lambda f, y, a: f(y, a, -0.5, 0.5, R * C),
     lambda x0, y: np.clip(x0.astype(np.float64), -0.5, 0.5)),
    ("cast", "t", [T2 + ("normal",)], ((R, C), "float16"), lambda f, y, a: f(y, a, "CAST_RINT", R * C),
     lambda x0, y: x0.astype(np.float64)),
    # to an integer, by rounding mode, on halves (ties) and other values
    *[("cast", "t", [((R, C), F, "halves")], ((R, C), "int32"), lambda f, y, a, m=m: f(y, a, m),
       lambda x0, y, fn=fn: fn(x0.astype(np.float64)))
      for m, fn in (("CAST_RINT", np.rint), ("CAST_FLOOR", np.floor), ("CAST_CEIL", np.ceil),
                    ("CAST_TRUNC", np.trunc), ("CAST_ROUND", lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)))],
    ("fill", "s", [T2 + ("normal",)], T2, lambda f, y, a: f(y, 2.5), lambda x0, y: np.full(x0.shape, 2.5)),
    # a one-element tile as the value (upstream's T.tile.fill(col, total)): its element
    ("fill", "s", [((1,), F, "normal")], T2, lambda f, y, a: f(y, a),
     lambda x0, y: _per_core(lambda a: np.full((R, C), a[0]), x0.astype(np.float64))),
    *[("compare", "tt", [T2 + ("normal",), T2 + ("normal",)], MASK,
       lambda f, y, a, b, mode=mode: f(y, a, b, mode), _cmp_ref(mode)) for mode in ("EQ", "NE", "GT", "GE", "LT", "LE")],
    ("compare", "ts", [T2 + ("normal",)], MASK, lambda f, y, a: f(y, a, T.float32(0.25), "LE"), _cmp_ref("LE", 0.25)),
    # a Python float compares as the source's dtype, not the mask's
    ("compare", "ts", [T2 + ("normal",)], MASK, lambda f, y, a: f(y, a, 0.25, "GT"), _cmp_ref("GT", 0.25)),
    ("select", "ttt", [MASK + ("normal",), T2 + ("normal",), T2 + ("normal",)], T2,
     lambda f, y, m, a, b: f(y, m, a, b, "VSEL_CMPMASK_SPR"), _select_ref),
    ("select", "tts", [MASK + ("normal",), T2 + ("normal",)], T2,
     lambda f, y, m, a: f(y, m, a, -1.5, "VSEL_TENSOR_SCALAR_MODE"),
     lambda x0, x1, y: _per_core(lambda m, a: np.where(_bits(m, a.size).reshape(a.shape), a, -1.5), x0, x1.astype(np.float64))),
    ("broadcast", "t", [((1, C), F, "normal")], T2, lambda f, y, a: f(y, a),
     lambda x0, y: _per_core(lambda a: np.broadcast_to(a, (R, C)), x0.astype(np.float64))),
    ("broadcast", "r", [((R,), F, "normal")], T2, lambda f, y, a: f(y, a),
     lambda x0, y: _per_core(lambda a: np.broadcast_to(a[:, None], (R, C)), x0.astype(np.float64))),
    ("broadcast", "r", [((R, 1), F, "normal")], T2, lambda f, y, a: f(y, a, 1),
     lambda x0, y: _per_core(lambda a: np.broadcast_to(a, (R, C)), x0.astype(np.float64))),
    _gather_case(),
    ("createvecindex", "s", [T2 + ("normal",)], ((R, C), "int32"), lambda f, y, a: f(y, 3),
     lambda x0, y: np.concatenate([np.arange(R * C).reshape(R, C) + 3] * 2)),
    ("arith_progression", "ss", [T2 + ("normal",)], ((R * C,), F), lambda f, y, a: f(y, 1.0, 0.5, R * C),
     lambda x0, y: np.concatenate([1.0 + 0.5 * np.arange(R * C)] * 2)),
    ("transpose", "t", [((16, 16), F, "normal")], ((16, 16), F), lambda f, y, a: f(y, a),
     lambda x0, y: _per_core(lambda a: a.T, x0.astype(np.float64))),
]


def _desc_pairs(vals, idx):
    order = sorted(range(len(vals)), key=lambda i: (-vals[i], idx[i]))
    out = np.empty(2 * len(vals))
    out[0::2], out[1::2] = [vals[i] for i in order], [idx[i] for i in order]
    return out


def _sort_ref(n, k=None):
    def core(a):
        v = np.full(-(-n // 32) * 32, -np.inf)
        v[:n] = a[:n]
        return _desc_pairs(list(v), list(range(v.size)))[:2 * (k or v.size)]
    return core


def _sorted_block(rng, n):
    v = np.sort(rng.standard_normal(n))[::-1]
    idx = rng.permutation(n)
    return _desc_pairs(list(v), list(idx))


def _merge_ref(x0, x1, y):
    def core(a, b):
        p = np.concatenate([a.reshape(-1, 2), b.reshape(-1, 2)])
        order = sorted(range(len(p)), key=lambda i: (-p[i, 0], i))
        return p[order].reshape(-1)
    return _per_core(core, x0.astype(np.float64), x1.astype(np.float64))


HALF = R * C // 2


def _counted(fn):
    """Only the first HALF elements change."""
    def ref(*xs):
        *ins, y = xs
        out = y.astype(np.float64).copy()
        new = fn(*[x.astype(np.float64) for x in ins])
        for c in range(2):
            o, n = out[c * R:(c + 1) * R].reshape(-1), new[c * R:(c + 1) * R].reshape(-1)
            o[:HALF] = n[:HALF]
        return out
    return ref


CASES += [
    ("sort", "ts", [((64,), F, "normal")], ((128,), F), lambda f, y, a: f(y, a, 50),
     lambda x0, y: _per_core(_sort_ref(50), x0.astype(np.float64))),
    ("topk", "tss", [((64,), F, "normal")], ((16,), F), lambda f, y, a: f(y, a, 8, 64),
     lambda x0, y: _per_core(_sort_ref(64, 8), x0.astype(np.float64))),
    ("merge_sort", "tt", [((16,), F, "sorted"), ((16,), F, "sorted")], ((32,), F),
     lambda f, y, a, b: f(y, a, b), _merge_ref),
    ("gather_mask", "t", [((64,), F, "normal")], ((32,), F), lambda f, y, a: f(y, a, "P1010"),
     lambda x0, y: _per_core(lambda a: a[1::2], x0.astype(np.float64))),
    ("gather_mask", "t", [((64,), F, "normal")], ((16,), F), lambda f, y, a: f(y, a, "P0100"),
     lambda x0, y: _per_core(lambda a: a[2::4], x0.astype(np.float64))),
    ("sub_experiment", "tt", [T2 + ("normal",), T2 + ("normal",)], T2, lambda f, y, a, b: f(y, a, b, HALF),
     _counted(np.subtract)),
    ("abs_experiment", "t", [T2 + ("normal",)], T2, lambda f, y, a: f(y, a, HALF), _counted(np.abs)),
    ("mins_experiment", "ts", [T2 + ("normal",)], T2, lambda f, y, a: f(y, a, 0.25, HALF),
     _counted(lambda a: np.minimum(a, 0.25))),
    ("reduce_sum_experiment", "t", [((R * C,), F, "normal")], ((8,), F), lambda f, y, a: f(y, a, 100),
     lambda x0, y: _per_core(lambda a, b: np.concatenate([[a[:100].sum()], b[1:]]), x0.astype(np.float64),
                             y.astype(np.float64))),
    # blocks of 8 floats gathered in reverse order (byte offsets), two repeats
    ("gatherb", "tt", [((128,), F, "normal"), ((16,), "uint32", np.concatenate([np.arange(15, -1, -1) * 32] * 2).astype(np.uint32))],
     ((128,), F), lambda f, y, a, o: f(y, a, o, 2, 1, 8),
     lambda x0, x1, y: _per_core(lambda a: a.reshape(16, 8)[::-1].reshape(-1), x0.astype(np.float64))),
    ("brcb_experiment", "r", [((16,), F, "normal")], ((16, 8), F), lambda f, y, a: f(y, a, 2, 1, 8),
     lambda x0, y: _per_core(lambda a: np.repeat(a[:, None], 8, axis=1), x0.astype(np.float64))),
    *[(f"row_expand_{op}_experiment", "tr", [((R, C), F, "pos"), (shape, F, "pos")], T2,
       lambda f, y, a, b: f(y, a, b),
       lambda x0, x1, y, fn=fn: _per_core(lambda a, b: fn(a, b.reshape(-1)[:, None]), x0.astype(np.float64),
                                          x1.astype(np.float64)))
      for op, fn, shape in (("mul", np.multiply, (R,)), ("sub", np.subtract, (1, R)),
                            ("div", np.divide, (R, 1)))],
]


def _id(case):
    op, form, ins = case[0], case[1], case[2]
    return f"{op}-{form}-{ins[0][1]}" + (f"-{case[4].__defaults__[0]}" if case[4].__defaults__ else "")


def _inputs(case, rng):
    xs = []
    for shape, dtype, kind in case[2]:
        if isinstance(kind, np.ndarray):
            xs.append(kind)
        elif kind == "sorted":   # each core's part a block of (value, index) pairs, descending
            xs.append(np.concatenate([_sorted_block(rng, shape[0] // 2) for _ in range(2)]).astype(dtype))
        else:
            xs.append(_rand(rng, shape, dtype, kind))
    if case[0] == "select":  # a mask of random bits
        xs[0] = rng.integers(0, 256, xs[0].shape).astype(np.uint8)
    oshape, odtype = case[3]
    y = _rand(rng, oshape, odtype) if odtype != "uint8" else np.zeros((2 * oshape[0],), np.uint8)
    return xs, y


def _tol(dtype):
    return dict(rtol=2e-3, atol=2e-3) if np.dtype(dtype).itemsize < 4 else dict(rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_vector_op_against_float64(case, target):
    op, form, ins, out, call, ref = case
    rng = np.random.default_rng()
    xs, y0 = _inputs(case, rng)
    k = tegula.compile(_kernel(op, [i[:2] for i in ins], out, call), target=target, pass_configs=AUTO)
    y = y0.copy()
    k(*xs, y)
    want = ref(*xs, y0)
    if out[1] == "uint8":
        np.testing.assert_array_equal(y, want)
    elif np.dtype(out[1]).kind in "iu":
        np.testing.assert_array_equal(y.astype(np.int64), np.asarray(want).astype(out[1]).astype(np.int64))
    else:
        np.testing.assert_allclose(y.astype(np.float64), want, **_tol(out[1]))


@pytest.mark.parametrize("lang", ["ascend-pto:a2a3", "ascendc:a2a3"])
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_vector_op_spelling(case, lang):
    """The source holds the first instruction of the row's spelling for the case's form; a form
    the language does not spell is an UnsupportedError naming the op."""
    op, form, ins, out, call, _ = case
    row = vecops.row(op)
    spell = (row.pto if lang.startswith("ascend-pto") else row.ascendc).get(form)
    k = _kernel(op, [i[:2] for i in ins], out, call)
    if spell is None and not (lang.startswith("ascendc") and form == "tr" and "ts" in row.ascendc):
        with pytest.raises(UnsupportedError, match=f"T.tile.{op}"):
            tegula.compile(k, target=lang, pass_configs=AUTO).get_kernel_source()
        return
    src = tegula.compile(k, target=lang, pass_configs=AUTO).get_kernel_source()
    name = re.search(r"\b([A-Z]\w*)[<(]", spell or row.ascendc["ts"]).group(1)   # the instruction
    assert re.search(rf"\b{name}[<(]", src), (name, src)


# -- what the emulator runs is what the emitters print ---------------------------------------------

@T.prim_func
def mixed_vec(A: T.Tensor((16, 64), "float32"), M: T.Tensor((16,), "float32"), B: T.Tensor((16, 64), "float32")):
    with T.Kernel(1, is_npu=True) as (cid, vid):
        a = T.alloc_ub((8, 64), "float32")
        m = T.alloc_ub((8,), "float32")
        b = T.alloc_ub((8, 64), "float32")
        with T.Scope("V"):
            T.copy(A[vid * 8, 0], a)
            T.copy(M[vid * 8], m)
            for i, j in T.Parallel(8, 64):
                b[i, j] = T.exp(a[i, j])
            for i, j in T.Parallel(8, 64):
                b[i, j] = b[i, j] - m[i]
            T.tile.mul(b, b, 0.5)
            for i, j in T.Parallel(8, 64):
                b[i, j] = T.max(b[i, j], a[i, j])
            T.tile.broadcast(a, m)
            T.tile.add(b, b, a)
            T.copy(b, B[vid * 8, 0])


def test_parallel_loops_run_as_the_vector_ops_the_emitters_print():
    import tegula.backends.npu.emu.trace as trace
    from tegula.backends.npu.pipeline import lower
    from tegula.target import Target

    low = lower(mixed_vec, Target("ascend-emu", "a2a3"), AUTO)
    issued = []
    real = trace.Issuer.tile_op

    def spy(self, s):
        issued.append(s)
        return real(self, s)
    trace.Issuer.tile_op = spy
    try:
        rng = np.random.default_rng()
        a = rng.standard_normal((16, 64)).astype(np.float32)
        m = rng.standard_normal(16).astype(np.float32)
        b = tegula.compile(mixed_vec, target="ascend-emu:a2a3", pass_configs=AUTO, out_idx=[-1])(a, m)
    finally:
        trace.Issuer.tile_op = real
    want = np.maximum((np.exp(a.astype(np.float64)) - m[:, None]) * 0.5, a) + m[:, None]
    np.testing.assert_allclose(b, want, rtol=1e-5, atol=1e-5)
    from tegula.ir.npu import VecOp
    ran = [s.op for s in issued if isinstance(s, VecOp)][:6]   # AIV0's stream of block 0
    assert ran == ["exp", "sub", "mul", "max", "broadcast", "add"]
    assert not any("For" == type(s).__name__ for s in issued)
    assert "T.Parallel" not in low.script()
    # the PTO source prints the same vector instructions in the same order
    src = tegula.compile(mixed_vec, target="ascend-pto:a2a3", pass_configs=AUTO).get_kernel_source()
    vec = src.split("__DAV_VEC__")[1]
    printed = re.findall(r"\b(TEXP|TROWEXPANDSUB|TMULS|TMAX|TROWEXPAND|TADD)\(", vec)
    assert printed == ["TEXP", "TROWEXPANDSUB", "TMULS", "TMAX", "TROWEXPAND", "TADD"]
    spelled = [vecops.row(op).pto[vecops.form(s.srcs, tuple(s.dst.tile_shape()))].split("(")[0]
               for op, s in zip(ran, [s for s in issued if isinstance(s, VecOp)][:6])]
    assert spelled == printed


# -- errors -------------------------------------------------------------------------------------

def test_unknown_tile_op_lists_the_table():
    with pytest.raises(KernelTypeError, match="T.tile has no operation 'frobnicate'") as e:
        T.tile.frobnicate
    assert "broadcast" in str(e.value) and "select" in str(e.value)


def test_bad_compare_mode_and_broadcast_shape_are_located_errors():
    def kernel(body):
        @T.prim_func
        def main(A: T.Tensor((8, 32), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((8, 32), "float32")
                m = T.alloc_ub((32,), "uint8")
                s = T.alloc_ub((5,), "float32")
                with T.Scope("V"):
                    body(a, m, s)
        return main
    with pytest.raises(ShapeError, match=r"T.tile.compare: unknown compare mode 'EQUAL'") as e:
        kernel(lambda a, m, s: T.tile.compare(m, a, a, "EQUAL"))
    assert e.value.span is not None and "test_npu_vecops.py" in e.value.span.file
    with pytest.raises(ShapeError, match=r"T.tile.broadcast: cannot broadcast \(5,\) to \(8, 32\)"):
        kernel(lambda a, m, s: T.tile.broadcast(a, s))
    with pytest.raises(ShapeError, match="VSEL_TENSOR_TENSOR_MODE takes a tile second operand"):
        kernel(lambda a, m, s: T.tile.select(a, m, a, 1.0, "VSEL_TENSOR_TENSOR_MODE"))
    with pytest.raises(KernelTypeError, match="T.tile.add: missing a required argument: 'src1'") as e:
        kernel(lambda a, m, s: T.tile.add(a, a))
    assert "the signature is T.tile.add(dst, src0, src1)" in str(e.value)


@T.prim_func
def scale_rows(A: T.Tensor((16, 32), "float32"), S: T.Tensor((16,), "float32"), B: T.Tensor((16, 32), "float32")):
    with T.Kernel(1, is_npu=True) as (cid, vid):
        a = T.alloc_ub((8, 32), "float32")
        s = T.alloc_ub((8,), "float32")
        b = T.alloc_ub((8, 32), "float32")
        with T.Scope("V"):
            T.copy(A[vid * 8:vid * 8 + 8, 0:32], a)
            T.copy(S[vid * 8:vid * 8 + 8], s)
            T.tile.exp(s, s)
            for i in T.serial(8):
                T.tile.mul(b[i, :], a[i, :], s[i] + 1.0)
            T.copy(b, B[vid * 8:vid * 8 + 8, 0:32])


@pytest.mark.parametrize("target", TARGETS)
def test_a_scalar_operand_read_from_a_ub_tile(target):
    """``T.tile.mul(b[i, :], a[i, :], s[i] + 1.0)``: the scalar is read from UB when the
    instruction runs (after the exp that wrote it), and counts as a read of s for the sync."""
    rng = np.random.default_rng()
    a = rng.standard_normal((16, 32)).astype(np.float32)
    s = rng.standard_normal(16).astype(np.float32)
    b = tegula.compile(scale_rows, target=target, pass_configs=AUTO, out_idx=[-1])(a, s)
    want = a.astype(np.float64) * (np.exp(s.astype(np.float64)) + 1.0)[:, None]
    np.testing.assert_allclose(b, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lang, load, flag", [
    ("ascend-pto:a2a3", "s.GetValue(i)", "set_flag(PIPE_V, PIPE_S, EVENT_ID0)"),
    ("ascendc:a2a3", "s.GetValue(i)", "SetFlag<HardEvent::V_S>(0)")])
def test_a_scalar_operand_read_from_a_ub_tile_is_printed(lang, load, flag):
    src = tegula.compile(scale_rows, target=lang, pass_configs=AUTO).get_kernel_source()
    assert f"({load} + 1.0)" in src and flag in src


def test_a_read_declared_in_the_table_is_seen_by_every_sync_pass(monkeypatch):
    """Whether an op reads its destination is its row's ``reads_dst``: effects(), InsertSync's
    accesses, the scheduler's tasks and the emulator's instruction all follow one change of it."""
    import dataclasses

    from tegula.backends.npu.emu import trace
    from tegula.backends.npu.machine import A2A3
    from tegula.backends.npu.access import region_accesses
    from tegula.backends.npu.sched.tasks import make_tasks
    from tegula.ir.buffer import Buffer
    from tegula.ir.effects import effects
    from tegula.ir.npu import VecOp

    d = Buffer("d", (8, 32), "float32", "ub")
    a = Buffer("a", (8, 32), "float32", "ub")

    def seen(op):
        node = VecOp(op, d.region(), (a.region(), a.region()))
        reads = [r.buffer if hasattr(r, "buffer") else r for r in effects(node).reads]
        sync = [r.buffer for r, w in region_accesses(node) if not w]
        task = make_tasks([node], "V", A2A3, {})[0].reads
        # the emulator's rule: the bytes each operand touches go to reads / writes
        emu_reads, emu_writes = [], []

        def operand(r, write):
            (emu_writes if write else emu_reads).append(r.buffer)
            return (lambda: None), (lambda x: None)
        trace.TILE_RULES.get(VecOp, trace.EMU)(None, node, operand, emu_reads, emu_writes)
        return [d in reads, d in sync, d in task, d in emu_reads]

    assert seen("mul_add_dst") == [True] * 4
    assert seen("add") == [False] * 4
    monkeypatch.setitem(vecops.VEC_OPS, "add", dataclasses.replace(vecops.VEC_OPS["add"], reads_dst=True))
    assert seen("add") == [True] * 4


@T.prim_func
def parallel_casts(A: T.Tensor((16, 32), "float32"), B: T.Tensor((16, 32), "int32")):
    with T.Kernel(1, is_npu=True) as (cid, vid):
        a = T.alloc_ub((8, 32), "float32")
        b = T.alloc_ub((8, 32), "int32")
        with T.Scope("V"):
            T.copy(A[vid * 8:vid * 8 + 8, 0:32], a)
            for i, j in T.Parallel(8, 32):
                b[i, j] = T.Cast("int32", a[i, j])
            T.copy(b, B[vid * 8:vid * 8 + 8, 0:32])


@pytest.mark.parametrize("target", TARGETS)
def test_a_parallel_cast_stays_a_truncation_as_a_vector_op(target):
    """ParallelToVec turns ``T.Cast("int32", a[i, j])`` into a cast that truncates (CAST_TRUNC),
    as T.Cast means on every target."""
    rng = np.random.default_rng()
    a = (4 * rng.standard_normal((16, 32))).astype(np.float32)
    b = tegula.compile(parallel_casts, target=target, pass_configs=AUTO, out_idx=[-1])(a)
    np.testing.assert_array_equal(b, np.trunc(a.astype(np.float64)).astype(np.int32))
    if target == "ascend-emu:a2a3":
        src = tegula.compile(parallel_casts, target="ascend-pto:a2a3", pass_configs=AUTO).get_kernel_source()
        assert "TCVT(b, a, RoundMode::CAST_TRUNC);" in src
