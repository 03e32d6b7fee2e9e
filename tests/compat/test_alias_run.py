"""``python -m tegula run`` and ``tegula.compat.alias_tilelang()``: TileLang programs run unchanged
with ``import tilelang`` meaning tegula, and nothing is named ``tilelang`` otherwise (subprocesses)."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = '''
import sys
import numpy as np
import tilelang
import tilelang.language as T
import tilelang.testing
from tilelang import tvm as tvm
from tvm import DataType
from tilelang.profiler import do_bench
from tilelang.utils.tensor import torch_assert_close


def scale(M, block):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(tilelang.cdiv(M, block), threads=32) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 3.0 + 1.0
    return main


k = tilelang.compile(scale(256, 64), out_idx=[-1], target="cpu")
a = np.random.default_rng().standard_normal(256).astype(np.float32)
np.testing.assert_allclose(k(a), a.astype(np.float64) * 3.0 + 1.0, rtol=1e-5, atol=1e-6)
assert tilelang.__name__ == "tegula" and DataType("float16").bits == 16
print("ARGV", sys.argv[1:], "MAIN", __name__)
sys.exit(int(sys.argv[-1]))
'''

TESTS = '''
import tilelang
import tilelang.testing


@tilelang.testing.requires_cuda_compute_version_ge(99, 0)
def test_needs_a_future_gpu():
    raise AssertionError("must be skipped")


def test_runs():
    assert tilelang.testing.__name__ == "tegula.compat.testing"


if __name__ == "__main__":
    tilelang.testing.main()
'''


def run(args, cwd, extra_env=None):
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(ROOT), **(extra_env or {})})
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=env)


def test_run_program_with_arguments_and_exit_code(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    r = run(["-m", "tegula", "run", "prog.py", "--flag", "3"], tmp_path)
    assert r.returncode == 3, r.stderr
    assert "ARGV ['--flag', '3'] MAIN __main__" in r.stdout
    r = run(["-m", "tegula", "run", "prog.py", "0"], tmp_path)
    assert r.returncode == 0, r.stderr


def test_run_module_pytest(tmp_path):
    (tmp_path / "test_it.py").write_text(TESTS)
    r = run(["-m", "tegula", "run", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py"], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed, 1 skipped" in r.stdout
    # testing.main() runs the file's tests under pytest
    r = run(["-m", "tegula", "run", "test_it.py", "-q", "-p", "no:cacheprovider"], tmp_path)
    assert r.returncode == 0 and "1 passed, 1 skipped" in r.stdout, r.stdout + r.stderr


def test_run_errors(tmp_path):
    r = run(["-m", "tegula", "run", "missing.py"], tmp_path)
    assert r.returncode == 2 and "no such file: missing.py" in r.stderr
    r = run(["-m", "tegula", "run", "-m", "no_such_module_xyz"], tmp_path)
    assert r.returncode == 2 and "no module named 'no_such_module_xyz'" in r.stderr
    assert "Traceback" not in r.stderr
    r = run(["-m", "tegula", "run"], tmp_path)
    assert r.returncode == 2 and "usage: python -m tegula run" in r.stderr
    r = run(["-m", "tegula", "run", "--help"], tmp_path)
    assert r.returncode == 0 and "usage" in r.stdout


def test_nothing_is_named_tilelang_without_the_alias(tmp_path):
    code = textwrap.dedent('''
        import importlib.util, sys
        import tegula, tegula.testing, tegula.tvm
        for name in ("tilelang", "tvm"):
            try:
                __import__(name)
            except ImportError:
                print("no", name)
        assert "tilelang" not in sys.modules and "tvm" not in sys.modules
    ''')
    r = run(["-c", code], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["no", "tilelang", "no", "tvm"]


def test_alias_in_process(tmp_path):
    code = textwrap.dedent('''
        import sys
        import tegula
        from tegula.compat import alias_tilelang, is_aliased, unalias_tilelang
        assert not is_aliased()
        assert alias_tilelang() is tegula and is_aliased()
        import tilelang, tilelang.language, tilelang.testing, tilelang.carver.arch, tilelang.engine.param
        import tegula.compat.testing, tegula.compat.carver
        assert tilelang is tegula and tilelang.language is tegula.language
        assert tilelang.testing is tegula.compat.testing and tilelang.carver.arch is tegula.compat.carver
        assert tegula.language.__spec__.name == "tegula.language"  # the real module keeps its spec
        from tilelang.jit import JITImpl, JITKernel
        assert JITImpl is tegula.JITFunction and JITKernel is tegula.JITKernel
        import tvm
        from tvm import tirx
        assert tvm is tegula.compat.tvm and tirx.const(3, "int32").value == 3
        try:
            import tilelang.no_such_module
        except ModuleNotFoundError as e:
            print("missing", e.name)
        unalias_tilelang()
        assert not is_aliased() and "tilelang" not in sys.modules and "tvm" not in sys.modules
        try:
            import tvm
        except ImportError:
            print("tvm gone")
    ''')
    r = run(["-c", code], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["missing", "tilelang.no_such_module", "tvm", "gone"]


def test_alias_refuses_a_real_tilelang(tmp_path):
    (tmp_path / "tilelang").mkdir()
    (tmp_path / "tilelang" / "__init__.py").write_text("REAL = True\n")
    code = "import tilelang\nfrom tegula.compat import alias_tilelang\nalias_tilelang()\n"
    r = run(["-c", code], tmp_path, {"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
    assert r.returncode != 0 and "already imported" in r.stderr


def test_importing_a_submodule_leaves_the_packages_names(tmp_path):
    # every tegula package, every submodule whose name the package also exports as something
    # else (tilelang.jit the decorator, tilelang.language.prim_func, tilelang.tools.trace...):
    # importing the submodule under the alias leaves the exported name as it was
    code = textwrap.dedent('''
        import importlib, pkgutil, types
        import tegula
        from tegula.compat import alias_tilelang
        alias_tilelang()
        import tilelang
        pairs = []
        def walk(pkg):
            for m in pkgutil.iter_modules(pkg.__path__):
                v = pkg.__dict__.get(m.name)
                if v is not None and not isinstance(v, types.ModuleType):
                    pairs.append((pkg.__name__, m.name, v))
                if m.ispkg:
                    sub = importlib.import_module(pkg.__name__ + "." + m.name)
                    if hasattr(sub, "__path__") and m.name not in ("backends", "tools", "torch"):
                        walk(sub)
        walk(tegula)
        walk(importlib.import_module("tegula.tools"))
        assert ("tegula", "jit", tegula.jit) in pairs, pairs
        for pkg, name, v in pairs:
            alias = "tilelang" + pkg[len("tegula"):]
            importlib.import_module(f"{alias}.{name}")
            assert getattr(importlib.import_module(alias), name) is v, (pkg, name)
            print("kept", f"{alias}.{name}")
        from tilelang.jit import JITKernel, JITImpl
        import tilelang.jit
        assert tilelang.jit is tegula.jit and callable(tilelang.jit)
    ''')
    r = run(["-c", code], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "kept tilelang.jit" in r.stdout and "kept tilelang.tools.trace" in r.stdout


def test_a_tilelang_module_tegula_lacks_is_a_tegula_error_naming_it(tmp_path):
    # TileLang's gemm_sp example imports tilelang.cuda.intrinsics.sparse_layout; tegula has the
    # package tilelang.cuda.intrinsics but not that module
    (tmp_path / "prog.py").write_text(textwrap.dedent('''
        from tegula.errors import UnsupportedError
        name = "tilelang.cuda.intrinsics.sparse_layout"
        try:
            import tilelang.cuda.intrinsics.sparse_layout  # noqa: F401
        except UnsupportedError as e:
            assert isinstance(e, ModuleNotFoundError) and e.name == name, e
            print("missing", e)
        from tilelang.cuda.intrinsics.sparse_layout import make_cutlass_metadata_layout  # noqa: F401
    '''))
    r = run(["-m", "tegula", "run", "prog.py"], tmp_path)
    assert r.returncode == 1
    assert r.stdout.startswith("missing tilelang.cuda.intrinsics.sparse_layout is a module of TileLang")
    last = r.stderr.strip().splitlines()
    assert any(line.startswith("tegula.compat.alias.MissingModuleError: tilelang.cuda.intrinsics.sparse_layout "
                               "is a module") and "tegula does not have" in line for line in last), r.stderr
