"""The compiler fingerprint (part of the disk-cache key) depends on the package's code only."""
from tegula.backends.cuda.jit import compiler_fingerprint, fingerprint_of


def _package(root, code="A = 1\n", tool="T = 1\n"):
    (root / "backends").mkdir(parents=True, exist_ok=True)
    (root / "tools").mkdir(exist_ok=True)
    (root / "backends" / "x.py").write_text(code)
    (root / "backends" / "x.h").write_text("// header\n")
    (root / "tools" / "t.py").write_text(tool)
    return root


def test_fingerprint_does_not_depend_on_where_the_package_is_installed(tmp_path):
    plain = _package(tmp_path / "site" / "tegula")
    under_tools = _package(tmp_path / "tools" / "site" / "tegula")  # a parent folder named tools
    assert fingerprint_of(plain) == fingerprint_of(under_tools)


def test_fingerprint_follows_the_compiler_code_not_the_tools(tmp_path):
    root = _package(tmp_path / "tools" / "tegula")
    before = fingerprint_of(root)
    _package(root, tool="T = 2\n")
    assert fingerprint_of(root) == before          # tools/ is not the compiler
    _package(root, code="A = 2\n")
    assert fingerprint_of(root) != before          # a changed pass is a new compiler
    (root / "backends" / "x.h").write_text("// changed\n")
    assert len(compiler_fingerprint()) == 16
