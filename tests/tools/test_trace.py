"""tegula.tools.trace / diff / the HTML page / TEGULA_TRACE / the trace and diff commands."""
import os
from html.parser import HTMLParser

import pytest

import tegula
from tegula import config
from tegula.errors import ConfigError, ResourceError
from tegula.ir.verify import well_formed
from tegula.transform import pipeline_for
from tegula.tools import Trace, diff, trace
from tegula.tools.cli import main as cli_main
from tool_kernels import gemm

GEMM_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "gemm.py")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_trace_names_and_order_follow_the_pipeline(arch):
    tr = trace(gemm(), target=f"cuda:{arch}")
    want = ["input"] + pipeline_for(f"cuda:{arch}").names()
    assert tr.names() == want
    assert tr.error is None
    assert all(s.seconds >= 0 for s in tr)
    # every step's IR is valid, checked again here on the recorded functions
    for s in tr:
        assert s.problems == [] and well_formed(s.func) == []
        assert s.ir == s.func.script()
    assert tr[0].ir == gemm().script()


def test_trace_respects_pass_configs():
    tr = trace(gemm(), target="cuda:sm_80", pass_configs={"tegula.disable_barrier_insertion": True})
    assert "InsertBarriers" not in tr.names()


def test_trace_on_cpu_is_the_tile_ir():
    tr = trace(gemm(), target="cpu")
    assert tr.names() == ["input"] and tr[0].ir == gemm().script()


def test_trace_accepts_kernels_jit_functions_and_factories():
    k = tegula.compile(gemm(), out_idx=[-1], target="cpu")
    jf = tegula.jit(out_idx=[-1], target="cpu")(gemm)
    a = trace(k, target="cuda:sm_80")
    b = trace(jf, 128, 128, 64, target="cuda:sm_80")
    c = trace(gemm, M=128, N=128, K=64, target="cuda:sm_80")
    assert [s.ir for s in a] == [s.ir for s in b] == [s.ir for s in c]


def test_trace_points_by_name_and_position():
    tr = trace(gemm(), target="cuda:sm_80")
    assert tr["lowertileops"] is tr[tr.index("LowerTileOps")]
    assert tr.index(-1) == len(tr) - 1
    with pytest.raises(ConfigError, match="LowerTileOps"):
        tr.index("LowerTileOp")
    with pytest.raises(ConfigError, match="out of range"):
        tr.index(99)


def test_trace_keeps_the_steps_before_a_failing_pass():
    tr = trace(gemm(block_M=256, block_N=256, block_K=64, num_stages=4, M=256, N=256, K=256),
               target="cuda:sm_80")
    assert isinstance(tr.error, ResourceError)
    assert tr.names()[-1] == "PlanSharedMemory"
    assert "stopped" in tr.format()


def test_diff_shows_pipelining_of_shared_tiles():
    d = diff(gemm(), "input", "PipelineCopies", target="cuda:sm_80")
    assert d.startswith("--- main @ [0] input")
    assert '-        A_shared = T.alloc_shared((64, 32), "float16")' in d
    assert '+        A_shared = T.alloc_shared((2, 64, 32), "float16")' in d
    assert any(line.startswith("+") and "async=True" in line for line in d.splitlines())


def test_diff_by_index_and_of_a_trace():
    tr = trace(gemm(), target="cuda:sm_80")
    i = tr.index("PipelineCopies")
    assert diff(tr, 0, i) == diff(tr, "input", "PipelineCopies")
    assert diff(tr, "LowerTileOps", "LowerTileOps") == ""
    with pytest.raises(ConfigError, match="no pass named"):
        diff(tr, "input", "Nope")


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sections, self.attrs, self.classes, self.h2 = [], [], [], []
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.attrs.append((tag, a))
        if tag == "section":
            self.sections.append(a.get("id"))
        self.classes.append(a.get("class"))
        self._in_h2 = self._in_h2 or tag == "h2"
        if tag == "h2":
            self.h2.append("")

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in_h2 = False

    def handle_data(self, data):
        if self._in_h2:
            self.h2[-1] += data


def test_html_page_holds_every_pass_and_nothing_external():
    tr = trace(gemm(), target="cuda:sm_90a")
    page = tr.to_html()
    p = _Page()
    p.feed(page)
    p.close()
    assert p.sections == [f"step-{i}" for i in range(len(tr))]
    for i, name in enumerate(tr.names()):
        assert p.h2[i].startswith(f"[{i}] {name} ")
    assert "http" not in page and "src=" not in page and "<script" not in page
    for tag, a in p.attrs:
        assert tag not in ("link", "img", "iframe", "object", "embed")
        assert all(not v.startswith(("//", "data:")) for k, v in a.items() if k == "href" and v)
    assert "add" in p.classes and "del" in p.classes  # changes are highlighted


def test_tegula_trace_dumps_every_cuda_build(tmp_path):
    out = tmp_path / "traces"
    with config.override(trace_dir=str(out), disable_cache=True):
        tegula.compile(gemm(), out_idx=[-1], target="cuda:sm_80")
    files = sorted(os.listdir(out))
    assert len(files) == 2 and files[0].endswith(".trace.html") and files[1].endswith(".trace.txt")
    text = (out / files[1]).read_text()
    for name in pipeline_for("cuda:sm_80").names():
        assert f"] {name}  (" in text


def test_tegula_trace_writes_the_partial_trace_of_a_failing_build(tmp_path):
    with config.override(trace_dir=str(tmp_path), disable_cache=True):
        with pytest.raises(ResourceError):
            tegula.compile(gemm(block_M=256, block_N=256, block_K=64, num_stages=4, M=256, N=256, K=256),
                           target="cuda:sm_80")
    txt = [f for f in os.listdir(tmp_path) if f.endswith(".txt")]
    assert len(txt) == 1 and "ResourceError" in (tmp_path / txt[0]).read_text()


def test_cli_trace_prints_and_writes_html(tmp_path, capsys):
    sets = ["--set", "M=128", "--set", "N=128", "--set", "K=64"]
    assert cli_main(["trace", GEMM_FILE, "--kernel", "matmul", *sets, "--target", "cuda:sm_80"]) == 0
    out = capsys.readouterr().out
    assert "== [0] input" in out and "CheckResources" in out and "total" in out
    page = tmp_path / "t.html"
    assert cli_main(["trace", GEMM_FILE, "--kernel", "matmul", *sets, "--html", str(page)]) == 0
    assert "step-9" in page.read_text()


def test_cli_diff_and_its_errors(capsys):
    sets = ["--set", "M=128", "--set", "N=128", "--set", "K=64"]
    assert cli_main(["diff", GEMM_FILE, "input", "PipelineCopies", "--kernel", "matmul", *sets]) == 0
    at = 1 + pipeline_for("cuda:sm_90a").names().index("PipelineCopies")
    assert f"+++ main @ [{at}] PipelineCopies" in capsys.readouterr().out
    assert cli_main(["diff", GEMM_FILE, "input", "Nope", "--kernel", "matmul", *sets]) == 1
    assert "no pass named 'Nope'" in capsys.readouterr().err
    assert cli_main(["trace", GEMM_FILE]) == 1
    assert "--kernel" in capsys.readouterr().err
    assert cli_main(["trace", GEMM_FILE, "--kernel", "matmul", "--set", "M=1"]) == 1
    assert "--set N=..." in capsys.readouterr().err


def test_trace_is_a_list_of_steps():
    tr = trace(gemm(), target="cpu")
    assert isinstance(tr, Trace) and isinstance(tr, list) and tr[0].ok
