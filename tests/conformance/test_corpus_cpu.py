"""A CPU subset of the TileLang conformance corpus: TileLang's own examples, unchanged, with
``tilelang`` meaning tegula, on the interpreter.

The corpus lives outside the project and is never copied into it: ``TEGULA_CONFORMANCE``, else
the first ``.conformance`` or ``shared/conformance`` in the project's root or a folder above it
(``tegula.config.conformance_root``), so a clone anywhere below the folder holding ``shared/``
finds it. The test runs the corpus's own driver
(``run.sh cpu``) on the calls of its ``cpu_calls.txt`` listed below, quick ones the
interpreter passes today (docs/conformance.md lists every call and says why each other one fails), and needs every one of them
to pass. Without the corpus it is skipped, and says where it looked.
"""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tegula import config

ROOT = Path(__file__).resolve().parents[2]

# DIR|MODULE|CALL exactly as in the corpus's cpu_calls.txt: passing calls that take seconds on
# the interpreter (about 120 s of wall time in all in one job on the 2-core development machine,
# about a minute with two jobs). The others that pass take longer; `run.sh cpu` runs them
# (docs/conformance.md has the whole list).
PASSING = [
    "analyze|example_conv_analyze|main()",
    "analyze|example_gemm_analyze|main()",
    "attention_sink|example_mha_sink_fwd_bhsd|main()",
    "cast|example_group_per_split_token_cast_to_fp8|main(M=1024, N=1024, BG=2, blk_m=4, batch_sizes=[128, 896])",
    "dequantize_gemm|example_dequant_gemm_fp4_hopper|main()",
    "dequantize_gemm|example_dequant_gemm_w4a8|main()",
    "elementwise|example_elementwise_add|main()",
    "flash_attention|example_mha_fwd_bhsd|main()",
    "gemm_streamk|example_tilelang_gemm_streamk|main()",
    "grouped_gemm|example_grouped_gemm_fwd|run_tilelang_grouped_gemm([5, 9, 13], K=64, M=96, block_M=64, "
    "block_N=64, block_K=32, trans_b=False, num_stages=2, threads=256, profile=False)",
    "norm|rms_norm|test_rms_norm()",
    "topk|example_topk|main(argv=[])",
]


def test_corpus_lookup(tmp_path):
    """TEGULA_CONFORMANCE first, else the nearest .conformance or shared/conformance walking up."""
    top = tmp_path / "work"
    clone = top / "ci" / "tegula"
    clone.mkdir(parents=True)
    with config.override(conformance_dir=None):
        assert config.conformance_candidates(clone)[:4] == [
            clone / ".conformance", clone / "shared" / "conformance",
            top / "ci" / ".conformance", top / "ci" / "shared" / "conformance"]
        found = config.conformance_root(clone)
        assert found is None or top not in found.parents
        (top / "shared" / "conformance" / "tilelang" / "examples").mkdir(parents=True)
        assert config.conformance_root(clone) == top / "shared" / "conformance"
        (top / "ci" / ".conformance" / "tilelang" / "examples").mkdir(parents=True)
        assert config.conformance_root(clone) == top / "ci" / ".conformance"  # the nearest first
    with config.override(conformance_dir=str(tmp_path / "elsewhere")):
        assert config.conformance_candidates(clone) == [tmp_path / "elsewhere"]
        assert config.conformance_root(clone) is None


def test_corpus_cpu_subset(tmp_path):
    corpus = config.conformance_root(ROOT)
    if corpus is None or not (corpus / "run.sh").is_file() or not (corpus / "cpu_calls.txt").is_file():
        tried = ", ".join(str(c) for c in config.conformance_candidates(ROOT)[:6])
        pytest.skip(f"the TileLang conformance corpus (run.sh, cpu_calls.txt, tilelang/examples) is not "
                    f"at {tried}, ...; set TEGULA_CONFORMANCE to its folder to run this test")
    listed = {ln.strip() for ln in (corpus / "cpu_calls.txt").read_text().splitlines()
              if ln.strip() and not ln.startswith("#")}
    gone = [c for c in PASSING if c not in listed]
    assert not gone, f"calls no longer in the corpus's cpu_calls.txt: {gone}"
    calls = tmp_path / "calls.txt"
    calls.write_text("\n".join(PASSING) + "\n")
    out = tmp_path / "out"
    env = dict(os.environ)
    env.update({"CONFORMANCE_CALLS": str(calls), "CONFORMANCE_OUT": str(out), "JOBS": "2",
                "PER_S": "240", "PYTHON": sys.executable, "PYTHONPATH": str(ROOT),
                "TEGULA_POISON_OUTPUTS": "1",
                # one torch thread per job: the examples' references run torch on the CPU, and two
                # jobs of two threads each on two cores spin-wait for each other
                "OMP_NUM_THREADS": "1"})
    dirs = sorted({c.split("|")[0] for c in PASSING})
    proc = subprocess.Popen(["bash", str(corpus / "run.sh"), "cpu", *dirs], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=290)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # run.sh and every call it started
        proc.communicate()
        done = sorted(p.name for p in out.glob("*.log") if "RESULT" in p.read_text(errors="replace"))
        pytest.fail(f"the CPU corpus subset took more than 290 s; calls finished: {len(done)} of "
                    f"{len(PASSING)}: {', '.join(done)}")
    summary = (out / "summary.txt").read_text() if (out / "summary.txt").exists() else stdout
    failed = [ln for ln in summary.splitlines() if ln.startswith("FAIL")]
    assert not failed, "conformance calls that failed:\n" + "\n".join(failed) + "\n" + stderr[-2000:]
    assert sum(ln.startswith("PASS") for ln in summary.splitlines()) == len(PASSING), summary
