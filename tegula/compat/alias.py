"""The name ``tilelang`` for tegula, on request: :func:`alias_tilelang` (in-process) and
``python -m tegula run`` (a program or ``-m module``).

Under the alias ``import tilelang`` gives the ``tegula`` package and every ``tilelang.X`` is the
module ``tegula.X`` itself (``tilelang.language is tegula.language``): the paths TileLang programs
import (``tilelang.testing``, ``tilelang.profiler``, ``tilelang.carver.arch``...) exist in tegula
under the same names. Nothing is registered under ``tilelang`` until the alias is asked for.

TileLang programs also say ``import tvm`` / ``from tvm import DataType`` once ``tilelang`` is
imported (TileLang ships a TVM). While tegula stands in for ``tilelang`` and no real ``tvm`` is
installed, ``tvm`` resolves to tegula's small compatibility namespace :mod:`tegula.compat.tvm`.

Importing a submodule never changes what its package exports. Python binds a freshly imported
submodule as an attribute of its parent, so ``from tilelang.jit import JITKernel`` would rebind
``tilelang.jit`` from the decorator to the module ``tegula.jit``. Every package the alias loads
from (``tilelang``, ``tilelang.language``, ...) keeps its exported non-module names
(:func:`keep_exports`); the submodule is still importable by its path.

Some modules TileLang(-Ascend) programs import live elsewhere in tegula (:data:`PROVIDED`:
``tilelang.carver.arch.ascend``, ``tilelang.jit.adapter``...). A ``tilelang.X`` that tegula does not
have at all is a :class:`MissingModuleError` naming it (an UnsupportedError and a
ModuleNotFoundError, so ``try: import ... except ImportError`` still works), also below a module
that is not a package in tegula (``tilelang.jit`` is one module here, a package upstream).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Optional, Sequence

from tegula.errors import UnsupportedError

ALIAS = "tilelang"
TVM = "tvm"

# tilelang.X modules whose tegula counterpart is not tegula.X: alias path -> tegula module
PROVIDED = {
    "tilelang.carver.arch.ascend": "tegula.compat.carver_ascend",
    "tilelang.jit.adapter": "tegula.compat.jit_adapter",
}


class MissingModuleError(UnsupportedError, ModuleNotFoundError):
    """``import tilelang.X`` for a module of TileLang or TileLang-Ascend that tegula does not have."""

    def __init__(self, name: str):
        UnsupportedError.__init__(
            self, f"{name} is a module of TileLang / TileLang-Ascend that tegula does not have "
                  "(it needs TileLang's or Ascend's own software)",
            hint="see docs/compat.md and docs/ascend.md for the parts of TileLang's API tegula provides")
        self.name = name


class _KeepsExports(ModuleType):
    """A package whose exported names (functions, classes, values) an import of a submodule of
    the same name does not replace; the submodule stays in ``sys.modules`` under its path."""

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, ModuleType) and name in self.__dict__ \
                and not isinstance(self.__dict__[name], ModuleType):
            return  # the import system binding submodule `name` over the package's own `name`
        super().__setattr__(name, value)


def keep_exports(module: Optional[ModuleType]) -> None:
    """Make ``module`` (a package) keep its exported names when one of its submodules of the
    same name is imported (``tilelang.jit`` stays the decorator after ``import tilelang.jit``).
    Modules of another class than ``ModuleType`` are left alone."""
    if module is not None and type(module) is ModuleType and hasattr(module, "__path__"):
        module.__class__ = _KeepsExports


class _Renamed(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``<alias>.X`` and loads it as the already-existing module ``<target>.X``."""

    def __init__(self, alias: str, target: str):
        self.alias, self.target = alias, target
        self._modules: dict[str, ModuleType] = {}
        self._specs: dict[str, Optional[importlib.machinery.ModuleSpec]] = {}

    def find_spec(self, name: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if name != self.alias and not name.startswith(self.alias + "."):
            return None
        real = self._real_name(name)
        try:
            module = importlib.import_module(real)
        except ModuleNotFoundError as e:
            missing = e.name is None or e.name == real or real.startswith(e.name + ".")
            if self.alias == ALIAS and name != ALIAS and missing:
                raise MissingModuleError(name) from None
            return None
        if self.alias == ALIAS and not hasattr(module, "__path__"):
            # a module here, maybe a package upstream: let tilelang.X.Y come to this finder
            _as_package(module)
        self._modules[name] = module
        keep_exports(sys.modules.get(name.rpartition(".")[0]))  # the parent this import binds into
        keep_exports(module)
        return importlib.util.spec_from_loader(name, self)

    def _real_name(self, name: str) -> str:
        """The tegula module that stands for ``name`` (``<alias>.X``): from :data:`PROVIDED`
        (for the name or a package above it), else ``<target>.X``."""
        if self.alias == ALIAS:
            for alias_path, real in PROVIDED.items():
                if name == alias_path or name.startswith(alias_path + "."):
                    return real + name[len(alias_path):]
        return self.target + name[len(self.alias):]

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = self._modules.pop(spec.name)
        # the import system sets __spec__ on the module we return: keep the real one's
        self._specs[spec.name] = getattr(module, "__spec__", None)
        return module

    def exec_module(self, module: ModuleType) -> None:
        spec = self._specs.pop(module.__spec__.name, None)
        if spec is not None:
            module.__spec__ = spec


def _as_package(module: ModuleType) -> None:
    """Give ``module`` an empty ``__path__``, so that the import system asks the finders (this
    one first) for ``<module>.Y`` instead of stopping at "is not a package"."""
    try:
        module.__path__ = []  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        pass


class _TvmFallback(importlib.abc.MetaPathFinder):
    """``tvm`` as :mod:`tegula.compat.tvm`, only while ``tilelang`` is tegula and no real TVM is
    found by the finders before this one (it sits last on ``sys.meta_path``)."""

    def find_spec(self, name: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if name != TVM and not name.startswith(TVM + "."):
            return None
        if sys.modules.get(ALIAS) is not sys.modules.get("tegula"):
            return None
        return _Renamed(TVM, "tegula.compat.tvm").find_spec(name)


def _installed(kind: type) -> bool:
    return any(isinstance(f, kind) for f in sys.meta_path)


def install_tvm_fallback() -> None:
    """Put the ``tvm`` fallback finder at the end of ``sys.meta_path`` (idempotent). It answers
    only while :func:`is_aliased` holds, so it changes nothing for programs that use tegula."""
    if not _installed(_TvmFallback):
        sys.meta_path.append(_TvmFallback())


def is_aliased() -> bool:
    """True when ``import tilelang`` gives tegula in this process."""
    return sys.modules.get(ALIAS) is sys.modules.get("tegula") is not None


def alias_tilelang() -> ModuleType:
    """Make ``import tilelang`` (and every ``tilelang.X``) resolve to tegula in this process;
    returns the ``tegula`` package. Raises ImportError when another ``tilelang`` is already
    imported (an alias would leave two halves of two packages)."""
    import tegula

    current = sys.modules.get(ALIAS)
    if current is not None and current is not tegula:
        raise ImportError(f"a module named {ALIAS!r} is already imported "
                          f"({getattr(current, '__file__', current)!r}); alias tilelang to tegula "
                          "before anything imports it")
    if not any(isinstance(f, _Renamed) and f.alias == ALIAS for f in sys.meta_path):
        sys.meta_path.insert(0, _Renamed(ALIAS, "tegula"))
    install_tvm_fallback()
    keep_exports(tegula)
    sys.modules[ALIAS] = tegula
    return tegula


def unalias_tilelang() -> None:
    """Undo :func:`alias_tilelang`: forget ``tilelang`` and ``tvm`` modules that are tegula's."""
    import tegula

    sys.meta_path[:] = [f for f in sys.meta_path if not (isinstance(f, _Renamed) and f.alias == ALIAS)]
    for name, mod in list(sys.modules.items()):
        own = getattr(mod, "__name__", "").startswith("tegula")
        if (name == ALIAS or name.startswith(ALIAS + ".") or name == TVM or name.startswith(TVM + ".")) and own:
            del sys.modules[name]
    assert ALIAS not in sys.modules or sys.modules[ALIAS] is not tegula
