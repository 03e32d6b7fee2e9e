"""Run the PTO C++ that ``target="ascend-pto:..."`` emits on the CPU implementation of the PTO ISA
that the user supplies (a checkout of the public PTO ISA repository: ``PTO_ISA_ROOT``; nothing of
it is part of tegula).

:func:`run` writes the kernel's source and a generated host harness into a temporary folder,
compiles them with ``clang++ -std=c++20 -D__CPU_SIM`` against ``<root>/include`` (with libc++ when
the headers need ``<format>``), runs the program
on the arguments (each tensor a raw file) and copies the tensors back into the arrays. The
harness gives each block's cube core and two vector cores a thread of their own (the cube
code compiled with ``__DAV_CUBE__``, the vector code with ``__DAV_VEC__``), with
``get_block_idx`` / ``get_subblockid`` and counting cross-core flags (mode 2: the cube's set
counts one on each vector core, each vector core's set one on the cube, whose wait takes one of
each; mode 1: the other vector core). The simulator's intra-core flags are empty (every pipe
runs in program order), so this checks what the emitted instructions compute, not their sync.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any, Optional, Sequence

import numpy as np

from tegula.errors import ConfigError, UnsupportedError
from tegula.ir.npu import NpuKernel
from tegula.ir.visitor import post_order_visit

_C = {"float16": "half", "float32": "float", "int32": "int32_t", "int8": "int8_t",
      "uint8": "uint8_t", "int16": "int16_t"}

_PRELUDE = r"""
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <pto/pto-inst.hpp>

// the harness's machine: which core this thread is, and the cross-core flags of one block
// (the kernel's get_block_idx / get_subblockid are renamed to these: some snapshots define their own)
static thread_local int32_t tg_block = 0, tg_core = 0;   // core 0: AIC, 1 and 2: AIV 0 and 1
inline int32_t tegula_block_idx() { return tg_block; }
inline int32_t tegula_subblockid() { return tg_core > 0 ? tg_core - 1 : 0; }
#define get_block_idx tegula_block_idx
#define get_subblockid tegula_subblockid
static std::mutex tg_mu;
static std::condition_variable tg_cv;
static int tg_count[3][2][32];   // [core waiting][from which vector core (cube: 0)][flag]
inline int getFFTSMsg(int mode, int flag) { return mode * 256 + flag; }
template <typename P> inline void ffts_cross_core_sync(P, int msg) {
  int mode = msg / 256, flag = msg % 256;
  std::lock_guard<std::mutex> g(tg_mu);
  if (tg_core == 0) { tg_count[1][0][flag]++; tg_count[2][0][flag]++; }
  else if (mode == 1) tg_count[3 - tg_core][0][flag]++;
  else tg_count[0][tg_core - 1][flag]++;
  tg_cv.notify_all();
}
inline void wait_flag_dev(int flag) {
  std::unique_lock<std::mutex> g(tg_mu);
  if (tg_core == 0) {
    tg_cv.wait(g, [&] { return tg_count[0][0][flag] > 0 && tg_count[0][1][flag] > 0; });
    tg_count[0][0][flag]--; tg_count[0][1][flag]--;
  } else {
    tg_cv.wait(g, [&] { return tg_count[tg_core][0][flag] > 0; });
    tg_count[tg_core][0][flag]--;
  }
}
#define PIPE_FIX tegula_pipe_fix
static const pipe_t tegula_pipe_fix = 7;
#ifndef EVENT_ID1
#define EVENT_ID1 1
#define EVENT_ID2 2
#define EVENT_ID3 3
#define EVENT_ID4 4
#define EVENT_ID5 5
#define EVENT_ID6 6
#define EVENT_ID7 7
#endif
"""


def _kernel_of(func: Any) -> NpuKernel:
    ks: list = []
    post_order_visit(func.body, lambda n: ks.append(n) if isinstance(n, NpuKernel) else None)
    if len(ks) != 1:
        raise UnsupportedError(f"the PTO simulator check runs functions of one NPU kernel, "
                               f"'{func.name}' has {len(ks)}")
    return ks[0]


def harness(func: Any, source_name: str = "kernel.cpp") -> str:
    """The host program for ``func``'s emitted source: reads every tensor argument from
    ``<dir>/argN.bin``, runs each block's three cores, writes the tensors to ``<dir>/argN.out``."""
    k = _kernel_of(func)
    grid = k.grid[0]
    if not isinstance(grid, int):
        raise UnsupportedError("the PTO simulator check needs a constant grid")
    name = f"{func.name}_kernel"
    lines = [_PRELUDE,
             f"#define __DAV_CUBE__\n#define {name} tegula_cube\n#include \"{source_name}\"",
             f"#undef {name}\n#undef __DAV_CUBE__",
             f"#define __DAV_VEC__\n#define {name} tegula_vec\n#include \"{source_name}\"",
             f"#undef {name}\n#undef __DAV_VEC__", "",
             "template <typename T> static std::vector<T> load(const std::string &p, size_t n) {",
             "  std::vector<T> v(n); std::ifstream f(p, std::ios::binary);",
             "  f.read(reinterpret_cast<char *>(v.data()), n * sizeof(T)); return v; }",
             "template <typename T> static void save(const std::string &p, const std::vector<T> &v) {",
             "  std::ofstream f(p, std::ios::binary);",
             "  f.write(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T)); }", "",
             "int main(int argc, char **argv) {",
             "  std::string dir = argc > 1 ? argv[1] : \".\";"]
    call = []
    for i, p in enumerate(func.params):
        if not hasattr(p, "shape"):
            raise UnsupportedError(f"the PTO simulator check passes tensors only ('{p.name}')")
        t = _C.get(p.dtype.name)
        if t is None or not all(isinstance(d, int) for d in p.shape):
            raise UnsupportedError(f"the PTO simulator check cannot pass '{p.name}' ({p.dtype.name})")
        n = int(np.prod(p.shape))
        lines.append(f"  auto a{i} = load<{t}>(dir + \"/arg{i}.bin\", {n});")
        call.append(f"a{i}.data()")
    args = ", ".join(call)
    lines += [f"  for (int32_t b = 0; b < {grid}; ++b) {{",
              "    std::vector<std::thread> cores;",
              "    for (int c = 0; c < 3; ++c)",
              "      cores.emplace_back([&, c] { tg_block = b; tg_core = c;",
              f"        if (c == 0) tegula_cube({args}); else tegula_vec({args}); }});",
              "    for (auto &t : cores) t.join();",
              "  }"]
    lines += [f"  save(dir + \"/arg{i}.out\", a{i});" for i in range(len(func.params))]
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


def find_cxx(cxx: Optional[str] = None) -> str:
    """A C++20 compiler for the simulator: ``cxx``, else clang++ (newest first) on PATH."""
    for c in ([cxx] if cxx else []) + ["clang++", "clang++-19", "clang++-18", "clang++-17",
                                       "clang++-16", "clang++-15"]:
        if c and shutil.which(c):
            return c
    raise ConfigError("no clang++ found for the PTO simulator check",
                      hint="install clang 15 or newer, or set TEGULA_PTO_CXX")


def run(func: Any, source: str, args: Sequence[np.ndarray], root: str,
        cxx: Optional[str] = None, keep: Optional[str] = None) -> None:
    """Compile ``source`` (the emitted PTO C++ of ``func``) with the generated harness against
    the PTO ISA checkout ``root``, run it on ``args`` and write the results back into them.
    ``keep``: a folder to leave the files in (else a temporary one)."""
    inc = os.path.join(root, "include")
    if not os.path.isfile(os.path.join(inc, "pto", "pto-inst.hpp")):
        raise ConfigError(f"PTO_ISA_ROOT={root!r} is not a PTO ISA checkout "
                          "(no include/pto/pto-inst.hpp)")
    work = keep or tempfile.mkdtemp(prefix="tegula-pto-")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "kernel.cpp"), "w") as f:
        f.write(source)
    with open(os.path.join(work, "harness.cpp"), "w") as f:
        f.write(harness(func))
    for i, a in enumerate(args):
        np.ascontiguousarray(a).tofile(os.path.join(work, f"arg{i}.bin"))
    exe = os.path.join(work, "harness")
    cmd = [find_cxx(cxx), "-std=c++20", "-D__CPU_SIM", "-O1", "-pthread", "-I", inc, "-I", work,
           "-Wno-macro-redefined", "-Wno-ignored-attributes", "-Wno-unused-value",
           os.path.join(work, "harness.cpp"), "-o", exe]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 and "'format' file not found" in r.stderr:  # newer snapshots: libc++
        r = subprocess.run(cmd[:2] + ["-stdlib=libc++", "-fexperimental-library"] + cmd[2:],
                           capture_output=True, text=True)
    if r.returncode != 0:
        raise UnsupportedError("the emitted PTO C++ does not compile against the PTO ISA "
                               f"headers:\n{r.stderr[-4000:]}")
    r = subprocess.run([exe, work], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise UnsupportedError(f"the PTO simulator run failed ({r.returncode}):\n{(r.stdout + r.stderr)[-4000:]}")
    for i, a in enumerate(args):
        a[...] = np.fromfile(os.path.join(work, f"arg{i}.out"), a.dtype).reshape(a.shape)
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
