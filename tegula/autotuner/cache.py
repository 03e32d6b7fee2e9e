"""The disk cache of autotuning results: the best configuration per (function, arguments, device).

Entries go through :mod:`tegula.backends.cuda.cache` (one directory per key, written atomically,
content hashes checked on load: a bad entry is a miss, removed, and the next result replaces it);
the result is JSON in the entry's ``meta.json`` (no source, no binary, no pickle). A key covers the
factory's source, the non-tuned arguments, the list of configurations, the target and device, and
tegula's version: change any of them and the next call tunes again.
"""
from __future__ import annotations

import inspect
import json
from typing import Any, Optional

from tegula import config


def _source_of(func: Any) -> str:
    try:
        return inspect.getsource(func)
    except (OSError, TypeError):  # defined interactively: the name has to do
        return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def device_name(target: Any) -> str:
    """What the timing depends on: the GPU's name for a CUDA target when one is present (else the
    arch), the machine for the interpreter."""
    if getattr(target, "kind", None) == "cuda":
        try:
            import torch

            if torch.cuda.is_available():
                return f"{torch.cuda.get_device_name()} ({target})"
        except ImportError:
            pass
        return str(target)
    import platform

    return f"{target} {platform.machine()} {platform.processor()}".strip()


def result_key(func: Any, args: dict, configs: list, target: Any) -> str:
    """The cache key of one tuning problem."""
    from tegula.backends.cuda.cache import cache_key

    name = f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', '?')}"
    return cache_key("autotune\n" + name + "\n" + _source_of(func), device_name(target),
                     [repr(sorted(args.items())), repr(configs)])


def load(key: str) -> Optional[dict]:
    """The stored result for ``key`` (``{"index", "config", "latency", ...}``) or None."""
    if config.get().disable_cache:
        return None
    from tegula.backends.cuda import cache

    hit = cache.load(key)
    if hit is None:
        return None
    result = hit[2].get("autotune")
    return result if isinstance(result, dict) and isinstance(result.get("index"), int) else None


def store(key: str, result: dict) -> None:
    """Keep ``result`` (JSON-serializable; values that are not are written as their repr)."""
    if config.get().disable_cache:
        return
    from tegula.backends.cuda import cache

    clean = json.loads(json.dumps(result, default=repr))
    # replace=True: a stored choice that no longer builds was tuned again and is replaced; an
    # unusable cache directory warns once and the tuning goes on without it
    cache.store(key, "", b"", {"autotune": clean}, replace=True)
