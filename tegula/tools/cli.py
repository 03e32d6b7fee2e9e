"""The command line: ``python -m tegula <command> ...``.

Each command is a :class:`Command`: a name, a one-line help, a function that adds its arguments
to a subparser, and a function that runs it and returns the exit code. To add one, write the two
functions and append it to ``COMMANDS``.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import tegula
from tegula.errors import ArgumentError


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="auto",
                   help="where to run: 'auto' (CUDA when a GPU is present, else cpu), 'cpu' (the "
                        "interpreter), 'cuda', 'cuda:sm_90a' (default: %(default)s)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the random inputs (default: fresh inputs every run)")


def _demo(args: argparse.Namespace) -> int:
    from tegula.errors import TegulaError
    from tegula.target import parse_target
    from tegula.tools import demo

    try:
        parse_target(args.target)
    except TegulaError as e:
        print(f"python -m tegula demo: {e}", file=sys.stderr)
        return 1
    return demo.run(args.target, args.seed)


def _kernel_options(p: argparse.ArgumentParser, target_help: str = "") -> None:
    p.add_argument("--kernel", metavar="NAME", default=None,
                   help="which kernel of FILE (needed when it defines several; FILE:NAME says the same)")
    p.add_argument("--set", metavar="K=V", action="append", default=[], dest="sets",
                   help="a factory argument, e.g. --set M=1024 --set block_M=64 (repeatable; values "
                        "are Python literals, else strings)")
    p.add_argument("--args", metavar="ARG", nargs="+", default=[], dest="args",
                   help="the factory's arguments: positional values, then NAME=VALUE "
                        "(e.g. --args 1024 1024 1024 block_M=64)")
    p.add_argument("--config", metavar="K=V", action="append", default=[], dest="configs",
                   help="a pass config, e.g. --config tegula.disable_barrier_insertion=True (repeatable)")
    p.add_argument("--target", default="cuda:sm_90a",
                   help=target_help or "pipeline to run: 'cuda:sm_80', 'cuda:sm_90a', 'cuda-emu' (no GPU "
                        "needed), 'ascend-emu:a2a3', or 'cpu' (the tile IR only) (default: %(default)s)")


def _trace_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE.py",
                   help="a Python file defining a @T.prim_func, a @tegula.jit function or a factory")
    _kernel_options(p)
    p.add_argument("--html", metavar="OUT.html", default=None,
                   help="write one self-contained HTML page (passes in order, the IR after each with "
                        "its changes highlighted, a table of pass times) instead of printing")
    p.add_argument("--times-only", action="store_true", help="print the table of pass times only")


def _diff_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("specs", metavar="A B | FILE PassA PassB", nargs="+",
                   help="two kernels FILE[:KERNEL] (the same one twice with --target-b, --set-b or "
                        "--config-b for two targets or variants), diffed pass by pass and then "
                        "their generated source; or one FILE and two points of its pipeline "
                        "(a pass name, 'input' or a step number, -1: the last)")
    _kernel_options(p)
    p.add_argument("--target-b", default=None, help="B's target (default: --target)")
    p.add_argument("--set-b", metavar="K=V", action="append", default=[], dest="sets_b",
                   help="B's factory arguments on top of A's (e.g. --set-b transpose_B=True)")
    p.add_argument("--config-b", metavar="K=V", action="append", default=[], dest="configs_b",
                   help="B's pass configs on top of A's")
    p.add_argument("--context", type=int, default=3, help="lines of context (default: %(default)s)")


def _source_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="FILE[:KERNEL]",
                   help="a Python file defining a @T.prim_func, a @tegula.jit function or a factory, "
                        "with the kernel's name after a colon when it defines several")
    _kernel_options(p, "what to generate: 'cuda:sm_80' / 'cuda:sm_90a' (CUDA C++, no compiler "
                       "needed), 'ascendc:a2a3' (Ascend C), 'ascend-pto:a2a3' (PTO C++), 'cuda-emu' / "
                       "'ascend-emu:a2a3' (the lowered IR they run), 'cpu' (the tile IR) "
                       "(default: %(default)s)")
    p.add_argument("--pass", metavar="NAME", default=None, dest="after",
                   help="print the IR right after this pass instead (a name as 'trace' prints it, "
                        "'input' or a step number)")


def _load(args: argparse.Namespace, spec: str, sets: Sequence[str] = ()) -> object:
    """The PrimFunc a command names: FILE[:KERNEL] (or --kernel), --args and --set (+ ``sets``)."""
    from tegula.tools.trace import load_kernel, parse_args, parse_sets, split_spec

    path, name = split_spec(spec)
    pos, kw = parse_args(args.args)
    kw.update(parse_sets(args.sets))
    kw.update(parse_sets(sets))
    return load_kernel(path, name or args.kernel, kw, pos)


def _configs(items: Sequence[str]) -> Optional[dict]:
    from tegula.tools.trace import parse_sets

    return parse_sets(items) or None


def _traced(args: argparse.Namespace, command: str) -> Optional[object]:
    from tegula.errors import TegulaError
    from tegula.tools.trace import trace

    try:
        return trace(_load(args, args.file), target=args.target, pass_configs=_configs(args.configs))
    except TegulaError as e:
        print(f"python -m tegula {command}: {e}", file=sys.stderr)
        return None


def _source(args: argparse.Namespace) -> int:
    from tegula.errors import TegulaError
    from tegula.tools.source import kernel_source

    try:
        func = _load(args, args.spec)
        print(kernel_source(func, target=args.target, pass_configs=_configs(args.configs),
                            after=None if args.after is None else _point(args.after)), end="")
    except TegulaError as e:
        print(f"python -m tegula source: {e}", file=sys.stderr)
        return 1
    return 0


def _trace(args: argparse.Namespace) -> int:
    tr = _traced(args, "trace")
    if tr is None:
        return 1
    if args.html:
        with open(args.html, "w") as f:
            f.write(tr.to_html())
        print(tr.timings())
        print(f"wrote {args.html}")
    else:
        print(tr.timings() if args.times_only else tr.format())
    if tr.error is not None:
        print(f"python -m tegula trace: the pipeline stopped: {tr.error}", file=sys.stderr)
    for p in tr.problems:
        print(f"verifier: {p}", file=sys.stderr)
    return 1 if tr.error is not None or tr.problems else 0


def _point(text: str) -> object:
    try:
        return int(text)
    except ValueError:
        return text


def _diff(args: argparse.Namespace) -> int:
    from tegula.errors import ConfigError, TegulaError
    from tegula.tools.diff import diff

    try:
        if len(args.specs) == 2 or (len(args.specs) == 1 and (args.target_b or args.sets_b or args.configs_b)):
            return _diff_two(args)
        if len(args.specs) != 3:
            raise ConfigError(f"diff takes two kernels (A B) or a file and two passes, got {len(args.specs)} "
                              "arguments", hint="python -m tegula diff gemm.py:matmul gemm.py:matmul "
                                                "--target cuda:sm_80 --target-b cuda:sm_90a")
    except TegulaError as e:
        print(f"python -m tegula diff: {e}", file=sys.stderr)
        return 1
    args.file, a, b = args.specs
    tr = _traced(args, "diff")
    if tr is None:
        return 1
    try:
        print(diff(tr, _point(a), _point(b), context=args.context), end="")
    except TegulaError as e:
        print(f"python -m tegula diff: {e}", file=sys.stderr)
        return 1
    return 0


def _diff_two(args: argparse.Namespace) -> int:
    """Two kernels, two targets or two variants, pass by pass, then their generated source."""
    from tegula.tools.diff import compare
    from tegula.tools.source import kernel_source
    from tegula.tools.trace import trace

    spec_a, spec_b = (args.specs * 2)[:2]
    target_b = args.target_b or args.target
    cfg_a = _configs(args.configs)
    cfg_b = _configs(args.configs + args.configs_b)
    fa, fb = _load(args, spec_a), _load(args, spec_b, args.sets_b)
    ta = trace(fa, target=args.target, pass_configs=cfg_a)
    tb = trace(fb, target=target_b, pass_configs=cfg_b)
    label_a, label_b = (spec_a, spec_b) if spec_a != spec_b else ("A", "B")
    if args.target != target_b:
        label_a, label_b = f"{label_a} {args.target}", f"{label_b} {target_b}"
    sources = None
    if ta.error is None and tb.error is None:
        sources = (kernel_source(fa, target=args.target, pass_configs=cfg_a),
                   kernel_source(fb, target=target_b, pass_configs=cfg_b))
    print(compare(ta, tb, label_a, label_b, context=args.context, sources=sources), end="")
    return 1 if ta.error is not None or tb.error is not None else 0


def _cache_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("info", "verify", "clear"),
                   help="info: where the cache is, its entries and size; verify: check every entry "
                        "(content hashes, key, format) and remove the bad ones and what crashed "
                        "writers left; clear: remove every entry")
    p.add_argument("--keep", action="store_true", help="with verify: report bad entries, remove nothing")


def _cache(args: argparse.Namespace) -> int:
    from tegula.backends.cuda import cache

    root = cache.cache_dir()
    if args.action == "clear":
        before = cache.verify(remove=False)
        cache.clear()
        print(f"removed {before.entries} entries ({before.bytes / 1e6:.1f} MB) from {root}")
        return 0
    report = cache.verify(remove=args.action == "verify" and not args.keep)
    print(f"cache directory: {root}" + ("" if os.path.isdir(root) else " (absent)"))
    print(f"entries: {report.entries} ({report.bytes / 1e6:.1f} MB), sound: {report.good}, "
          f"bad: {len(report.bad)}, leftovers of unfinished writes: {report.leftovers}")
    if args.action == "info":
        return 0
    verb = "kept" if args.keep else "removed"
    for key, why in report.bad:
        print(f"bad entry {key} ({why}): {verb}")
    return 1 if report.bad else 0


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", metavar="MODULE", dest="module", default=None,
                   help="run a module as __main__ instead of a file (e.g. -m pytest)")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="PROG.py [ARGS...]",
                   help="the program and its arguments")


def _run(args: argparse.Namespace) -> int:
    # `python -m tegula run ...` goes to tegula.compat.run before this parser (tegula/__main__.py)
    raise ArgumentError("the run command runs TileLang programs from the command line",
                        hint="python -m tegula run PROG.py [ARGS...]")


COMMANDS: list[Command] = [
    Command("demo", "compile and run a GEMM, a row softmax and a flash-attention forward",
            "Builds three small kernels for the target, runs each on random inputs, checks it "
            "against a float64 numpy reference and prints a table: kernel, target, shape, max "
            "error, status, time (ms). Exit code 0 when all pass, 1 otherwise.",
            _demo_arguments, _demo),
    Command("trace", "print the IR after every pass of the pipeline, or write it as an HTML page",
            "Loads FILE.py, builds its kernel (factory arguments from --set) and runs the target's "
            "pipeline, recording the IR after every pass, the time it took and what the IR "
            "verifier finds. Prints each step and a table of pass times, or with --html writes one "
            "self-contained page. Exit code 1 when a pass fails or the verifier finds a problem.",
            _trace_arguments, _trace),
    Command("source", "print a kernel's generated source (CUDA C++, Ascend C, PTO) or its IR after a pass",
            "Loads FILE.py, builds the kernel (FILE:KERNEL picks one; factory arguments from --args "
            "and --set), lowers it for --target and prints the generated source: CUDA C++ for "
            "'cuda:ARCH' (no GPU or compiler needed), Ascend C for 'ascendc:a2a3', PTO C++ for "
            "'ascend-pto:ARCH', the lowered IR for the emulators, the tile IR for 'cpu'. With "
            "--pass NAME, the IR right after that pass. Exit code 1 on an error.",
            _source_arguments, _source),
    Command("diff", "diff two kernels (or targets, or variants) pass by pass, or one kernel between two passes",
            "With two kernels A and B (FILE[:KERNEL] each; one FILE twice with --target-b, --set-b "
            "or --config-b for two targets or variants of it): both are lowered, and for each pass "
            "(paired by name) the IR after it is diffed, then the generated source. With FILE PassA "
            "PassB: like 'trace', then the unified diff of the IR from PassA to PassB (names as "
            "'trace' prints them, case-insensitive; 'input' is the tile IR; numbers are steps).",
            _diff_arguments, _diff),
    Command("cache", "inspect, check or empty the disk cache of compiled kernels",
            "'info' prints the cache directory (TEGULA_CACHE_DIR), its number of entries and size; "
            "'verify' checks every entry as a load does (content hashes of source, binary and "
            "metadata, key, format), removes the bad ones and the leftovers of crashed writers, and "
            "exits 1 when it found a bad entry; 'clear' removes everything.",
            _cache_arguments, _cache),
    Command("run", "run a TileLang program unchanged, with `import tilelang` meaning tegula",
            "Runs PROG.py (or, with -m, a module such as pytest) as __main__ in this process after "
            "making `import tilelang` and every `tilelang.X` resolve to tegula (and `tvm` to "
            "tegula's small compatibility namespace when no TVM is installed). The exit code is "
            "the program's.", _run_arguments, _run),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tegula",
        description="tegula: a tile-level GPU kernel language and compiler in pure Python.",
        epilog="Run 'python -m tegula <command> --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"tegula {tegula.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>", title="commands")
    for c in COMMANDS:
        p = sub.add_parser(c.name, help=c.help, description=c.description)
        c.add_arguments(p)
        p.set_defaults(run=c.run)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the command, return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return args.run(args)
