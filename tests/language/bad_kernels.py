"""A corpus of kernels that must be rejected: each with the error class and the line it must name.

``CORPUS`` is a list of :class:`Bad`: a name, the kernel's source (a whole module), the expected
error class, and the expected line (1-based, in that source: the line marked ``# <-``). Most
entries are one bad statement placed into a good kernel (:data:`BODY`); the rest are whole kernels
(signatures, launches, macros). ``tests/language/test_bad_kernels.py`` builds each one for every
target that runs here and checks the class, the line and the absence of tegula's own files.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

from tegula import errors as E

HEADER = "import tegula\nimport tegula.language as T\n\n"

BODY = '''\
@T.prim_func
def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float32"),
         I: T.Tensor((64,), "int32"), F8: T.Tensor((64,), "float8_e4m3"),
         Bo: T.Tensor((64,), "bool"), n: T.int32, x: T.float32):
    with T.Kernel(2, threads=128) as bx:
        a_s = T.alloc_shared((64, 64), "float16")
        b_s = T.alloc_shared((64, 32), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        row = T.alloc_fragment((64,), "float32")
        loc = T.alloc_local((4,), "float32")
        v = T.alloc_var("int32")
        T.copy(A, a_s)
{STMT}
        T.copy(acc, B)
'''


@dataclass(frozen=True)
class Bad:
    name: str
    source: str
    error: type
    line: int


def _line_of_marker(source: str) -> int:
    lines = [i + 1 for i, text in enumerate(source.splitlines()) if text.rstrip().endswith("# <-")]
    assert len(lines) == 1, source
    return lines[0]


def stmt(name: str, code: str, error: type) -> Bad:
    """A bad statement (or a few lines, one marked ``# <-``; a single line needs no marker) in
    the body of a good kernel."""
    code = textwrap.dedent(code).strip("\n")
    if "# <-" not in code:
        assert "\n" not in code, name
        code += "  # <-"
    source = HEADER + BODY.replace("{STMT}", textwrap.indent(code, " " * 8))
    return Bad(name, source, error, _line_of_marker(source))


def whole(name: str, code: str, error: type) -> Bad:
    source = HEADER + textwrap.dedent(code).strip("\n") + "\n"
    return Bad(name, source, error, _line_of_marker(source))


_STATEMENTS = [
    # -- names and attributes
    ("unknown name", "T.copy(a_s, acc2)", E.KernelNameError),
    ("unknown primitive", "T.reduce_mx(acc, row, dim=1)", E.KernelNameError),
    ("unknown attribute of a buffer", "T.copy(a_s.foo, acc)", E.KernelNameError),
    ("misspelled T.Parallel", "for i in T.Paralel(64):  # <-\n    row[i] = 0.0", E.KernelNameError),
    ("unknown dtype attribute", "w = T.alloc_fragment((64,), T.float33)", E.KernelNameError),
    # -- T.copy
    ("copy of three buffers", "T.copy(A, a_s, acc)", E.KernelTypeError),
    ("copy with a float width", "T.copy(A, a_s, 2.5)", E.KernelTypeError),
    ("copy with a zero width", "T.copy(A, a_s, coalesced_width=0)", E.KernelTypeError),
    ("copy of mismatched tiles", "T.copy(A, b_s)", E.ShapeError),
    ("copy of two elements", "T.copy(A[0, 0], a_s[0, 0])", E.KernelTypeError),
    ("copy of a scalar", "T.copy(x, a_s)", E.KernelTypeError),
    ("copy of an int", "T.copy(3, a_s)", E.KernelTypeError),
    ("copy inside T.Parallel", "for i in T.Parallel(64):\n    T.copy(A, a_s)  # <-", E.ScopeError),
    ("copy with a missing argument", "T.copy(A)", E.KernelTypeError),
    ("copy with an unknown keyword", "T.copy(A, a_s, widht=4)", E.KernelTypeError),
    ("copy slice with a step", "T.copy(A[0:64:2, 0:64], b_s)", E.KernelTypeError),
    ("copy into a too-small region", "T.copy(A[0:64, 0:16], b_s)", E.ShapeError),
    ("copy region of the wrong rank", "T.copy(A[0:64], a_s)", E.ShapeError),
    ("copy from a shared slice past its end", "T.copy(a_s[32:96, 0:32], b_s)", E.OutOfBoundsError),
    ("copy into a shared tile starting too late", "T.copy(A[0:32, 0:32], b_s[40, 0])", E.OutOfBoundsError),
    ("copy from a fragment slice past its end", "T.copy(acc[0:64, 48:80], b_s)", E.OutOfBoundsError),
    ("copy of a slice past the end in every iteration",
     "for k in T.serial(2):\n    T.copy(A[0:64, 0:32], a_s[0:64, 64 + k * 8:96 + k * 8])  # <-",
     E.OutOfBoundsError),
    ("fill of a local slice past its end", "T.fill(loc[2:6], 0.0)", E.OutOfBoundsError),
    ("reduce into a fragment slice past its end", "T.reduce_sum(acc, row[32:96], dim=1)", E.OutOfBoundsError),
    # -- T.gemm
    ("gemm with mismatched K", "T.gemm(b_s, a_s, acc)", E.ShapeError),
    ("gemm on a global operand", "T.gemm(A, a_s, acc)", E.ScopeError),
    ("gemm into shared", "T.gemm(a_s, a_s, b_s)", E.ScopeError),
    ("gemm with a 1-d operand", "T.gemm(row, a_s, acc)", E.ShapeError),
    ("gemm inside T.Parallel", "for i in T.Parallel(64):\n    T.gemm(a_s, a_s, acc)  # <-", E.ScopeError),
    ("gemm with a bad policy", "T.gemm(a_s, a_s, acc, policy=7)", E.KernelTypeError),
    ("gemm of a scalar", "T.gemm(x, a_s, acc)", E.KernelTypeError),
    ("gemm with a missing accumulator", "T.gemm(a_s, a_s)", E.KernelTypeError),
    # -- reductions, fill, cumsum
    ("reduce along a missing dim", "T.reduce_sum(acc, row, dim=2)", E.ShapeError),
    ("reduce into the wrong shape", "T.reduce_max(acc, acc, dim=1)", E.ShapeError),
    ("reduce of a scalar", "T.reduce_sum(x, row, dim=0)", E.KernelTypeError),
    ("reduce inside T.Parallel", "for i in T.Parallel(64):\n    T.reduce_sum(acc, row, dim=1)  # <-",
     E.ScopeError),
    ("reduce with a float dim", "T.reduce_sum(acc, row, dim=1.0)", E.KernelTypeError),
    ("fill of a scalar", "T.fill(x, 1.0)", E.KernelTypeError),
    ("fill inside T.Parallel", "for i in T.Parallel(64):\n    T.fill(row, 0.0)  # <-", E.ScopeError),
    ("fill with a buffer value", "T.fill(row, a_s)", E.KernelTypeError),
    ("clear of an int", "T.clear(3)", E.KernelTypeError),
    ("cumsum along a missing dim", "T.cumsum(acc, dim=3)", E.ShapeError),
    ("cumsum into a mismatched tile", "T.cumsum(acc, row, dim=0)", E.ShapeError),
    # -- atomics
    ("atomic_add on bool", "T.atomic_add(Bo[0], True)", E.DTypeError),
    ("atomic_add on int8 shared", "c8 = T.alloc_shared((4,), \"int8\")\nT.atomic_add(c8[0], 1)  # <-", E.DTypeError),
    ("atomic_max on fp8", "T.atomic_max(F8[0], 1.0)", E.DTypeError),
    ("atomic_add of mismatched tiles", "T.atomic_add(B, row)", E.ShapeError),
    ("atomic_add of a string", "T.atomic_add(B[0, 0], \"one\")", E.KernelTypeError),
    # -- T.Parallel
    ("T.Parallel over a runtime value", "for i in T.Parallel(n):  # <-\n    row[0] = 1.0", E.ShapeError),
    ("T.Parallel over zero", "for i in T.Parallel(0):  # <-\n    row[i] = 1.0", E.ShapeError),
    ("T.Parallel over a negative extent", "for i in T.Parallel(-8):  # <-\n    row[i] = 1.0", E.ShapeError),
    ("T.Parallel over a float", "for i in T.Parallel(64.0):  # <-\n    row[i] = 1.0", E.KernelTypeError),
    ("T.Parallel with no extent", "for i in T.Parallel():  # <-\n    row[0] = 1.0", E.KernelTypeError),
    ("T.Parallel binding too many names", "for i, j in T.Parallel(64):  # <-\n    row[i] = 1.0",
     E.KernelTypeError),
    ("T.Parallel binding too few names", "for i in T.Parallel(64, 64):  # <-\n    acc[i, 0] = 1.0",
     E.KernelTypeError),
    ("T.Parallel loop else", "for i in T.Parallel(64):  # <-\n    row[i] = 1.0\nelse:\n    pass",
     E.KernelSyntaxError),
    ("T.Parallel over a runtime product", "for i in T.Parallel(n * 2):  # <-\n    row[0] = 1.0",
     E.ShapeError),
    ("T.Parallel in a serial loop in T.Parallel",
     "for i in T.Parallel(64):\n    for k in T.serial(2):\n        for j in T.Parallel(4):  # <-\n"
     "            acc[i, j] = 1.0", E.ScopeError),
    ("break in T.Parallel", "for i in T.Parallel(64):\n    break  # <-", E.ScopeError),
    # -- T.Pipelined
    ("num_stages negative", "for k in T.Pipelined(4, num_stages=-1):  # <-\n    T.copy(A, a_s)",
     E.KernelTypeError),
    ("num_stages a string", "for k in T.Pipelined(4, num_stages=\"2\"):  # <-\n    T.copy(A, a_s)",
     E.KernelTypeError),
    ("num_stages a float", "for k in T.Pipelined(4, num_stages=2.0):  # <-\n    T.copy(A, a_s)",
     E.KernelTypeError),
    ("num_stages a bool", "for k in T.Pipelined(4, num_stages=True):  # <-\n    T.copy(A, a_s)",
     E.KernelTypeError),
    ("order and stage of different lengths",
     "for k in T.Pipelined(4, num_stages=2, order=[0, 1], stage=[0]):  # <-\n    T.copy(A, a_s)",
     E.KernelTypeError),
    ("order not a permutation",
     "for k in T.Pipelined(4, num_stages=2, order=[0, 0], stage=[0, 1]):  # <-\n    T.copy(A, a_s)",
     E.KernelTypeError),
    ("order out of range",
     "for k in T.Pipelined(4, num_stages=2, order=[1, 2], stage=[0, 1]):  # <-\n    T.copy(A, a_s)",
     E.KernelTypeError),
    ("negative stage",
     "for k in T.Pipelined(4, num_stages=2, order=[0, 1], stage=[0, -1]):  # <-\n    T.copy(A, a_s)",
     E.KernelTypeError),
    ("order of strings",
     "for k in T.Pipelined(4, num_stages=2, order=[\"a\"]):  # <-\n    T.copy(A, a_s)",
     E.KernelTypeError),
    ("order not a list", "for k in T.Pipelined(4, num_stages=2, order=3):  # <-\n    T.copy(A, a_s)",
     E.KernelTypeError),
    ("T.Pipelined inside T.Parallel",
     "for i in T.Parallel(64):\n    for k in T.Pipelined(4, num_stages=2):  # <-\n        row[i] = 1.0",
     E.ScopeError),
    ("T.Pipelined with four arguments", "for k in T.Pipelined(0, 4, 1, 2):  # <-\n    T.copy(A, a_s)",
     E.KernelTypeError),
    ("T.Pipelined with a zero step", "for k in T.Pipelined(0, 4, 0):  # <-\n    T.copy(A, a_s)",
     E.KernelTypeError),
    ("T.Pipelined over a float", "for k in T.Pipelined(4.5):  # <-\n    T.copy(A, a_s)", E.KernelTypeError),
    # -- other loops
    ("T.serial with a zero step", "for k in T.serial(0, 4, 0):  # <-\n    v[0] = k", E.KernelTypeError),
    ("T.serial over a float", "for k in T.serial(2.5):  # <-\n    v[0] = k", E.KernelTypeError),
    ("T.serial with a runtime step", "for k in T.serial(0, 8, n):  # <-\n    v[0] = k", E.KernelTypeError),
    ("T.serial over a bool", "for k in T.serial(True):  # <-\n    v[0] = k", E.KernelTypeError),
    ("range over a float", "for k in range(2.5):  # <-\n    v[0] = k", E.KernelTypeError),
    ("iterating over an expression", "for k in x:  # <-\n    v[0] = 1", E.KernelTypeError),
    ("loop over a tuple target", "for (k, q) in T.serial(4):  # <-\n    v[0] = k", E.KernelTypeError),
    ("T.unroll over a float", "for k in T.unroll(1.5):  # <-\n    v[0] = k", E.KernelTypeError),
    ("T.vectorized over a float", "for k in T.vectorized(1.5):  # <-\n    v[0] = k", E.KernelTypeError),
    ("for-else on a serial loop", "for k in T.serial(4):  # <-\n    v[0] = k\nelse:\n    pass",
     E.KernelSyntaxError),
    ("T.Parallel used as a value", "w = T.Parallel(4)\nfor k in w:\n    row[k] = 1.0\nlen(T.Parallel(4))  # <-",
     E.KernelTypeError),
    # -- allocations
    ("alloc_shared of a zero dim", "w = T.alloc_shared((0, 64), \"float16\")", E.ShapeError),
    ("alloc_shared of a negative dim", "w = T.alloc_shared((-4, 64), \"float16\")", E.ShapeError),
    ("alloc_shared of a runtime size", "w = T.alloc_shared((n, 64), \"float16\")", E.ShapeError),
    ("alloc_shared of an unknown dtype", "w = T.alloc_shared((64,), \"float17\")", E.DTypeError),
    ("alloc_shared with a bad scope", "w = T.alloc_shared((64,), \"float16\", scope=\"global\")",
     E.KernelTypeError),
    ("alloc_fragment of a float size", "w = T.alloc_fragment((6.5,), \"float32\")", E.ShapeError),
    ("alloc_fragment of a string shape", "w = T.alloc_fragment(\"64\", \"float32\")", E.KernelTypeError),
    ("alloc_local of a runtime size", "w = T.alloc_local((n,), \"float32\")", E.ShapeError),
    ("alloc_var of an unknown dtype", "w = T.alloc_var(\"int33\")", E.DTypeError),
    ("alloc_fragment of a bool dim", "w = T.alloc_fragment((True,), \"float32\")", E.ShapeError),
    # -- element access
    ("constant index past the end of a global", "B[64, 0] = 1.0", E.OutOfBoundsError),
    ("constant negative index into a global", "B[-1, 0] = 1.0", E.OutOfBoundsError),
    ("constant index past the end of shared", "a_s[0, 64] = 1.0", E.OutOfBoundsError),
    ("constant index read past the end", "v[0] = I[64]", E.OutOfBoundsError),
    ("constant index into a local past the end", "loc[4] = 1.0", E.OutOfBoundsError),
    ("folded constant index past the end", "B[32 * 2, 0] = 1.0", E.OutOfBoundsError),
    ("constant index read from shared past the end", "v[0] = T.Cast(\"int32\", a_s[70, 0])", E.OutOfBoundsError),
    ("shared index past the end for every loop index",
     "for i in T.Parallel(64):\n    row[i] = a_s[i + 64, 0]  # <-", E.OutOfBoundsError),
    ("float used as an index", "for i in T.Parallel(64):\n    row[B[i, 0]] = 1.0  # <-", E.DTypeError),
    ("float constant as an index", "B[1.5, 0] = 1.0", E.DTypeError),
    ("bool scalar as an index", "B[x > 0, 0] = 1.0", E.DTypeError),
    ("too many indices", "B[0, 0, 0] = 1.0", E.ShapeError),
    ("too few indices", "B[0] = 1.0", E.ShapeError),
    ("store into a slice", "B[0:4, 0] = 1.0", E.KernelTypeError),
    ("fragment element outside T.Parallel", "row[3] = 1.0", E.ScopeError),
    ("store into a scalar parameter", "x[0] = 1.0", E.KernelTypeError),
    ("store into a Python int", "q = 3\nq[0] = 1  # <-", E.KernelTypeError),
    ("local written inside T.Parallel", "for i in T.Parallel(4):\n    loc[i] = 1.0  # <-", E.ScopeError),
    ("local scalar written inside T.Parallel", "for i in T.Parallel(64):\n    loc[0] = B[i, 0]  # <-",
     E.ScopeError),
    ("store of a buffer", "B[0, 0] = a_s", E.KernelTypeError),
    ("store of a string", "B[0, 0] = \"one\"", E.KernelTypeError),
    ("store of None", "B[0, 0] = None", E.KernelTypeError),
    # -- math and dtypes
    ("T.exp of an int", "for i in T.Parallel(64):\n    I[i] = T.exp(I[i])  # <-", E.DTypeError),
    ("T.log of an int constant", "v[0] = T.log(3)", E.DTypeError),
    ("T.sqrt of an int var", "v[0] = T.sqrt(v[0])", E.DTypeError),
    ("T.sin of a bool", "for i in T.Parallel(64):\n    Bo[i] = T.sin(Bo[i])  # <-", E.DTypeError),
    ("T.tanh of an int index", "for i in T.Parallel(64):\n    row[i] = T.tanh(i)  # <-", E.DTypeError),
    ("fp8 multiplication", "for i in T.Parallel(64):\n    F8[i] = F8[i] * F8[i]  # <-", E.DTypeError),
    ("fp8 addition", "for i in T.Parallel(64):\n    F8[i] = F8[i] + F8[i]  # <-", E.DTypeError),
    ("fp8 negation", "for i in T.Parallel(64):\n    F8[i] = -F8[i]  # <-", E.DTypeError),
    ("fp8 augmented assignment", "for i in T.Parallel(64):\n    F8[i] *= F8[i]  # <-", E.DTypeError),
    ("T.Cast to an unknown dtype", "v[0] = T.Cast(\"int31\", x)", E.DTypeError),
    ("T.max of a buffer", "v[0] = T.max(a_s, 1)", E.KernelTypeError),
    ("T.infinity of a bad dtype", "x2 = T.infinity(\"float99\")", E.DTypeError),
    ("comparison with is", "if x is None:  # <-\n    v[0] = 1", E.KernelTypeError),
    ("comparison with in", "if x in (1.0, 2.0):  # <-\n    v[0] = 1", E.KernelTypeError),
    # -- Python calls on runtime values
    ("print of a runtime value", "print(x)", E.KernelTypeError),
    ("print of a buffer", "print(a_s)", E.KernelTypeError),
    ("print of an element", "print(B[0, 0])", E.KernelTypeError),
    ("len of a runtime value", "q = len(x)", E.KernelTypeError),
    ("round of a runtime value", "q = round(x)", E.KernelTypeError),
    ("str of a runtime value", "q = \"%d\" % x", E.KernelTypeError),
    ("host if on a runtime value with a list", "q = [1, 2][v[0]]", E.KernelTypeError),
    ("Python error in host code", "q = 1 // 0", E.KernelTypeError),
    ("host code raising", "q = int(\"abc\")", E.KernelTypeError),
    ("calling a buffer", "q = a_s(0)", E.KernelTypeError),
    ("calling a number", "f = 3\nq = f(4)  # <-", E.KernelTypeError),
    ("min of nothing", "q = min()", E.KernelTypeError),
    # -- control flow and statements
    ("return a value", "return B", E.KernelSyntaxError),
    ("nested def", "def helper():  # <-\n    pass", E.KernelSyntaxError),
    ("class in a kernel", "class K:  # <-\n    pass", E.KernelSyntaxError),
    ("try in a kernel", "try:  # <-\n    v[0] = 1\nexcept Exception:\n    pass", E.KernelSyntaxError),
    ("import in a kernel", "import math", E.KernelSyntaxError),
    ("global statement", "global foo", E.KernelSyntaxError),
    ("del statement", "del a_s", E.KernelSyntaxError),
    ("raise statement", "raise ValueError(\"no\")", E.KernelSyntaxError),
    ("with a non-kernel", "with open(\"f\") as f:  # <-\n    pass", E.KernelTypeError),
    ("nested T.Kernel", "with T.Kernel(1) as by:  # <-\n    v[0] = 1", E.KernelSyntaxError),
    ("assert on a runtime value", "assert x > 0", E.KernelSyntaxError),
    ("failing host assert", "assert 1 == 2, \"sizes differ\"", E.KernelTypeError),
    ("lambda call on a runtime value", "q = (lambda t: t.foo)(x)", E.KernelTypeError),
    ("unpacking a runtime value", "q, r = x", E.KernelTypeError),
    # -- layout annotations and swizzles
    ("use_swizzle with panel 0", "T.use_swizzle(panel_size=0)", E.KernelTypeError),
    ("use_swizzle with a negative panel", "T.use_swizzle(-4)", E.KernelTypeError),
    ("use_swizzle with a float panel", "T.use_swizzle(2.5)", E.KernelTypeError),
    ("use_swizzle with a bad order", "T.use_swizzle(4, order=\"diag\")", E.KernelTypeError),
    ("annotate_layout with a string", "T.annotate_layout({a_s: \"garbage\"})", E.KernelTypeError),
    ("annotate_layout with a number", "T.annotate_layout({a_s: 3})", E.KernelTypeError),
    ("annotate_layout with None", "T.annotate_layout({a_s: None})", E.KernelTypeError),
    ("annotate_layout with a list", "T.annotate_layout([a_s])", E.KernelTypeError),
    ("annotate_layout keyed by a string", "T.annotate_layout({\"a_s\": 3})", E.KernelTypeError),
]

_WHOLE = [
    ("async kernel", '''
        @T.prim_func
        async def main(A: T.Tensor((64,), "float32")):  # <-
            with T.Kernel(1) as bx:
                A[0] = 1.0
    ''', E.KernelSyntaxError),
    ("T.Kernel(0)", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(0) as bx:  # <-
                A[0] = 1.0
    ''', E.KernelTypeError),
    ("T.Kernel with a negative grid", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(4, -2) as (bx, by):  # <-
                A[0] = 1.0
    ''', E.KernelTypeError),
    ("T.Kernel with a float grid", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(2.5) as bx:  # <-
                A[0] = 1.0
    ''', E.KernelTypeError),
    ("T.Kernel with four grid dims", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, 1, 1, 1) as bx:  # <-
                A[0] = 1.0
    ''', E.KernelTypeError),
    ("T.Kernel with zero threads", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=0) as bx:  # <-
                A[0] = 1.0
    ''', E.KernelTypeError),
    ("T.Kernel with a float thread count", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128.0) as bx:  # <-
                A[0] = 1.0
    ''', E.KernelTypeError),
    ("T.Kernel binding too many names", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(4) as (bx, by):  # <-
                A[0] = 1.0
    ''', E.KernelTypeError),
    ("T.Kernel over a float runtime value", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), x: T.float32):
            with T.Kernel(x) as bx:  # <-
                A[0] = 1.0
    ''', E.KernelTypeError),
    ("negative tensor shape", '''
        @T.prim_func
        def main(A: T.Tensor((-4,), "float32")):  # <-
            with T.Kernel(1) as bx:
                A[0] = 1.0
    ''', E.ShapeError),
    ("negative tensor shape in a second dim", '''
        @T.prim_func
        def main(A: T.Tensor((4, -1), "float32")):  # <-
            with T.Kernel(1) as bx:
                A[0, 0] = 1.0
    ''', E.ShapeError),
    ("unknown dtype in an annotation", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "floaty32")):  # <-
            with T.Kernel(1) as bx:
                A[0] = 1.0
    ''', E.DTypeError),
    ("string shape in an annotation", '''
        @T.prim_func
        def main(A: T.Tensor("abc", "float32")):  # <-
            with T.Kernel(1) as bx:
                A[0] = 1.0
    ''', E.KernelTypeError),
    ("float dim in an annotation", '''
        @T.prim_func
        def main(A: T.Tensor((6.5,), "float32")):  # <-
            with T.Kernel(1) as bx:
                A[0] = 1.0
    ''', E.ShapeError),
    ("annotation on the second line of a signature", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"),
                 B: T.Tensor((64,), "bfloat17")):  # <-
            with T.Kernel(1) as bx:
                A[0] = 1.0
    ''', E.DTypeError),
    ("T.Tensor[...] with one item", '''
        @T.prim_func
        def main(A: T.Tensor[(64,)]):  # <-
            with T.Kernel(1) as bx:
                A[0] = 1.0
    ''', E.KernelTypeError),
    ("missing annotation", '''
        @T.prim_func
        def main(A):  # <-
            with T.Kernel(1) as bx:
                A[0] = 1.0
    ''', E.KernelSyntaxError),
    ("annotation that is not a type", '''
        @T.prim_func
        def main(A: 3):  # <-
            with T.Kernel(1) as bx:
                A[0] = 1.0
    ''', E.KernelTypeError),
    ("string annotation of an unknown name", '''
        @T.prim_func
        def main(A: "T.Tensr((64,), 'float32')"):  # <-
            with T.Kernel(1) as bx:
                A[0] = 1.0
    ''', E.KernelTypeError),
    ("string annotation with a bad dtype", '''
        @T.prim_func
        def main(A: "T.Tensor((64,), 'float31')"):  # <-
            with T.Kernel(1) as bx:
                A[0] = 1.0
    ''', E.DTypeError),
    ("kernel returning a value", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                A[0] = 1.0
            return A  # <-
    ''', E.KernelSyntaxError),
    ("statement outside T.Kernel", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            A[0] = 1.0  # <-
    ''', E.KernelSyntaxError),
    ("tile op outside T.Kernel", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            s = T.alloc_shared((64,), "float32")  # <-
    ''', E.KernelSyntaxError),
    ("recursive macro", '''
        @T.macro
        def fill_rec(A):
            fill_rec(A)  # <-

        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                fill_rec(A)
    ''', E.KernelSyntaxError),
    ("mutually recursive macros", '''
        @T.macro
        def ping(A):
            pong(A)

        @T.macro
        def pong(A):
            ping(A)  # <-

        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                ping(A)
    ''', E.KernelSyntaxError),
    ("macro called with too many arguments", '''
        @T.macro
        def put(A):
            A[0] = 1.0

        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                put(A, A)  # <-
    ''', E.KernelTypeError),
    ("error inside a macro", '''
        @T.macro
        def put(A):
            A[64] = 1.0  # <-

        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                put(A)
    ''', E.OutOfBoundsError),
    ("macro called outside a kernel", '''
        @T.macro
        def put(A):
            A[0] = 1.0

        put(None)  # <-
    ''', E.KernelSyntaxError),
    ("T.copy used outside any kernel", '''
        T.copy(None, None)  # <-
    ''', E.KernelSyntaxError),
    ("dynamic symbol with a bad name", '''
        n = T.dynamic("2n")  # <-
    ''', E.KernelTypeError),
    ("fragment written element-wise from a serial loop", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                f = T.alloc_fragment((64,), "float32")
                for i in T.serial(64):
                    f[i] = A[i]  # <-
                T.copy(f, A)
    ''', E.ScopeError),
    ("scalar parameter of a string dtype", '''
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), n: "int33"):  # <-
            with T.Kernel(1) as bx:
                A[0] = 1.0
    ''', E.KernelTypeError),
]

CORPUS: list[Bad] = [stmt(*c) for c in _STATEMENTS] + [whole(*c) for c in _WHOLE]
