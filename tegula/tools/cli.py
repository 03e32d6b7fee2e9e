"""The command line: ``python -m tegula <command> ...``.

Each command is a :class:`Command`: a name, a one-line help, a function that adds its arguments
to a subparser, and a function that runs it and returns the exit code. To add one, write the two
functions and append it to ``COMMANDS``.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import tegula


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


COMMANDS: list[Command] = [
    Command("demo", "compile and run a GEMM, a row softmax and a flash-attention forward",
            "Builds three small kernels for the target, runs each on random inputs, checks it "
            "against a float64 numpy reference and prints a table: kernel, target, shape, max "
            "error, status, time (ms). Exit code 0 when all pass, 1 otherwise.",
            _demo_arguments, _demo),
    # later: "trace" (IR after every pass), "diff" (IR between two passes or two builds)
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
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return args.run(args)
