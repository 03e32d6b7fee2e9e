"""Disk cache of compiled kernels (and of autotuning results), that a bad disk cannot poison.

An entry is a directory ``<cache dir>/<key[:2]>/<key>/`` holding ``kernel.cu`` (the source),
``kernel.cubin`` and ``meta.json``. ``meta.json`` records the key, the entry format, the sha256 of
each of the two files and a sha256 of itself (over its canonical JSON without that field).
Entries are plain data (no pickle): loading one never runs code.

- **Load** checks everything: the JSON and its own digest, the key, the format, each file's
  hash. An entry failing any check is a miss (never served, never an exception) and is removed.
- **Store** writes a temporary directory ``.tmp-...`` next to the final place and renames it into
  place with ``os.replace``, so readers see a whole entry or none. A bad entry (or whatever else
  occupies the name) is first renamed aside (``.trash-...``) and deleted, so a rebuild always
  replaces it; a valid entry is kept unless ``replace=True``. Temporary directories left by
  writers that died (their process is gone, or they are over an hour old) are removed.
- **An unusable cache directory** (not a directory, not writable, full) never fails a build:
  tegula warns once (:class:`CacheWarning`) and goes on without the cache.

The key is the sha256 of the source, the arch, the compiler options and tegula's version; see
:func:`cache_key`. The directory is ``TEGULA_CACHE_DIR`` (default ``~/.cache/tegula``);
``python -m tegula cache info | verify | clear`` inspects, checks and empties it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tegula import config
from tegula.version import __version__

_SOURCE = "kernel.cu"
_CUBIN = "kernel.cubin"
_META = "meta.json"
_FILES = (_SOURCE, _CUBIN)
_FORMAT = 2  # bump when the entry layout changes
_TMP = ".tmp-"
_TRASH = ".trash-"
_STALE_SECONDS = 3600.0  # a temporary directory this old belongs to no live writer
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


class CacheWarning(UserWarning):
    """The cache directory cannot be used; tegula builds without it."""


def cache_dir() -> str:
    """The cache's root directory (from :mod:`tegula.config`)."""
    return config.settings.cache_dir


def cache_key(source: str, arch: str, options: Sequence[str] = (), version: Optional[str] = None) -> str:
    """sha256 hex digest of (source, arch, options, tegula version)."""
    h = hashlib.sha256()
    fields = [f"format={_FORMAT}", source, arch, *options, "", version or __version__]
    for field_ in fields:
        data = field_.encode()
        h.update(len(data).to_bytes(8, "little"))  # length-prefixed: no ambiguity between fields
        h.update(data)
    return h.hexdigest()


def _is_key(name: str) -> bool:
    return len(name) >= 8 and all(c in "0123456789abcdef" for c in name)


def _entry_dir(key: str) -> str:
    if not _is_key(key):
        raise ValueError(f"cache key must be a hex digest, got {key!r}")
    return os.path.join(cache_dir(), key[:2], key)


# -- an unusable directory: warn once, build without the cache ------------------------------------
_warned: set = set()


def _unusable(root: str, why: str) -> None:
    if root not in _warned:
        _warned.add(root)
        warnings.warn(f"tegula: the kernel cache directory {root!r} cannot be used ({why}); building "
                      "without the cache (set TEGULA_CACHE_DIR to a writable directory, or "
                      "TEGULA_DISABLE_CACHE=1)", CacheWarning, stacklevel=3)


def _readable_root() -> Optional[str]:
    root = cache_dir()
    if os.path.lexists(root) and not os.path.isdir(root):
        _unusable(root, "it is not a directory")
        return None
    return root


# -- checking an entry --------------------------------------------------------------------------
def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(record: dict) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


def _seal(record: dict) -> dict:
    return dict(record, digest=_sha(_canonical(record)))


def check_entry(entry: str, key: str) -> Tuple[Optional[Tuple[str, bytes, Dict[str, Any]]], str]:
    """((source, cubin, meta), "") for a sound entry, else (None, what is wrong with it)."""
    try:
        with open(os.path.join(entry, _META), "rb") as f:
            record = json.loads(f.read().decode())
        if not isinstance(record, dict):
            return None, "meta.json is not an object"
        claimed = record.pop("digest", None)
        if claimed != _sha(_canonical(record)):
            return None, "meta.json does not match its digest"
        if record.get("key") != key:
            return None, "the entry belongs to another key"
        if record.get("format") != _FORMAT:
            return None, f"entry format {record.get('format')!r}, expected {_FORMAT}"
        hashes, meta = record.get("files"), record.get("meta")
        if not isinstance(hashes, dict) or not isinstance(meta, dict):
            return None, "meta.json lacks the file hashes or the metadata"
        data = {}
        for name in _FILES:
            with open(os.path.join(entry, name), "rb") as f:
                data[name] = f.read()
            if hashes.get(name) != _sha(data[name]):
                return None, f"{name} does not match its hash"
        source = data[_SOURCE].decode()
    except FileNotFoundError as e:
        return None, f"{os.path.basename(e.filename or '?')} is missing"
    except (OSError, ValueError) as e:  # unreadable, not a directory, bad JSON or UTF-8
        return None, f"unreadable: {e.__class__.__name__}: {e}"
    meta = dict(meta, key=key, format=_FORMAT, tegula_version=record.get("tegula_version"))
    return (source, data[_CUBIN], meta), ""


def load(key: str) -> Optional[Tuple[str, bytes, Dict[str, Any]]]:
    """(source, cubin, meta) stored under ``key``, or None when absent or bad (a bad entry is
    removed, so that the next store replaces it)."""
    root = _readable_root()
    entry = _entry_dir(key)
    if root is None or not os.path.lexists(entry):
        return None
    hit, _ = check_entry(entry, key)
    if hit is None:
        _discard(entry)
    return hit


# -- writing ------------------------------------------------------------------------------------
def _discard(path: str) -> None:
    """Remove ``path`` (an entry, a file, anything): first renamed aside in one step, so nobody
    sees it half deleted, then deleted. Never raises."""
    parent, name = os.path.split(path)
    trash = os.path.join(parent, f"{_TRASH}{name[:16]}-{_HOST}-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        os.replace(path, trash)
    except FileNotFoundError:
        return
    except OSError:
        trash = path
    _remove(trash)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


def _writer_gone(name: str, path: str) -> bool:
    """True when the temporary directory ``name`` belongs to no live writer."""
    parts = name.split("-")
    # .tmp-<key16>-<host>-<pid>-<random>
    if len(parts) == 5 and parts[2] == _HOST and parts[3].isdigit():
        try:
            os.kill(int(parts[3]), 0)
        except ProcessLookupError:
            return True
        except OSError:
            pass
    try:
        return time.time() - os.lstat(path).st_mtime > _STALE_SECONDS
    except OSError:
        return False


def sweep(folder: str) -> int:
    """Remove what dead writers left in ``folder`` (one ``<key[:2]>`` directory): temporary and
    trash directories. Returns how many were removed."""
    removed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        path = os.path.join(folder, name)
        if name.startswith(_TRASH) or (name.startswith(".") and _writer_gone(name, path)):
            _remove(path)
            removed += 1
    return removed


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def store(key: str, source: str, cubin: bytes, meta: Optional[Dict[str, Any]] = None,
          replace: bool = False) -> Optional[str]:
    """Write an entry atomically; return its directory, or None when the cache directory cannot
    be used (after one :class:`CacheWarning`). ``meta`` must be JSON-serializable.

    A sound entry already stored under ``key`` (a concurrent writer's: same key, same content) is
    kept unless ``replace``; anything else there is replaced.
    """
    root = _readable_root()
    if root is None:
        return None
    entry = _entry_dir(key)
    parent = os.path.dirname(entry)
    try:
        if os.path.lexists(parent) and not os.path.isdir(parent):
            _discard(parent)  # a stray file where a folder of entries belongs
        os.makedirs(parent, exist_ok=True)
        sweep(parent)
        tmp = tempfile.mkdtemp(prefix=f"{_TMP}{key[:16]}-{_HOST}-{os.getpid()}-", dir=parent)
    except OSError as e:
        _unusable(root, f"{e.__class__.__name__}: {e.strerror or e}")
        return None
    try:
        src = source.encode()
        record = {"format": _FORMAT, "key": key, "tegula_version": __version__,
                  "files": {_SOURCE: _sha(src), _CUBIN: _sha(cubin)}, "meta": dict(meta or {})}
        _write(os.path.join(tmp, _SOURCE), src)
        _write(os.path.join(tmp, _CUBIN), cubin)
        _write(os.path.join(tmp, _META), json.dumps(_seal(record), indent=1, sort_keys=True).encode())
        for _ in range(8):
            try:
                os.replace(tmp, entry)
                return entry
            except OSError:
                if not os.path.lexists(entry):
                    raise
            if not replace and check_entry(entry, key)[0] is not None:
                return entry
            _discard(entry)
        return entry  # other writers kept winning the race: their entry is as good as ours
    except OSError as e:
        _unusable(root, f"{e.__class__.__name__}: {e.strerror or e}")
        return None
    finally:
        if os.path.lexists(tmp):
            _remove(tmp)


# -- the whole cache: info, verify, clear ----------------------------------------------------------
@dataclass
class Report:
    """What :func:`verify` found (and removed)."""

    root: str
    entries: int = 0
    good: int = 0
    bytes: int = 0
    bad: List[Tuple[str, str]] = field(default_factory=list)  # (key, why)
    leftovers: int = 0


def _entries(root: str) -> List[Tuple[str, str]]:
    out = []
    try:
        folders = sorted(os.listdir(root))
    except OSError:
        return out
    for folder in folders:
        path = os.path.join(root, folder)
        if len(folder) == 2 and _is_key(folder + "000000") and os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                if not name.startswith("."):
                    out.append((name, os.path.join(path, name)))
    return out


def _size(path: str) -> int:
    if not os.path.isdir(path):
        return os.lstat(path).st_size
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(path) for f in fs)


def verify(remove: bool = True) -> Report:
    """Check every entry of the cache; with ``remove``, delete the bad ones and the leftovers of
    dead writers."""
    root = cache_dir()
    report = Report(root)
    for key, path in _entries(root):
        report.entries += 1
        report.bytes += _size(path)
        hit, why = check_entry(path, key) if _is_key(key) else (None, "not an entry name")
        if hit is None:
            report.bad.append((key, why))
            if remove:
                _discard(path)
        else:
            report.good += 1
    try:
        folders = [os.path.join(root, f) for f in os.listdir(root)]
    except OSError:
        folders = []
    for folder in folders:
        if os.path.isdir(folder):
            if remove:
                report.leftovers += sweep(folder)
            else:
                report.leftovers += sum(1 for n in os.listdir(folder) if n.startswith("."))
    return report


def clear() -> None:
    """Remove every entry of the cache directory."""
    root = cache_dir()
    if os.path.isdir(root):
        for _, path in _entries(root):
            _discard(path)
        shutil.rmtree(root, ignore_errors=True)
