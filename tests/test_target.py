"""The table of target kinds: their facts, lazy backends, and a new kind declared as data."""
import subprocess
import sys

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import ConfigError
from tegula.ir.stmt import PrimFunc
from tegula.target import KINDS, Target, TargetKind, builder_for, declare, kind_of, parse_target
from tegula.transform import PassSpec, pipeline_for


def test_every_kind_states_its_facts():
    assert set(KINDS) >= {"cpu", "cuda", "cuda-emu"}
    cpu, cuda, emu = KINDS["cpu"], KINDS["cuda"], KINDS["cuda-emu"]
    assert cpu.runs_on_host and not cpu.uses_cuda_pipeline and cpu.pipeline is None
    assert not cuda.runs_on_host and cuda.uses_cuda_pipeline
    assert emu.runs_on_host and emu.uses_cuda_pipeline
    assert emu.lowering_target(Target("cuda-emu")) == Target("cuda", "sm_80")
    assert parse_target("host") == Target("cpu") and parse_target("cuda:SM_90A") == Target("cuda", "sm_90a")


def test_backends_are_imported_only_when_used():
    code = ("import sys, tegula, tegula.tools\n"
            "from tegula.transform import pipeline_for\n"
            "pipeline_for('cpu'); tegula.target.parse_target('cuda-emu')\n"
            "loaded = lambda: sorted(m for m in sys.modules if m.startswith('tegula.backends'))\n"
            "assert loaded() == [], loaded()\n"
            "pipeline_for('cuda-emu')\n"
            "assert 'tegula.backends.cuda.pipeline' in loaded() and 'tegula.backends.emu.jit' not in loaded()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def double(func: PrimFunc) -> PrimFunc:
    """The test target's one pass (returns its input)."""
    return func


def note(func: PrimFunc, flag=None) -> PrimFunc:
    return func


TEST_PASSES = (
    PassSpec("Double", double, "stands in for a lowering"),
    PassSpec("OnlyA5", note, "runs for one machine", archs=("a5",),
             config_options=(("flag", tegula.PassConfigKey.TEGULA_DISABLE_BARRIER_INSERTION),)),
)


class _Artifact:
    def __init__(self, func):
        self.source = func.script()

    def run(self, args):
        args[1][...] = 2 * args[0]


def build(func, target, pass_configs, pipeline=None):
    from tegula.transform.pipeline import check_pipeline

    return _Artifact(check_pipeline(pipeline, target, pass_configs).run(func))


@pytest.fixture
def test_kind():
    declare(TargetKind("test-npu", f"{__name__}:build", runs_on_host=True,
                       pipeline=f"{__name__}:TEST_PASSES", archs=("a2", "a5")))
    yield KINDS["test-npu"]
    del KINDS["test-npu"]


def test_a_new_kind_is_one_row_of_data(test_kind, rng):
    assert kind_of(parse_target("test-npu")) is test_kind
    p = pipeline_for("test-npu")
    assert p.names() == ["Double"] and p.target == "test-npu:a2"
    a5 = pipeline_for("test-npu:a5", {tegula.PassConfigKey.TEGULA_DISABLE_BARRIER_INSERTION: True})
    assert a5.names() == ["Double", "OnlyA5"] and a5["OnlyA5"].options == {"flag": True}
    assert pipeline_for("test-npu:a5")["OnlyA5"].options == {"flag": None}
    with pytest.raises(ConfigError, match="test-npu:a2 or test-npu:a5"):
        parse_target("test-npu:a9")
    assert builder_for(Target("test-npu")) is build

    @T.prim_func
    def f(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8) as bx:
            for i in T.Parallel(8):
                Y[i] = X[i] * 2.0

    x = rng.standard_normal(8).astype(np.float32)
    np.testing.assert_allclose(tegula.compile(f, out_idx=[1], target="test-npu")(x), 2 * x.astype(np.float64))
    with pytest.raises(ConfigError, match="'cuda-emu', 'ascend-emu', 'ascend-pto', 'ascendc', 'test-npu'"):
        parse_target("npu9")


def test_none_means_auto():
    assert parse_target(None) == parse_target("auto")
