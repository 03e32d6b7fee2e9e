"""The tile-op registry: every op has its rules, a missing one is one error naming op and target,
and an op registered from outside the package runs on cpu, cuda-emu and compiles for CUDA."""
from dataclasses import dataclass

import numpy as np
import pytest

import tegula
import tegula.backends.cuda.passes.lower_tile_ops  # noqa: F401 (registers the cuda rules)
import tegula.backends.interp  # noqa: F401 (registers the cpu rules)
import tegula.ir.printer  # noqa: F401 (registers the print rules)
from tegula.errors import MissingRuleError, UnsupportedError
from tegula.ir import stmt as S
from tegula.ir.buffer import BufferRegion
from tegula.ir.span import Span
from tegula.ir.tile_rules import TILE_RULES, TileRules, missing_rule, op_name, tile_rule
from tegula_files import names_a_tegula_file

OPS = [S.Copy, S.Gemm, S.Reduce, S.CumSum, S.Fill, S.Atomic, S.Print]


@pytest.mark.parametrize("cls", OPS, ids=lambda c: c.__name__)
def test_every_tile_op_has_its_rules(cls):
    have = {a for c, aspects in TILE_RULES.ops().items() if c is cls for a in aspects}
    want = {"print", "cpu", "cuda"} | ({"check"} if cls is not S.Print else set())
    assert want <= have, sorted(want - have)


def test_layout_rules_are_keyed_by_class():
    assert TILE_RULES.get(S.Gemm, "layout.strict") is not None
    assert TILE_RULES.get(S.Reduce, "layout") is not None
    assert TILE_RULES.get(S.Copy, "layout") is not None
    assert TILE_RULES.get(S.Fill, "layout") is None  # no constraint: nothing to register


def test_unknown_aspect_is_refused():
    with pytest.raises(ValueError, match="unknown tile-op aspect 'cdua'"):
        TileRules().register(S.Copy, "cdua")


@dataclass(frozen=True, eq=False)
class Negate(S.TileOp):
    """A test op: ``dst = -src`` over a tile."""

    src: BufferRegion
    dst: BufferRegion


def _kernel_with(op_factory):
    import tegula.language as T

    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _:
            s = T.alloc_shared((64,), "float32")
            T.copy(X, s)
            T.copy(s, Y)

    # put the op between the two copies: Y gets -X
    k = main.body
    copy_in, copy_out = k.body.stmts
    s_buf = copy_in.dst.buffer
    span = Span("/tmp/user_kernel.py", 7, 4)
    op = op_factory(s_buf.region(), s_buf.region(), span)
    body = S.Kernel(k.grid, k.threads, k.block_vars, k.allocs, S.seq(copy_in, op, copy_out),
                    dict(k.alloc_inits), dict(k.annotations), span=k.span)
    return main.with_body(body)


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_missing_rule_is_one_error_naming_op_target_and_line(target):
    func = _kernel_with(lambda src, dst, span: Negate(src, dst, span=span))
    x = np.random.default_rng().standard_normal(64).astype(np.float32)
    with pytest.raises(MissingRuleError) as e:
        tegula.compile(func, out_idx=[1], target=target)(x)
    want_target = "cpu" if target == "cpu" else "cuda"
    msg = str(e.value)
    assert f"unimplemented op T.negate for target {want_target}" in msg
    assert "user_kernel.py:7" in msg and not names_a_tegula_file(msg)
    assert isinstance(e.value, UnsupportedError)


def test_missing_rule_message_and_names():
    err = missing_rule(S.Reduce, "npu", "npu")
    assert str(err).startswith("unimplemented op T.reduce for target npu")
    assert "no npu rule is registered for Reduce" in str(err)
    assert op_name(S.Fill) == "T.fill" and op_name(Negate) == "T.negate"


def test_an_op_registered_outside_the_package_runs_everywhere(rng):
    """The whole of a new tile op: its node, printer, interpreter rule and CUDA lowering."""

    @dataclass(frozen=True, eq=False)
    class Flip(S.TileOp):
        src: BufferRegion
        dst: BufferRegion

    @tile_rule(Flip, "print")
    def _print(p, s):
        return f"T.flip_sign({p.e(s.src)}, {p.e(s.dst)})"

    @tile_rule(Flip, "cpu")
    def _cpu(s, ctx):
        from tegula.backends.interp.tileops import Region

        src, dst = Region(s.src, ctx, s), Region(s.dst, ctx, s)

        def run(env):
            dst.write(env, -src.read(env))
        return run

    @tile_rule(Flip, "cuda")
    def _cuda(ctx, s):
        from tegula.backends.cuda.passes.lower_tile_ops.context import strided

        buf = s.src.buffer
        return strided(ctx, s.src, lambda idx: ctx.store(buf, idx, -ctx.load(buf, idx)))

    func = _kernel_with(lambda src, dst, span: Flip(src, dst, span=span))
    assert "T.flip_sign(s, s)" in func.script()
    x = rng.standard_normal(64).astype(np.float32)
    for target in ("cpu", "cuda-emu"):
        np.testing.assert_array_equal(tegula.compile(func, out_idx=[1], target=target)(x), -x)
    from tegula.backends.cuda.compiler import available_backends

    if available_backends():
        for arch in ("sm_80", "sm_90a"):
            k = tegula.compile(func, out_idx=[1], target=f"cuda:{arch}")
            assert k.artifact.cubin
