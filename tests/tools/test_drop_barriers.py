"""``tegula.drop_barriers``: one pass config that removes every barrier tegula places (CUDA: each
``__syncthreads()``, ``bar.sync`` and mbarrier wait; Ascend: every flag and pipe barrier InsertSync
would place), so the emulators' race reports can be watched. The expected reports are in
docs/language.md ("Watch it break")."""
import importlib.util
import os
import sys

import numpy as np
import pytest

import tegula
from tegula import PassConfigKey
from tegula.backends.cuda.passes.drop_barriers import BARRIERS
from tegula.errors import RaceError, SyncError
from tegula.ir.npu import SYNC_NODES
from tegula.ir.visitor import post_order_visit
from tegula.transform import pipeline_for

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DROP = {PassConfigKey.TEGULA_DROP_BARRIERS: True}


def _example(path, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(spec.origin))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.pop(0)
    return mod


def _waits(func):
    found = []
    post_order_visit(func.body, lambda n: found.append(n.name) if getattr(n, "name", None) in BARRIERS
                     and type(n).__name__ == "Builtin" else None)
    return found


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_switch_is_one_pass_at_the_end_of_the_cuda_pipeline(arch):
    names = pipeline_for(f"cuda:{arch}", DROP).names()
    assert names[-2:] == ["DropBarriers", "CheckResources"]
    assert "DropBarriers" not in pipeline_for(f"cuda:{arch}").names()
    gemm = _example("examples/gemm.py", "gemm_ex").matmul
    with_ = tegula.compile(gemm.get_tir(128, 128, 64), target=f"cuda-emu:{arch}").get_kernel_source()
    assert "sync_threads" in with_ or "mbarrier_wait" in with_
    k = tegula.compile(gemm.get_tir(128, 128, 64), target=f"cuda-emu:{arch}", pass_configs=DROP)
    assert not any(b in k.get_kernel_source() for b in ("sync_threads", "named_barrier_sync", "mbarrier_wait("))


@pytest.mark.parametrize("arch,report", [
    ("sm_80", "data race (read after write) on shared buffer"),
    ("sm_90a", "read of a TMA destination before its phase completes"),
])
def test_the_example_gemm_without_its_barriers_is_reported(arch, report, rng):
    gemm = _example("examples/gemm.py", "gemm_ex").matmul
    a = rng.standard_normal((128, 64)).astype(np.float16)
    b = rng.standard_normal((64, 128)).astype(np.float16)
    intact = tegula.compile(gemm.get_tir(128, 128, 64), out_idx=[-1], target=f"cuda-emu:{arch}")
    np.testing.assert_allclose(intact(a, b), a.astype(np.float64) @ b.astype(np.float64), rtol=2e-2, atol=2e-2)
    broken = tegula.compile(gemm.get_tir(128, 128, 64), out_idx=[-1], target=f"cuda-emu:{arch}",
                            pass_configs=DROP)
    with pytest.raises(RaceError) as e:
        broken(a, b)
    msg = str(e.value)
    assert msg.startswith(report) and "gemm.py:" in msg and "T.gemm(A_shared, B_shared, C_local)" in msg


def test_ascend_places_no_flag_and_the_emulator_reports_it(rng):
    from tegula.backends.npu.pipeline import lower
    from tegula.target import Target

    f = _example("examples/ascend/gemm.py", "ascend_gemm_ex").gemm(64, 64, 128)
    auto = {"tl.ascend_auto_sync": True}
    assert "InsertSync" in pipeline_for("ascend-emu:a2a3", auto).names()
    assert "InsertSync" not in pipeline_for("ascend-emu:a2a3", {**auto, **DROP}).names()
    syncs = []
    low = lower(f, Target("ascend-emu", "a2a3"), {**auto, **DROP})
    post_order_visit(low.body, lambda n: syncs.append(n) if isinstance(n, SYNC_NODES) else None)
    assert syncs == []
    a = rng.standard_normal((64, 128)).astype(np.float16)
    b = rng.standard_normal((128, 64)).astype(np.float16)
    k = tegula.compile(f, target="ascend-emu:a2a3", pass_configs=auto)
    c = np.full((64, 64), np.nan, np.float16)
    k(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-2, atol=2e-2)
    broken = tegula.compile(f, target="ascend-emu:a2a3", pass_configs={**auto, **DROP})
    with pytest.raises((RaceError, SyncError)) as e:
        broken(a, b, np.full((64, 64), np.nan, np.float16))
    assert "gemm.py:" in str(e.value)
