"""``tvm.testing``: ``requires_package(*names)``, a test decorator that skips when one of the
packages cannot be imported."""
from __future__ import annotations

import importlib.util
from typing import Any, Callable


def requires_package(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Skip the decorated test (pytest) unless every package in ``names`` is importable."""
    import pytest

    missing = [n for n in names if importlib.util.find_spec(n) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs the package(s) {', '.join(missing)}")
