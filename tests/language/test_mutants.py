"""Mutation tests: random edits of good kernels never raise anything but a tegula error, and
``cpu`` and ``cuda-emu`` agree on every mutant both of them run.

The bounded test runs in CI: hypothesis draws 40 mutants, the same ones every run (their inputs
are fresh). ``-m slow`` runs 1000 fixed seeds and prints the tally docs/reliability.md quotes.
"""
from __future__ import annotations

import collections
import random
import signal

import pytest

pytest.importorskip("hypothesis", reason="needs hypothesis (pip install -e '.[test]')")

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from mutants import SEEDS, agree, mutant, run_everywhere  # noqa: E402


LIMIT_S = 15  # a mutant that takes longer (a huge grid on the emulator) is not judged


class _TooSlow(Exception):
    pass


def _alarm(signum, frame):
    raise _TooSlow()


def _check(seed: int, folder: str) -> str:
    """Build and run one mutant; returns how it ended (raises on a non-tegula exception or on a
    disagreement between the targets)."""
    rnd = random.Random(seed)
    name = rnd.choice(sorted(SEEDS))
    source = mutant(name, rnd, rnd.randint(1, 3))
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, LIMIT_S)
    try:
        out = run_everywhere(source, folder, f"mutant_{seed}")
    except _TooSlow:
        return f"over {LIMIT_S} s, not judged"
    except Exception as e:  # anything but a TegulaError is a bug in tegula
        raise AssertionError(f"mutant {seed} of '{name}' raised {type(e).__name__}: {e}\n{source}") from e
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if not out:
        return "not callable"
    cpu, emu = out["cpu"], out["cuda-emu"]
    if cpu.outputs is not None and emu.outputs is not None:
        assert agree(cpu.outputs, emu.outputs), f"cpu and cuda-emu disagree on mutant {seed}:\n{source}"
        return "both ran, same results"
    if cpu.error is not None and emu.error is not None:
        return "tegula error on both"
    return f"tegula error on {'cpu' if cpu.error is not None else 'cuda-emu'} only"


@settings(max_examples=40, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**31))
def test_mutants_raise_only_tegula_errors_and_targets_agree(seed, tmp_path):
    _check(seed, str(tmp_path))


@pytest.mark.slow
def test_1000_mutants(tmp_path, capsys):
    tally = collections.Counter(_check(seed, str(tmp_path)) for seed in range(1000))
    with capsys.disabled():
        print("\n1000 mutants:", dict(sorted(tally.items())))
    assert sum(tally.values()) == 1000
