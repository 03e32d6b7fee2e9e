"""The Ascend host on a CPU: what TileLang-Ascend programs ask of ``torch_npu`` and ``torch.npu``,
with kernels run on tegula's NPU emulator (``ascend-emu:a2a3`` / ``ascend-emu:a5``).

``python -m tegula run --target ascend-emu:a2a3 prog.py`` installs it for a whole program;
:func:`npu_host` does it in-process (a context manager, undone on exit)::

    with tegula.compat.npu_host("a2a3"):
        a = torch.randn(1024, 1024).npu()      # a CPU tensor
        c = kernel(a, b)                       # built for ascend-emu:a2a3

What it stands in for while installed (nothing of it is active otherwise):

- ``import torch_npu`` gives a module whose ``npu_*`` reference operators (``npu_fusion_attention``,
  ``npu_moe_token_permute``...) raise an :class:`~tegula.errors.UnsupportedError` naming the
  operator: they need Ascend hardware;
- the device ``npu`` (``torch.device("npu")``, ``device="npu"``, ``.to("npu")``, ``.npu()``) is the
  CPU: tensors live in host memory, ``.npu()`` copies as it does from the host to the device;
- ``torch.npu``: ``synchronize``, ``set_device``, ``current_device``, ``device_count``,
  ``is_available``, ``get_device_properties`` (the machine model's cube and vector core counts),
  ``Event`` (timing by the host clock), ``current_stream`` / ``Stream``;
- modules only Ascend software has (``import shmem``: aclshmem; ``torch_tl_ascend``: a torch
  extension built with CANN) and a shared library ``ctypes.CDLL`` cannot load (``kernel_lib.so``
  built ahead of time by CANN) are an :class:`AscendSoftwareError` naming them;
- the target: ``target="auto"`` (the default) and a program's explicit ``target="pto"``,
  ``"ascendc"`` or ``"npuir"`` mean ``ascend-emu:<arch>``: the emulator of the machine asked for.
"""
from __future__ import annotations

import contextlib
import dataclasses
import re
import sys
import time
import types
from typing import Any, Iterator, Optional

from tegula import config, target as _target
from tegula.errors import ConfigError, UnsupportedError

DEVICE = "npu"
# target strings TileLang-Ascend programs pass to tilelang.jit / compile: its code generators
PROGRAM_TARGETS = ("pto", "ascendc", "npuir", "npu", "ascend")
_DEVICE_STRING = re.compile(r"npu(:\d+)?$")


def _is_npu(value: Any) -> bool:
    if isinstance(value, str):
        return bool(_DEVICE_STRING.match(value.strip()))
    return getattr(value, "type", None) == DEVICE and type(value).__name__ == "device"


def _on_host(value: Any) -> Any:
    return "cpu" if _is_npu(value) else value


def _torch_mode_class() -> type:
    from torch.overrides import TorchFunctionMode

    class NpuOnHost(TorchFunctionMode):
        """Every torch call sees the CPU where it was asked for the NPU."""

        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            if any(_is_npu(a) for a in args):
                args = tuple(_on_host(a) for a in args)
            if "device" in kwargs and _is_npu(kwargs["device"]):
                kwargs = dict(kwargs, device="cpu")
            return func(*args, **kwargs)

    return NpuOnHost


@dataclasses.dataclass
class DeviceProperties:
    """What ``torch.npu.get_device_properties`` tells a program: the machine model's figures."""

    name: str
    cube_core_num: int
    vector_core_num: int
    total_memory: int

    @property
    def multi_processor_count(self) -> int:
        return self.cube_core_num


class Event:
    """``torch.npu.Event``: records the host clock (kernels run synchronously on the emulator)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self._t: Optional[float] = None

    def record(self, stream: Any = None) -> None:
        self._t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event to ``end`` (both recorded)."""
        if self._t is None or end._t is None:
            raise UnsupportedError("torch.npu.Event.elapsed_time: both events must be recorded first",
                                   hint="call start.record() and end.record() before elapsed_time")
        return (end._t - self._t) * 1e3


class Stream:
    """``torch.npu.Stream`` / ``current_stream()``: one in-order host stream."""

    def __init__(self, device: Any = None, priority: int = 0):
        self.device = device

    def synchronize(self) -> None:
        pass

    def wait_stream(self, other: "Stream") -> None:
        pass

    def wait_event(self, event: Event) -> None:
        pass

    def record_event(self, event: Optional[Event] = None) -> Event:
        event = event or Event()
        event.record()
        return event

    @property
    def npu_stream(self) -> int:
        return 0

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def _needs_hardware(module: str, name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(f"{module}.{name} needs Ascend hardware: it is a reference operator of "
                               "the CANN libraries, which tegula's NPU emulator does not have",
                               hint=f"compute the reference without {module}.{name} (in torch or numpy) "
                                    "to run this program on the emulator")
    call.__name__ = name
    return call


class NotOnHostError(UnsupportedError, AttributeError):
    """A name of ``torch_npu`` / ``torch.npu`` the stand-in does not have (an AttributeError
    too, so ``hasattr`` and torch's own probing see it as absent)."""


class _Module(types.ModuleType):
    """A module whose unknown ``npu_*`` names are operators that need Ascend hardware."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("npu_"):
            return _needs_hardware(self.__name__, name)
        if name.startswith("_"):
            raise AttributeError(name)
        raise NotOnHostError(f"{self.__name__}.{name} is not part of tegula's stand-in for the Ascend "
                               "host (it needs Ascend software)",
                               hint="see docs/ascend.md for what runs on the emulator")


# top-level modules only Ascend software provides: name -> what it is
ASCEND_MODULES = {
    "shmem": "aclshmem's Python module (memory shared by the NPUs of several processes)",
    "torch_tl_ascend": "the torch extension TileLang-Ascend's torch_tl_ascend example builds with CANN",
    "acl": "pyACL, the Ascend runtime's Python API",
    "torchair": "TorchAir, torch_npu's graph compiler",
}


class AscendSoftwareError(UnsupportedError):
    """A module or library only Ascend software provides."""

    def __init__(self, message: str, name: Optional[str] = None, hint: Optional[str] = None):
        UnsupportedError.__init__(self, message, hint=hint)
        self.name = name


class AscendModuleError(AscendSoftwareError, ModuleNotFoundError):
    """A module only Ascend software provides (a ModuleNotFoundError too, for ``except ImportError``)."""


class AscendLibraryError(AscendSoftwareError, OSError):
    """A shared library ``ctypes`` cannot load (an OSError too, for ``except OSError``)."""


class _AscendModules:
    """Finds the :data:`ASCEND_MODULES` no earlier finder found: an error naming the module."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        top = name.partition(".")[0]
        if top in ASCEND_MODULES:
            raise AscendModuleError(
                f"module {name!r} is {ASCEND_MODULES[top]}: it needs Ascend software, which tegula's "
                "stand-in for the Ascend host does not have", name=name,
                hint="this program runs only on an Ascend machine; see docs/ascend.md for what runs "
                     "on the emulator")
        return None


def _host_cdll() -> type:
    import ctypes

    class CDLL(ctypes.CDLL):
        """``ctypes.CDLL`` on the Ascend host stand-in: a library that cannot be loaded (a kernel
        library CANN builds ahead of time) is an :class:`AscendSoftwareError` naming it."""

        def __init__(self, name: Any, *args: Any, **kwargs: Any):
            try:
                super().__init__(name, *args, **kwargs)
            except OSError as e:
                raise AscendLibraryError(
                    f"ctypes.CDLL({str(name)!r}) cannot load the library ({e}); on an Ascend machine "
                    "such a kernel library is built ahead of time by CANN, which tegula's stand-in "
                    "for the Ascend host does not have", name=str(name),
                    hint="build and call the kernel in the program (tilelang.jit / tilelang.compile) "
                         "to run it on the emulator") from None

    return CDLL


class NpuHost:
    """The installed glue for one machine (``"a2a3"`` or ``"a5"``); see the module docstring."""

    def __init__(self, arch: str):
        from tegula.backends.npu.machine import machine

        self.arch = machine(arch).name
        self.machine = machine(arch)
        self._undo: list = []

    # -- torch.npu ---------------------------------------------------------------------------
    def _npu_module(self) -> types.ModuleType:
        m = _Module("torch.npu")
        m.__doc__ = "torch.npu on tegula's Ascend host stand-in (kernels run on ascend-emu:%s)" % self.arch
        current = {"device": 0}
        props = DeviceProperties(f"tegula ascend-emu:{self.arch}", self.machine.cores_aic,
                                 self.machine.cores_aic * self.machine.aiv_per_aic, 64 << 30)
        stream = Stream()

        def set_device(device: Any) -> None:
            index = device if isinstance(device, int) else getattr(device, "index", None) or 0
            if isinstance(device, str):
                index = int(device.partition(":")[2] or 0)
            if index != 0:
                raise ConfigError(f"torch.npu.set_device({device!r}): the emulated host has one NPU (0)",
                                  hint="multi-device programs need Ascend hardware")
            current["device"] = index

        m.__dict__.update(
            synchronize=lambda device=None: None,
            set_device=set_device,
            current_device=lambda: current["device"],
            device_count=lambda: 1,
            is_available=lambda: True,
            is_initialized=lambda: True,
            init=lambda: None,
            get_device_properties=lambda device=None: props,
            get_device_name=lambda device=None: props.name,
            Event=Event,
            Stream=Stream,
            current_stream=lambda device=None: stream,
            default_stream=lambda device=None: stream,
            stream=lambda s=None: contextlib.nullcontext(s),
            empty_cache=lambda: None,
            # the CPU generator is the device's: torch.manual_seed seeds it and asks these
            manual_seed=lambda seed: __import__("torch").manual_seed(seed) and None,
            manual_seed_all=lambda seed: None,
            _is_in_bad_fork=lambda: False,
            memory_allocated=lambda device=None: 0,
            max_memory_allocated=lambda device=None: 0,
            reset_peak_memory_stats=lambda device=None: None,
        )
        return m

    def _torch_npu_module(self) -> types.ModuleType:
        m = _Module("torch_npu")
        m.__file__ = __file__
        m.__version__ = "tegula-host"
        m.__dict__["npu"] = sys.modules["torch.npu"]
        return m

    # -- install / uninstall ---------------------------------------------------------------
    def install(self) -> "NpuHost":
        import torch

        if DEVICE not in (torch._C._get_privateuse1_backend_name(),):
            try:
                torch.utils.rename_privateuse1_backend(DEVICE)
            except RuntimeError as e:  # another backend took the name first
                raise ConfigError(f"the npu host stand-in cannot name torch's device 'npu': {e}") from None
        saved_modules = {k: sys.modules.get(k) for k in ("torch.npu", "torch_npu")}
        saved_attr = getattr(torch, "npu", None)
        sys.modules["torch.npu"] = npu = self._npu_module()
        torch.npu = npu  # type: ignore[attr-defined]
        sys.modules["torch_npu"] = self._torch_npu_module()

        saved_methods = {k: torch.Tensor.__dict__.get(k) for k in ("npu", "is_npu")}

        def to_npu(t: Any, device: Any = None, non_blocking: bool = False, **kw: Any) -> Any:
            if getattr(t, "_tegula_npu", False):
                return t
            out = t.clone()
            out._tegula_npu = True
            return out

        # torch.ops.npu.npu_*: the operators torch_npu registers, which need Ascend hardware
        saved_ops = torch.ops.__dict__.get(DEVICE)
        torch.ops.__dict__[DEVICE] = _Module("torch.ops.npu")
        torch.Tensor.npu = to_npu  # type: ignore[attr-defined]
        torch.Tensor.is_npu = property(lambda t: True)  # type: ignore[attr-defined]
        mode = _torch_mode_class()()
        mode.__enter__()
        import ctypes

        finder, saved_cdll = _AscendModules(), ctypes.CDLL
        sys.meta_path.append(finder)
        ctypes.CDLL = _host_cdll()  # type: ignore[misc]

        old_kind = _target.KINDS["ascend-emu"]
        archs = (self.arch,) + tuple(a for a in old_kind.archs if a != self.arch)
        _target.declare(dataclasses.replace(old_kind, aliases=old_kind.aliases + PROGRAM_TARGETS, archs=archs))
        old_settings = config.settings
        config.settings = dataclasses.replace(old_settings, default_target=f"ascend-emu:{self.arch}")

        def undo() -> None:
            config.settings = old_settings
            ctypes.CDLL = saved_cdll  # type: ignore[misc]
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            if saved_ops is None:
                torch.ops.__dict__.pop(DEVICE, None)
            else:
                torch.ops.__dict__[DEVICE] = saved_ops
            _target.declare(old_kind)
            mode.__exit__(None, None, None)
            for k, v in saved_methods.items():
                if v is None:
                    if k in torch.Tensor.__dict__:
                        delattr(torch.Tensor, k)
                else:
                    setattr(torch.Tensor, k, v)
            for k, v in saved_modules.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
            if saved_attr is None:
                # torch's device slot keeps the name 'npu' (a rename cannot be undone) and torch
                # then asks torch.npu whether the device is there (torch.accelerator,
                # torch.compile): it answers no
                torch.npu = _no_npu_module()  # type: ignore[attr-defined]
            else:
                torch.npu = saved_attr  # type: ignore[attr-defined]

        self._undo.append(undo)
        return self

    def uninstall(self) -> None:
        """Remove everything :meth:`install` put in place."""
        while self._undo:
            self._undo.pop()()


_ACTIVE: list[NpuHost] = []


def install(arch: str = "a2a3") -> NpuHost:
    """Install the Ascend host stand-in for ``arch`` for the rest of the process (``python -m
    tegula run --target ascend-emu:ARCH`` calls this). Raises ConfigError for an unknown arch or
    when another stand-in is installed."""
    if _ACTIVE:
        if _ACTIVE[-1].arch == arch:
            return _ACTIVE[-1]
        raise ConfigError(f"the Ascend host stand-in is installed for {_ACTIVE[-1].arch}, not {arch}",
                          hint="uninstall it first (tegula.compat.npu_host.uninstall())")
    host = NpuHost(arch).install()
    _ACTIVE.append(host)
    return host


def uninstall() -> None:
    """Remove the installed stand-in (nothing when none is)."""
    while _ACTIVE:
        _ACTIVE.pop().uninstall()


def active() -> Optional[NpuHost]:
    """The installed stand-in, or None."""
    return _ACTIVE[-1] if _ACTIVE else None


def _no_npu_module() -> types.ModuleType:
    """``torch.npu`` after the stand-in is gone: no NPU is available, none is counted."""
    m = types.ModuleType("torch.npu")
    m.__doc__ = "torch.npu after tegula's Ascend host stand-in was removed: no NPU in this process"
    m.is_available = lambda: False  # type: ignore[attr-defined]
    m.device_count = lambda: 0  # type: ignore[attr-defined]
    return m


@contextlib.contextmanager
def npu_host(arch: str = "a2a3") -> Iterator[NpuHost]:
    """Within the block, the Ascend host stand-in for ``arch`` (``"a2a3"`` or ``"a5"``) is
    installed: see the module docstring. Raises ConfigError for an unknown arch."""
    host = install(arch)
    try:
        yield host
    finally:
        uninstall()


def use_target(target: str) -> int:
    """``python -m tegula run --target TARGET``: kernels built with ``target="auto"`` get
    ``TARGET``; an ``ascend-emu`` target also installs the Ascend host stand-in for its machine.
    Returns 0, or 2 after printing why ``TARGET`` is not a target."""
    try:
        t = _target.parse_target(target)
    except ConfigError as e:
        print(f"python -m tegula run: {e}", file=sys.stderr)
        return 2
    if t.kind == "ascend-emu":
        install(t.arch or "a2a3")
    else:
        config.settings = dataclasses.replace(config.settings, default_target=str(t))
    return 0
