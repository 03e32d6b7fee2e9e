"""tegula.transform: Pass, Pipeline, pipeline_for, pipeline= in compile/jit, the cache key,
and the instruments around every pass."""
import dataclasses
import importlib.util
import os
import sys

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula import config
from tegula.errors import ConfigError, KernelTypeError, VerifyError
from tegula.ir import expr as E
from tegula.ir.stmt import Break, PrimFunc, seq
from tegula.ir.visitor import Mutator
from tegula.tools import trace
from tegula.transform import Dump, Pass, Pipeline, Record, Timing, Verify, pipeline_for

CUDA_NAMES = ["Simplify", "SpecializeMasks", "PipelineCopies", "InferLayouts", "LowerTileOps", "InsertBarriers",
              "SimplifyLowered", "VectorizeLoops", "PlanSharedMemory", "CheckResources"]


def scale(n: int = 256):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] * 2.0

    return main


class _Scale(Mutator):
    """Replaces every float constant 2.0 by ``to``."""

    def __init__(self, to: float):
        super().__init__()
        self.to = to

    def visit_Const(self, c):
        if c.dtype.is_float and c.value == 2.0:
            return E.const(self.to, c.dtype)
        return c


def times_three(func: PrimFunc) -> PrimFunc:
    """Turns `* 2.0` into `* 3.0`."""
    return _Scale(3.0).visit(func)


def identity(func):
    return func


# -- Pass and Pipeline ---------------------------------------------------------------------------

def test_pipeline_edits_return_new_pipelines():
    base = pipeline_for("cuda:sm_80")
    assert base.names() == CUDA_NAMES
    p = Pass("Mine", identity)
    after = base.insert_after("PipelineCopies", p)
    before = base.insert_before("PipelineCopies", p)
    assert after.names()[3] == "Mine" and before.names()[2] == "Mine"
    assert base.replace("Simplify", p).names()[0] == "Mine"
    assert "InsertBarriers" not in base.remove("InsertBarriers")
    assert base.insert_after("input", p).names()[0] == "Mine"
    assert base.names() == CUDA_NAMES  # immutable
    assert after["Mine"] is p and len(after) == len(base) + 1


def test_unknown_and_duplicate_pass_names_are_errors():
    base = pipeline_for("cuda:sm_80")
    with pytest.raises(ConfigError, match="no pass named 'LowerTileOp'") as e:
        base.insert_after("LowerTileOp", Pass("Mine", identity))
    assert "did you mean 'LowerTileOps'" in e.value.hint and "CheckResources" in e.value.hint
    with pytest.raises(ConfigError, match="two passes named 'Simplify'"):
        base.insert_after("LowerTileOps", Pass("Simplify", identity))
    with pytest.raises(ConfigError, match="fn must be a function"):
        Pass("Bad", 3)
    with pytest.raises(ConfigError, match="Pass objects"):
        Pipeline([identity])


def test_pipeline_repr_lists_passes_with_reasons():
    base = pipeline_for("cuda:sm_90a")
    text = repr(base.insert_after("LowerTileOps", Pass("Triple", times_three)))
    lines = text.splitlines()
    n, at = len(base.names()) + 1, base.names().index("LowerTileOps") + 2  # 1-based, after it
    assert lines[0] == f"Pipeline for cuda:sm_90a ({n} passes):"
    assert "barriers wherever threads hand shared memory" in text
    assert lines[at].split()[:2] == [f"{at}.", "Triple"] and "Turns `* 2.0` into `* 3.0`. [user]" in lines[at]
    assert "no passes" in repr(pipeline_for("cpu"))


def test_pipeline_for_targets():
    assert pipeline_for("cuda-emu") == pipeline_for("cuda:sm_80")
    assert pipeline_for("cuda-emu:sm_90a") == pipeline_for("cuda:sm_90a")
    assert pipeline_for("cuda:sm_90a")["CheckResources"].options == {"arch": "sm_90a", "interpret": False}
    assert pipeline_for("cpu").names() == []
    cfg = {tegula.PassConfigKey.TEGULA_DISABLE_BARRIER_INSERTION: True}
    assert "InsertBarriers" not in pipeline_for("cuda:sm_80", cfg)
    with pytest.raises(ConfigError, match="unknown target"):
        pipeline_for("tpu")


def test_a_pass_must_return_a_primfunc():
    p = Pipeline([Pass("Forgets", lambda f: None)])
    with pytest.raises(KernelTypeError, match="pass 'Forgets' returned NoneType") as e:
        p.run(scale())
    assert "analysis pass returns its input" in e.value.hint


def test_pass_options_reach_the_function():
    seen = {}

    def note(func, factor):
        seen["factor"] = factor
        return func

    Pipeline([Pass("Note", note, factor=4)]).run(scale())
    assert seen == {"factor": 4}


# -- pipeline= in compile and jit ----------------------------------------------------------------

@pytest.mark.parametrize("target,anchor", [("cpu", "input"), ("cuda-emu", "Simplify")])
def test_a_user_pass_changes_what_runs(target, anchor, rng):
    p = pipeline_for(target).insert_after(anchor, Pass("Triple", times_three))
    x = rng.standard_normal(256).astype(np.float32)
    k = tegula.compile(scale(), out_idx=[1], target=target, pipeline=p)
    np.testing.assert_allclose(k(x), x.astype(np.float64) * 3.0, rtol=1e-6)
    plain = tegula.compile(scale(), out_idx=[1], target=target)
    np.testing.assert_allclose(plain(x), x.astype(np.float64) * 2.0, rtol=1e-6)
    assert k.pipeline is p and "Triple" not in plain.pipeline


def test_jit_takes_a_pipeline(rng):
    p = pipeline_for("cpu").insert_after("input", Pass("Triple", times_three))
    f = tegula.jit(out_idx=[1], target="cpu", pipeline=p)(scale)
    x = rng.standard_normal(512).astype(np.float32)
    np.testing.assert_allclose(f(512)(x), x.astype(np.float64) * 3.0, rtol=1e-6)


def test_a_pipeline_for_another_target_is_refused():
    with pytest.raises(ConfigError, match="made for cuda:sm_80, and this build is for cuda:sm_90a"):
        tegula.compile(scale(), out_idx=[1], target="cuda:sm_90a", pipeline=pipeline_for("cuda:sm_80"))
    with pytest.raises(ConfigError, match="takes a tegula.transform.Pipeline"):
        tegula.compile(scale(), out_idx=[1], target="cpu", pipeline=[times_three])


# -- the cache key covers the pipeline -----------------------------------------------------------

PASS_V1 = '''
from tegula.ir import expr as E
from tegula.ir.visitor import Mutator

class _M(Mutator):
    def visit_Const(self, c):
        if c.dtype.is_float and c.value == 2.0:
            return E.const({to}, c.dtype)
        return c

def user_pass(func):
    return _M().visit(func)
'''


def _load_pass(path, to):
    path.write_text(PASS_V1.replace("{to}", repr(to)))
    name = f"user_pass_{os.getpid()}_{to}".replace(".", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules.pop(name, None)
    return mod.user_pass


def test_pipeline_fingerprint_covers_names_options_and_user_source(tmp_path):
    base = pipeline_for("cuda:sm_80")
    assert base.fingerprint() == pipeline_for("cuda-emu").fingerprint()
    assert base.fingerprint() != pipeline_for("cuda:sm_90a").fingerprint()  # CheckResources(arch)
    assert base.fingerprint() != base.remove("InsertBarriers").fingerprint()
    one = base.insert_after("Simplify", Pass("P", identity, k=1))
    assert one.fingerprint() != base.insert_after("Simplify", Pass("P", identity, k=2)).fingerprint()
    assert one.fingerprint() != base.insert_after("Simplify", Pass("Q", identity, k=1)).fingerprint()
    a = _load_pass(tmp_path / "a.py", 3.0)
    b = _load_pass(tmp_path / "b.py", 4.0)
    fa = base.insert_after("Simplify", Pass("User", a)).fingerprint()
    assert fa != base.insert_after("Simplify", Pass("User", b)).fingerprint()
    assert fa == base.insert_after("Simplify", Pass("User", a)).fingerprint()


def test_a_changed_user_pass_rebuilds(tmp_path, rng):
    path = tmp_path / "my_pass.py"

    def build(to):
        p = pipeline_for("cuda:sm_80").insert_after("Simplify", Pass("User", _load_pass(path, to)))
        return tegula.compile(scale(), out_idx=[1], target="cuda:sm_80", pipeline=p)

    with config.override(cache_dir=str(tmp_path / "cache"), disable_cache=False):
        first = build(3.0)
        again = build(3.0)
        changed = build(5.0)
    assert first.artifact.metadata["cached"] is False
    assert again.artifact.metadata["cached"] is True
    assert changed.artifact.metadata["cached"] is False  # rebuilt, not the old entry
    assert "3.0" in first.get_kernel_source() and "5.0" in changed.get_kernel_source()
    assert "5.0" not in first.get_kernel_source()


# -- instruments ---------------------------------------------------------------------------------

def _breaks(func):
    return dataclasses.replace(func, body=seq(func.body, Break()))


def test_verify_names_the_pass_that_broke_the_ir():
    p = pipeline_for("cuda:sm_80").insert_after("PipelineCopies", Pass("Breaks", _breaks))
    with pytest.raises(VerifyError, match="not well formed after pass 'Breaks'"):
        p.run(scale(), instruments=[Verify()])
    with config.override(verify_ir=False, debug_tracebacks=True):  # TEGULA_DEBUG turns it on
        with pytest.raises(VerifyError, match="after pass 'Breaks'"):
            tegula.compile(scale(), out_idx=[1], target="cuda-emu", pipeline=p)
    with config.override(verify_ir=False, debug_tracebacks=False):  # and off: nothing checks
        Pipeline([Pass("Breaks", _breaks)]).run(scale())


def test_record_and_timing_see_every_pass():
    rec, tim = Record(), Timing()
    p = pipeline_for("cuda:sm_80")
    p.run(scale(), instruments=[rec, tim])
    assert rec.trace.names() == ["input"] + CUDA_NAMES
    assert [n for n, _ in tim.seconds] == CUDA_NAMES and tim.total() >= 0
    assert rec.trace[-1].func is not None and rec.trace.error is None


def test_trace_on_cuda_emu_shows_the_passes_and_user_passes():
    tr = trace(scale(), target="cuda-emu")
    assert tr.names() == ["input"] + CUDA_NAMES
    p = pipeline_for("cpu").insert_after("input", Pass("Triple", times_three))
    tr = trace(scale(), target="cpu", pipeline=p)
    assert tr.names() == ["input", "Triple"] and "3.0" in tr.diff("input", "Triple")
    k = tegula.compile(scale(), out_idx=[1], target="cpu", pipeline=p)
    assert trace(k, target="cpu").names() == ["input", "Triple"]  # the kernel's own pipeline


def test_dump_writes_cuda_emu_builds(tmp_path):
    with config.override(trace_dir=str(tmp_path)):
        tegula.compile(scale(), out_idx=[1], target="cuda-emu")
    files = sorted(os.listdir(tmp_path))
    assert [f.rsplit(".", 1)[1] for f in files] == ["html", "txt"]
    text = (tmp_path / files[1]).read_text()
    assert all(f"] {n}  (" in text for n in CUDA_NAMES)
    d = Dump(str(tmp_path / "d"))
    Pipeline([Pass("Triple", times_three)]).run(scale(), instruments=[d])
    assert len(d.paths) == 2 and "Triple" in open(d.paths[0]).read()
