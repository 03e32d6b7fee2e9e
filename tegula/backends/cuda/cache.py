"""Disk cache of compiled kernels.

An entry is a directory ``<cache dir>/<key[:2]>/<key>/`` holding ``kernel.cu`` (the source),
``kernel.cubin`` and ``meta.json``. It is written to a temporary directory next to its final
place and renamed into place with ``os.replace``, so readers see a whole entry or none. Entries
are plain data (no pickle): loading one never runs code.

The key is the sha256 of the source, the arch, the compiler options and tegula's version; see
:func:`cache_key`. The directory is ``TEGULA_CACHE_DIR`` (default ``~/.cache/tegula``).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from typing import Any, Dict, Optional, Sequence, Tuple

import tegula
from tegula import config

_SOURCE = "kernel.cu"
_CUBIN = "kernel.cubin"
_META = "meta.json"
_FORMAT = 1  # bump when the entry layout changes


def cache_dir() -> str:
    """The cache's root directory (from :mod:`tegula.config`)."""
    return config.settings.cache_dir


def cache_key(source: str, arch: str, options: Sequence[str] = (), version: Optional[str] = None) -> str:
    """sha256 hex digest of (source, arch, options, tegula version)."""
    h = hashlib.sha256()
    fields = [f"format={_FORMAT}", source, arch, *options, "", version or tegula.__version__]
    for field in fields:
        data = field.encode()
        h.update(len(data).to_bytes(8, "little"))  # length-prefixed: no ambiguity between fields
        h.update(data)
    return h.hexdigest()


def _entry_dir(key: str) -> str:
    if len(key) < 8 or not all(c in "0123456789abcdef" for c in key):
        raise ValueError(f"cache key must be a hex digest, got {key!r}")
    return os.path.join(cache_dir(), key[:2], key)


def load(key: str) -> Optional[Tuple[str, bytes, Dict[str, Any]]]:
    """(source, cubin, meta) stored under ``key``, or None when absent or unreadable."""
    entry = _entry_dir(key)
    try:
        with open(os.path.join(entry, _META)) as f:
            meta = json.load(f)
        with open(os.path.join(entry, _SOURCE)) as f:
            source = f.read()
        with open(os.path.join(entry, _CUBIN), "rb") as f:
            cubin = f.read()
    except (OSError, ValueError):  # missing, partially deleted, or corrupt: treat as a miss
        return None
    if not isinstance(meta, dict) or meta.get("key") != key:
        return None
    return source, cubin, meta


def store(key: str, source: str, cubin: bytes, meta: Optional[Dict[str, Any]] = None) -> str:
    """Write an entry atomically and return its directory. ``meta`` must be JSON-serializable.

    When another process stored the same key first, its entry is kept (same key, same content).
    """
    entry = _entry_dir(key)
    parent = os.path.dirname(entry)
    os.makedirs(parent, exist_ok=True)
    meta = dict(meta or {})
    meta.update(key=key, tegula_version=tegula.__version__, format=_FORMAT)
    tmp = tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=parent)
    try:
        with open(os.path.join(tmp, _SOURCE), "w") as f:
            f.write(source)
        with open(os.path.join(tmp, _CUBIN), "wb") as f:
            f.write(cubin)
        with open(os.path.join(tmp, _META), "w") as f:  # last: its presence marks a full entry
            json.dump(meta, f, indent=1, sort_keys=True)
        try:
            os.replace(tmp, entry)
        except OSError:
            # A non-empty directory is already there: a concurrent writer won the race.
            if load(key) is None:
                raise
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return entry


def clear() -> None:
    """Remove every entry of the cache directory."""
    shutil.rmtree(cache_dir(), ignore_errors=True)
