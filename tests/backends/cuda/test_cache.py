"""The disk cache under faults: no bad entry is ever served, none raises, none sticks.

Every fault kind in ``ENTRY_FAULTS`` is applied to a stored entry; the entry must load as a miss
(no exception), and the next store (the rebuild) must replace it so that it loads again. The
directory faults, crashes at each write step and concurrent writing processes follow. Nothing here
needs a GPU or a CUDA compiler: entries are synthetic, and the build-path tests use a fake compile.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import warnings

import pytest

import tegula
from tegula import config
from tegula.backends.cuda import cache, compiler

SOURCE = 'extern "C" __global__ void main_kernel(float* y) { y[threadIdx.x] = 1.0f; }\n'
CUBIN = b"\x7fELF" + bytes(range(256)) * 4
META = {"backend": "nvrtc", "kernels": [{"name": "main_kernel", "block": [128, 1, 1],
                                         "dynamic_smem_bytes": 0}], "log": ""}


@pytest.fixture
def tmp_cache(tmp_path):
    with config.override(cache_dir=str(tmp_path / "cache"), disable_cache=False):
        yield tmp_path / "cache"


def _stored(key_text: str = "k", source: str = SOURCE, cubin: bytes = CUBIN) -> tuple[str, str]:
    key = cache.cache_key(key_text, "sm_80")
    return key, cache.store(key, source, cubin, META)


def _path(entry: str, name: str) -> str:
    return os.path.join(entry, name)


def _rewrite(path: str, fn) -> None:
    with open(path, "rb") as f:
        data = f.read()
    os.remove(path)
    with open(path, "wb") as f:
        f.write(fn(data))


def _edit_meta(entry: str, fn) -> None:
    p = _path(entry, "meta.json")
    with open(p) as f:
        record = json.load(f)
    fn(record)
    with open(p, "w") as f:
        json.dump(record, f)


def _other_entry(entry: str, what: str) -> str:
    """Another kernel's entry with the same kernel symbol, stored next to ``entry``."""
    _, other = _stored("other", SOURCE.replace("1.0f", "2.0f"), CUBIN[::-1])
    return _path(other, what) if what else other


def _swap_from_other(name: str):
    def fault(entry: str) -> None:
        shutil.copyfile(_other_entry(entry, name), _path(entry, name))
    return fault


def _whole_other_entry(entry: str) -> None:
    other = _other_entry(entry, "")
    shutil.rmtree(entry)
    shutil.copytree(other, entry)


def _reseal_with(fn):
    """Edit the metadata and recompute meta.json's own digest: the file hashes still catch it."""
    def fault(entry: str) -> None:
        def edit(record):
            record.pop("digest")
            fn(record)
            record["digest"] = hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":"))
                                              .encode()).hexdigest()
        _edit_meta(entry, edit)
    return fault


def _replace_with_dir(name: str):
    def fault(entry: str) -> None:
        os.remove(_path(entry, name))
        os.makedirs(_path(entry, name))
    return fault


def _dangling_link(name: str):
    def fault(entry: str) -> None:
        os.remove(_path(entry, name))
        os.symlink(_path(entry, "nowhere"), _path(entry, name))
    return fault


def _entry_is_a_file(entry: str) -> None:
    shutil.rmtree(entry)
    with open(entry, "wb") as f:
        f.write(b"not an entry")


ENTRY_FAULTS = {}
for _name in ("kernel.cu", "kernel.cubin", "meta.json"):
    ENTRY_FAULTS.update({
        f"{_name} truncated to half": lambda e, n=_name: _rewrite(_path(e, n), lambda d: d[: len(d) // 2]),
        f"{_name} truncated to zero": lambda e, n=_name: _rewrite(_path(e, n), lambda d: b""),
        f"{_name} random bytes": lambda e, n=_name: _rewrite(_path(e, n), lambda d: os.urandom(len(d))),
        f"{_name} one bit flipped": lambda e, n=_name: _rewrite(
            _path(e, n), lambda d: d[:len(d) // 2] + bytes([d[len(d) // 2] ^ 1]) + d[len(d) // 2 + 1:]),
        f"{_name} missing": lambda e, n=_name: os.remove(_path(e, n)),
        f"{_name} is a directory": _replace_with_dir(_name),
        f"{_name} is a dangling link": _dangling_link(_name),
        f"{_name} from another kernel (same symbol)": _swap_from_other(_name),
    })
ENTRY_FAULTS.update({
    "whole entry of another kernel": _whole_other_entry,
    "cubin and meta.json of another kernel": lambda e: (_swap_from_other("kernel.cubin")(e),
                                                        _swap_from_other("meta.json")(e)),
    "metadata edited (block size)": lambda e: _edit_meta(
        e, lambda r: r["meta"]["kernels"][0].__setitem__("block", [1024, 1, 1])),
    "metadata edited, digest recomputed, cubin hash kept": _reseal_with(
        lambda r: r["files"].__setitem__("kernel.cubin", "0" * 64)),
    "metadata with the wrong kinds of values": _reseal_with(lambda r: r.__setitem__("meta", [1, 2])),
    "metadata of another format": _reseal_with(lambda r: r.__setitem__("format", 1)),
    "metadata of another key": _reseal_with(lambda r: r.__setitem__("key", "ab" * 32)),
    "metadata is a JSON list": lambda e: _rewrite(_path(e, "meta.json"), lambda d: b"[1, 2, 3]"),
    "metadata is not UTF-8": lambda e: _rewrite(_path(e, "meta.json"), lambda d: b"\xff\xfe{}"),
    "metadata without its digest": lambda e: _edit_meta(e, lambda r: r.pop("digest")),
    "entry is an empty directory": lambda e: (shutil.rmtree(e), os.makedirs(e)),
    "entry is a regular file": _entry_is_a_file,
    "entry is a dangling link": lambda e: (shutil.rmtree(e), os.symlink(e + "-gone", e)),
})


def test_at_least_33_fault_kinds():
    assert len(ENTRY_FAULTS) >= 33


@pytest.mark.parametrize("fault", sorted(ENTRY_FAULTS))
def test_a_faulty_entry_is_a_miss_and_the_rebuild_replaces_it(tmp_cache, fault):
    key, entry = _stored()
    assert cache.load(key) is not None
    ENTRY_FAULTS[fault](entry)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a bad entry is quiet: no warning, no exception
        assert cache.load(key) is None
        assert cache.load(key) is None  # and stays a miss
        assert cache.store(key, SOURCE, CUBIN, META) == entry
    source, cubin, meta = cache.load(key)
    assert (source, cubin, meta["kernels"]) == (SOURCE, CUBIN, META["kernels"])
    assert not [n for n in os.listdir(os.path.dirname(entry)) if n.startswith(".")]  # no litter


@pytest.mark.parametrize("fault", sorted(ENTRY_FAULTS))
def test_verify_finds_and_removes_each_fault(tmp_cache, fault):
    key, entry = _stored()
    ENTRY_FAULTS[fault](entry)
    report = cache.verify()
    assert [k for k, _ in report.bad] == [key] and report.good == report.entries - 1
    assert cache.verify().bad == []
    assert cache.load(key) is None


def test_roundtrip_records_hashes(tmp_cache):
    key, entry = _stored()
    assert sorted(os.listdir(entry)) == ["kernel.cu", "kernel.cubin", "meta.json"]
    with open(_path(entry, "meta.json")) as f:
        record = json.load(f)
    assert record["files"]["kernel.cubin"] == hashlib.sha256(CUBIN).hexdigest()
    assert record["files"]["kernel.cu"] == hashlib.sha256(SOURCE.encode()).hexdigest()
    source, cubin, meta = cache.load(key)
    assert (source, cubin, meta["key"], meta["tegula_version"]) == (SOURCE, CUBIN, key, tegula.__version__)


def test_a_sound_entry_is_kept_unless_replaced(tmp_cache):
    key, entry = _stored()
    cache.store(key, SOURCE, b"other bytes", META)
    assert cache.load(key)[1] == CUBIN
    cache.store(key, SOURCE, b"other bytes", META, replace=True)
    assert cache.load(key)[1] == b"other bytes"


# -- the cache directory itself -----------------------------------------------------------------
def _one_warning(record) -> str:
    msgs = [str(w.message) for w in record if issubclass(w.category, cache.CacheWarning)]
    assert len(msgs) == 1, msgs
    return msgs[0]


def _fake_compiler(monkeypatch) -> list:
    """Replace NVRTC by a fake that returns a cubin derived from the source; returns the list of
    sources it compiled."""
    compiled = []

    def fake_nvrtc(source, arch, opts, name):
        compiled.append(source)
        return b"FAKE" + hashlib.sha256(source.encode()).digest(), None, ""

    monkeypatch.setattr(compiler, "_choose_backend", lambda: "nvrtc")
    monkeypatch.setattr(compiler, "_compile_nvrtc", fake_nvrtc)
    return compiled


def _build_twice_with_fake_compile(monkeypatch) -> list:
    compiled = _fake_compiler(monkeypatch)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        results = [compiler.compile_cuda(SOURCE, "sm_80", use_cache=True) for _ in range(2)]
    assert [r.cubin for r in results] == [b"FAKE" + hashlib.sha256(SOURCE.encode()).digest()] * 2
    return record if compiled else []


def test_cache_dir_that_is_a_file_builds_without_cache_with_one_warning(tmp_path, monkeypatch):
    path = tmp_path / "a-file"
    path.write_text("not a folder")
    cache._warned.clear()
    with config.override(cache_dir=str(path), disable_cache=False):
        record = _build_twice_with_fake_compile(monkeypatch)
    assert "is not a directory" in _one_warning(record) and str(path) in _one_warning(record)
    assert path.read_text() == "not a folder"


def test_cache_dir_below_a_file_builds_without_cache_with_one_warning(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("x")
    cache._warned.clear()
    with config.override(cache_dir=str(tmp_path / "a-file" / "cache"), disable_cache=False):
        record = _build_twice_with_fake_compile(monkeypatch)
    assert "NotADirectoryError" in _one_warning(record)


def test_unwritable_cache_dir_builds_without_cache_with_one_warning(tmp_path, monkeypatch):
    root = tmp_path / "ro"
    root.mkdir()
    if os.geteuid() == 0:  # root writes anywhere: the operating system's refusal is simulated
        def refuse(*a, **kw):
            raise PermissionError(13, "Permission denied")
        monkeypatch.setattr(cache.tempfile, "mkdtemp", refuse)
        monkeypatch.setattr(cache.os, "makedirs", refuse)
    else:
        root.chmod(0o500)
    cache._warned.clear()
    try:
        with config.override(cache_dir=str(root), disable_cache=False):
            record = _build_twice_with_fake_compile(monkeypatch)
    finally:
        root.chmod(0o700)
    assert "Permission" in _one_warning(record)


def test_a_full_disk_while_writing_builds_without_cache(tmp_cache, monkeypatch):
    def full(path, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(cache, "_write", full)
    cache._warned.clear()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        key = cache.cache_key("k", "sm_80")
        assert cache.store(key, SOURCE, CUBIN, META) is None
    assert "No space left" in _one_warning(record)
    assert cache.load(key) is None
    assert [n for n in os.listdir(os.path.join(tmp_cache, key[:2]))] == []  # the temporary is gone


def test_stray_file_where_a_folder_of_entries_belongs(tmp_cache):
    key = cache.cache_key("k", "sm_80")
    os.makedirs(tmp_cache)
    (tmp_cache / key[:2]).write_text("stray")
    assert cache.load(key) is None
    assert cache.store(key, SOURCE, CUBIN, META) is not None
    assert cache.load(key)[1] == CUBIN


# -- crashes ------------------------------------------------------------------------------------
CRASH_STEPS = ["make the temporary folder", "write kernel.cu", "write kernel.cubin", "write meta.json",
               "rename into place", "discard a bad entry (after renaming it aside)"]


def _crash_at(step: int, root: str, key: str) -> None:
    """In a child process: store ``key`` and die (os._exit, no cleanup) at ``step``."""
    with config.override(cache_dir=root, disable_cache=False):
        writes = []
        real_write, real_replace = cache._write, os.replace

        def write(path, data):
            writes.append(path)
            if len(writes) == step:
                real_write(path, data[: len(data) // 2])
                os._exit(3)
            real_write(path, data)

        def replace(a, b):
            if step == 4 and os.path.basename(a).startswith(cache._TMP):
                os._exit(3)
            if step == 5 and os.path.basename(b).startswith(cache._TRASH):
                real_replace(a, b)
                os._exit(3)
            real_replace(a, b)

        real_mkdtemp = cache.tempfile.mkdtemp

        def mkdtemp(**kw):
            path = real_mkdtemp(**kw)
            if step == 0:
                os._exit(3)
            return path

        cache._write, cache.os.replace, cache.tempfile.mkdtemp = write, replace, mkdtemp
        if step == 5:
            cache.load(key)
        cache.store(key, SOURCE, CUBIN, META)
        os._exit(0)


@pytest.mark.parametrize("step", range(len(CRASH_STEPS)), ids=CRASH_STEPS)
def test_a_crash_at_each_write_step_leaves_a_miss_and_no_litter(tmp_cache, step):
    key = cache.cache_key("k", "sm_80")
    if step == 5:  # a bad entry that the crashing process was about to discard
        cache.store(key, SOURCE, b"bad", META)
        _rewrite(_path(cache._entry_dir(key), "kernel.cubin"), lambda d: b"worse")
    child = multiprocessing.get_context("fork").Process(target=_crash_at, args=(step, str(tmp_cache), key))
    child.start()
    child.join(30)
    assert child.exitcode == 3
    folder = os.path.join(tmp_cache, key[:2])
    assert any(n.startswith(".") for n in os.listdir(folder))  # the crash left litter...
    assert cache.load(key) is None
    assert cache.store(key, SOURCE, CUBIN, META) is not None
    assert os.listdir(folder) == [key]  # ...which the next writer removes
    assert cache.load(key)[1] == CUBIN


def test_live_writers_temporaries_are_left_alone(tmp_cache):
    key = cache.cache_key("k", "sm_80")
    folder = os.path.join(tmp_cache, key[:2])
    os.makedirs(folder)
    live = os.path.join(folder, f"{cache._TMP}{key[:16]}-{cache._HOST}-{os.getpid()}-abc")
    os.makedirs(live)
    cache.store(key, SOURCE, CUBIN, META)
    assert os.path.isdir(live)
    os.utime(live, (0, 0))  # ...until they are far too old to belong to anyone
    cache.store(key, SOURCE, CUBIN, META)
    assert not os.path.exists(live)


# -- concurrent processes -----------------------------------------------------------------------
def _writer(root: str, key: str, n: int, vandal: bool, out) -> None:
    served_bad = 0
    with config.override(cache_dir=root, disable_cache=False):
        for i in range(n):
            if vandal and i % 3 == 0:
                try:
                    _rewrite(_path(cache._entry_dir(key), "kernel.cubin"), lambda d: os.urandom(len(d)))
                except OSError:
                    pass
            try:
                cache.store(key, SOURCE, CUBIN, META)
                hit = cache.load(key)
            except Exception as e:  # reported to the parent
                out.put(f"{type(e).__name__}: {e}")
                return
            if hit is not None and hit[:2] != (SOURCE, CUBIN):
                served_bad += 1
    out.put(served_bad)


def test_concurrent_writer_processes_with_a_vandal(tmp_cache):
    key = cache.cache_key("k", "sm_80")
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(tmp_cache), key, 30, i == 0, out)) for i in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    assert results == [0, 0, 0, 0]  # no exception, nothing bad ever served
    cache.store(key, SOURCE, CUBIN, META)
    assert cache.load(key)[:2] == (SOURCE, CUBIN)
    assert os.listdir(os.path.join(tmp_cache, key[:2])) == [key]


# -- the build path and the autotuner -----------------------------------------------------------
def test_build_never_serves_a_foreign_cubin(tmp_cache, monkeypatch):
    import tegula.language as T

    compiled = _fake_compiler(monkeypatch)

    def factory(scale):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(128):
                    B[i] = A[i] * scale
        return main

    one = tegula.compile(factory(2.0), target="cuda:sm_80").artifact.cubin
    two = tegula.compile(factory(3.0), target="cuda:sm_80").artifact.cubin
    assert one != two and len(compiled) == 2
    # every entry of the cache gets the other kernel's cubin (the kernel symbol is the same)
    report = cache.verify(remove=False)
    assert report.good == report.entries == 4
    entries = [e for _, e in cache._entries(str(tmp_cache))]
    blobs = {e: open(_path(e, "kernel.cubin"), "rb").read() for e in entries}
    for e in entries:
        other = next(b for b in blobs.values() if b != blobs[e])
        with open(_path(e, "kernel.cubin"), "wb") as f:
            f.write(other)
    assert tegula.compile(factory(2.0), target="cuda:sm_80").artifact.cubin == one
    assert tegula.compile(factory(3.0), target="cuda:sm_80").artifact.cubin == two
    assert len(compiled) == 4  # both rebuilt, neither served from the poisoned entries
    assert tegula.compile(factory(2.0), target="cuda:sm_80").artifact.cubin == one
    assert len(compiled) == 4  # and the rebuilt entries are served again


def test_autotuner_replaces_a_bad_or_stale_entry(tmp_cache, monkeypatch):
    from tegula.autotuner import cache as tune_cache

    key = cache.cache_key("autotune problem", "cpu")
    tune_cache.store(key, {"index": 1, "config": {"block_M": 32}, "latency": 1.0})
    assert tune_cache.load(key)["index"] == 1
    _rewrite(_path(cache._entry_dir(key), "meta.json"), lambda d: d.replace(b'"index": 1', b'"index": 2'))
    assert tune_cache.load(key) is None  # edited: a miss
    tune_cache.store(key, {"index": 0, "config": {"block_M": 16}, "latency": 2.0})
    assert tune_cache.load(key)["index"] == 0
    tune_cache.store(key, {"index": 2, "config": {"block_M": 64}, "latency": 0.5})  # tuned again
    assert tune_cache.load(key)["index"] == 2


# -- python -m tegula cache info | verify | clear -------------------------------------------------
def test_cli_cache_info_verify_clear(tmp_cache, capsys):
    from tegula.tools.cli import main

    key, entry = _stored()
    bad_key, bad = _stored("bad")
    ENTRY_FAULTS["kernel.cubin random bytes"](bad)
    os.makedirs(os.path.join(os.path.dirname(entry), f"{cache._TRASH}left-over"))
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"cache directory: {tmp_cache}" in out and "entries: 2" in out and "bad: 1" in out
    assert main(["cache", "verify", "--keep"]) == 1
    assert f"bad entry {bad_key} (kernel.cubin does not match its hash): kept" in capsys.readouterr().out
    assert main(["cache", "verify"]) == 1
    assert "removed" in capsys.readouterr().out
    assert main(["cache", "verify"]) == 0
    out = capsys.readouterr().out
    assert "entries: 1" in out and "bad: 0" in out and "leftovers of unfinished writes: 0" in out
    assert cache.load(key) is not None
    assert main(["cache", "clear"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert cache.load(key) is None and not os.path.exists(tmp_cache)
