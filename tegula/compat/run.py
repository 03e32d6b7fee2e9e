"""``python -m tegula run``: run a TileLang program, unchanged, with ``tilelang`` meaning tegula.

    python -m tegula run prog.py [args...]       runs prog.py as __main__ (sys.argv = [prog.py, args...])
    python -m tegula run -m pytest [args...]     runs a module as __main__ (here: pytest)
    python -m tegula run --target T prog.py ...  kernels default to target T; ``ascend-emu:a2a3`` /
                                                 ``ascend-emu:a5`` also stand in for the Ascend host
                                                 (:mod:`tegula.compat.npu_host`)

The alias (:func:`tegula.compat.alias.alias_tilelang`) is installed first, in this process only.
"""
from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from typing import Sequence

from tegula.compat.alias import alias_tilelang

USAGE = ("usage: python -m tegula run [--target TARGET] PROG.py [ARGS...] | "
         "python -m tegula run [--target TARGET] -m MODULE [ARGS...]")


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _find_module(name: str) -> object:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a parent package that does not exist, or an empty name
        return None


def _take_target(argv: list) -> tuple:
    """``--target T`` / ``--target=T`` before the program: (T or None, the rest)."""
    if argv[:1] == ["--target"] and len(argv) >= 2:
        return argv[1], argv[2:]
    if argv and argv[0].startswith("--target="):
        return argv[0].split("=", 1)[1], argv[1:]
    return None, argv


def main(argv: Sequence[str]) -> int:
    """Run a program or a module (``-m NAME``) with the alias; returns its exit status."""
    argv = list(argv)
    target, argv = _take_target(argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] == "-m" and len(argv) < 2:
        print(USAGE, file=sys.stderr if not argv or argv[0] == "-m" else sys.stdout)
        return 2 if not argv or argv[0] == "-m" else 0
    alias_tilelang()
    if target is not None:
        from tegula.compat.npu_host import use_target

        status = use_target(target)
        if status:
            return status
    try:
        if argv[0] == "-m":
            module = argv[1]
            sys.argv = [module] + argv[2:]
            sys.path.insert(0, os.getcwd())
            if _find_module(module) is None:
                print(f"python -m tegula run: no module named {module!r}", file=sys.stderr)
                return 2
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            path = argv[0]
            if not os.path.exists(path):
                print(f"python -m tegula run: no such file: {path}", file=sys.stderr)
                return 2
            sys.argv = argv
            sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
            # __file__ is absolute, as python sets it for a script (3.9+)
            runpy.run_path(os.path.abspath(path), run_name="__main__")
    except SystemExit as e:
        return _exit_code(e)
    return 0
