"""Loading cubins and launching kernels through the CUDA driver API (``cuda.bindings.driver``).

A :class:`Launcher` holds one compiled module. On its first call it loads the cubin into the
primary context of the tensors' device, looks up each kernel and raises the dynamic shared memory
limit where a kernel needs more than 48 KB. Every later call only gathers pointers and scalars,
evaluates grid extents, packs the argument block with one ``struct.pack_into`` and calls
``cuLaunchKernel`` for each kernel, on torch's current stream when the arguments are torch tensors
(CuPy's current stream for CuPy arrays, the default stream otherwise).

Arguments are torch CUDA tensors, objects with ``__cuda_array_interface__`` and Python scalars.
Every driver call is checked; a failure raises :class:`CudaError` (or ``CompileError`` /
``ResourceError`` when loading) naming the driver's error.
"""
from __future__ import annotations

import ctypes
import struct
import sys
import threading
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tegula.errors import ArgumentError, CompileError, ResourceError
from tegula.ir import expr as E
from tegula.ir.evaluate import HostEvalError, host_lambda
from tegula.backends.cuda.codegen import CudaModule, ParamInfo
from tegula.backends.cuda.machine import STATIC_SMEM_LIMIT
from tegula.backends.cuda.driver import CudaError, check, driver, error_name
from tegula.backends.cuda.tma_host import TmaEncoder



# ---------------------------------------------------------------------------------------------
# Host evaluation of grid extents
# ---------------------------------------------------------------------------------------------

def host_fn(exprs: Sequence[Any], slot_of: dict[int, int]) -> Callable[[list], tuple]:
    """Compile ``exprs`` (ints or integer expressions over scalar/dim params) into a function of the
    packed argument list that returns their values as a tuple of ints (computed as the operator
    table defines, :mod:`tegula.ir.evaluate`)."""
    def var_text(v: E.Var, bind: Callable[[Any], str]) -> str:
        if id(v) not in slot_of:
            raise CompileError(f"grid extent uses '{v.name}', which is neither a scalar parameter "
                               "nor a dynamic dimension")
        return f"int(v[{slot_of[id(v)]}])"

    try:
        fn = host_lambda(exprs, var_text)
    except HostEvalError as err:
        raise CompileError(f"cannot evaluate the grid extent on the host: {err}") from None

    def grid(args: list) -> tuple:
        try:
            return fn(args)
        except (ArithmeticError, ValueError) as err:
            raise ArgumentError(f"the grid extent cannot be computed for these arguments: {err}") from None
    return grid


# ---------------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------------

# struct format of one 8-byte argument slot per dtype (each parameter is 8-byte aligned).
_SLOT_FMT = {
    "bool": "?7x", "int8": "b7x", "uint8": "B7x", "int16": "h6x", "uint16": "H6x", "int32": "i4x",
    "uint32": "I4x", "int64": "q", "uint64": "Q", "float32": "f4x", "float64": "d",
    "float16": "H6x", "bfloat16": "H6x", "float8_e4m3": "B7x", "float8_e5m2": "B7x",
}


def _scalar_bits(info: ParamInfo) -> Optional[Callable[[Any], int]]:
    """For narrow float scalars: a function giving the bit pattern to pass."""
    if info.dtype.name in ("float16", "bfloat16", "float8_e4m3", "float8_e5m2"):
        npd = info.dtype.np
        view = np.uint16 if info.dtype.bits == 16 else np.uint8
        return lambda x: int(np.asarray(x, dtype=npd).view(view))
    return None


def data_ptr(x: Any) -> int:
    """Device address of a torch CUDA tensor or a ``__cuda_array_interface__`` object."""
    getter = getattr(x, "data_ptr", None)
    if getter is not None:
        if not x.is_cuda:
            raise ArgumentError(f"a tensor on {x.device} was passed to a CUDA kernel",
                                hint="move it with .cuda()")
        return getter()
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        raise ArgumentError(f"expected a CUDA tensor, got {type(x).__name__}")
    return int(cai["data"][0])


def _current_stream_fn() -> Callable[[Any], int]:
    """A function from the first tensor argument to the raw stream handle to launch on."""
    def pick(x: Any) -> int:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, torch.Tensor):
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            if raw is not None:
                return raw(x.get_device())
            return torch.cuda.current_stream(x.device).cuda_stream
        cupy = sys.modules.get("cupy")
        if cupy is not None and isinstance(x, cupy.ndarray):
            return cupy.cuda.get_current_stream().ptr
        return 0
    return pick


class _Loaded:
    """A module loaded in one context: its functions and that context."""

    def __init__(self, ctx: Any, module: Any, functions: list):
        self.ctx = ctx
        self.module = module
        self.functions = functions
        self.handles = [ctypes.c_void_p(int(f)) for f in functions]  # for the ctypes path
        self.c_launch: dict = {}  # (kernel index, grid) -> ctypes grid/block/smem arguments
        self.static_dims: Optional[tuple] = None  # the one kernel's, when its grid is static


_CUDA_ERROR_INVALID_CONTEXT = 201
_raw_launch: Any = None


def raw_launch() -> Any:
    """``cuLaunchKernel`` of the driver library through ctypes (a fraction of the cost of a call
    through the bindings), or None when the library cannot be opened. It takes ctypes values
    only (no argtypes: the caller converts once and reuses them)."""
    global _raw_launch
    if _raw_launch is None:
        try:
            fn = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
            fn.restype = ctypes.c_int
            _raw_launch = fn
        except (OSError, AttributeError):
            _raw_launch = False
    return _raw_launch or None


_c_streams: dict = {}


def _c_stream(stream: Any) -> Any:
    s = int(stream)
    c = _c_streams.get(s)
    if c is None:
        if len(_c_streams) > 256:
            _c_streams.clear()
        c = _c_streams[s] = ctypes.c_void_p(s)
    return c


class Launcher:
    """Runs the kernels of one :class:`CudaModule` compiled to ``cubin``.

    ``launcher(values)`` takes one value per PrimFunc parameter (tensors and scalars, in order).
    """

    def __init__(self, module: CudaModule, cubin: bytes, arch: str = "?"):
        self.module = module
        self.cubin = cubin
        self.arch = arch
        params = module.params
        self.n = len(params)
        self._plan = [(p.kind, p.source, _scalar_bits(p) if p.kind != "tmap" else _tma_encoder(p))
                      for p in params]
        # one 8-byte slot per parameter; a tensor map (128 bytes) takes 16
        slots = ["128s" if p.kind == "tmap" else "Q" if p.kind == "buffer" else _SLOT_FMT[p.dtype.name]
                 for p in params]
        offsets, off = [], 0
        for f in slots:
            offsets.append(off)
            off += 128 if f == "128s" else 8
        self._struct = struct.Struct("<" + "".join(slots))
        self._buf = ctypes.create_string_buffer(max(8, off))
        base = ctypes.addressof(self._buf)
        self._ptrs = (ctypes.c_void_p * max(1, self.n))(*[base + o for o in offsets])
        self._ptrs_addr = ctypes.addressof(self._ptrs)
        self._c_ptrs = ctypes.c_void_p(self._ptrs_addr)
        slot_of = {id(p.var): i for i, p in enumerate(params) if p.var is not None}
        self._launches = []
        for k in module.kernels:
            static = all(isinstance(g, int) or isinstance(g, E.Const) for g in k.grid)
            grid: Any = tuple(int(g.value) if isinstance(g, E.Const) else g for g in k.grid) if static \
                else host_fn(k.grid, slot_of)
            self._launches.append((grid, static, k.block, k.smem_bytes))
        self._stream_of = _current_stream_fn()
        self._buf_srcs = [p.source for p in params if p.kind == "buffer"]
        self._fast_ok = (bool(self._buf_srcs) and len(self._buf_srcs) == len(params)
                         and len(self._launches) == 1 and self._launches[0][1]
                         and all(g > 0 for g in self._launches[0][0]) and "torch" in sys.modules
                         and hasattr(sys.modules["torch"]._C, "_cuda_getCurrentRawStream"))
        self._loaded: dict[int, _Loaded] = {}
        self._lock = threading.Lock()
        if self._fast_ok:  # torch's current device and raw current stream, looked up once
            self._current_device = sys.modules["torch"]._C._cuda_getDevice
            self._current_stream = sys.modules["torch"]._C._cuda_getCurrentRawStream

    # -- loading ----------------------------------------------------------------------------------
    def _load(self, device: int) -> _Loaded:
        drv = driver()
        if device >= 0:
            dev = check(drv.cuDeviceGet(device), "cuDeviceGet")
            ctx = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        else:
            ctx = check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
            if ctx is None or int(ctx) == 0:
                dev = check(drv.cuDeviceGet(0), "cuDeviceGet")
                ctx = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        check(drv.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
        try:
            module = check(drv.cuModuleLoadData(self.cubin), "cuModuleLoadData (loading the cubin)",
                           CompileError, hint=f"the kernel was compiled for {self.arch}; compile it for "
                                              "this GPU's arch (target 'cuda' detects it)")
            functions = []
            dev = check(drv.cuCtxGetDevice(), "cuCtxGetDevice")
            optin = check(drv.cuDeviceGetAttribute(
                drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
                "cuDeviceGetAttribute")
            for k in self.module.kernels:
                f = check(drv.cuModuleGetFunction(module, k.name.encode()), f"cuModuleGetFunction({k.name})")
                if k.smem_bytes > optin:
                    raise ResourceError(f"kernel {k.name} needs {k.smem_bytes} bytes of shared memory; "
                                        f"this GPU allows {optin} per block")
                if k.smem_bytes > STATIC_SMEM_LIMIT:
                    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                    check(drv.cuFuncSetAttribute(f, attr, k.smem_bytes),
                          f"cuFuncSetAttribute({k.name}, max dynamic shared memory = {k.smem_bytes})",
                          ResourceError)
                functions.append(f)
        finally:
            drv.cuCtxPopCurrent()
        loaded = _Loaded(ctx, module, functions)
        if len(self._launches) == 1 and self._launches[0][1] and raw_launch() is not None:
            grid, _, block, smem = self._launches[0]
            loaded.static_dims = tuple(ctypes.c_uint(int(x)) for x in (*grid, *block, smem))
        return loaded

    # -- launching --------------------------------------------------------------------------------
    def _fast(self, values: Sequence[Any]) -> bool:
        """The common case in a few operations: only tensor arguments, one kernel with a static
        grid, already loaded on the current device, ctypes launch available. False when the
        general path must run (nothing has been launched then)."""
        first = values[self._buf_srcs[0]]
        if not getattr(first, "is_cuda", False):  # CuPy arrays and the like take the general path
            return False
        dev = first.get_device()
        loaded = self._loaded.get(dev)
        if loaded is None or loaded.static_dims is None or self._current_device() != dev:
            return False
        launch = _raw_launch
        stream = _c_stream(self._current_stream(dev))
        with self._lock:
            self._struct.pack_into(self._buf, 0, *[values[i].data_ptr() for i in self._buf_srcs])
            code = launch(loaded.handles[0], *loaded.static_dims, stream, self._c_ptrs, None)
        if code == 0:
            return True
        if code == _CUDA_ERROR_INVALID_CONTEXT:
            return False  # nothing launched: the general path pushes the module's context
        drv = driver()
        raise CudaError(f"cuLaunchKernel failed: {error_name(drv, drv.CUresult(code))}")

    def __call__(self, values: Sequence[Any]) -> None:
        if self._fast_ok and self._fast(values):
            return
        args: list = [None] * self.n
        first = None
        for i, (kind, src, bits) in enumerate(self._plan):
            if kind == "buffer":
                x = values[src]
                args[i] = data_ptr(x)
                if first is None:
                    first = x
            elif kind == "scalar":
                v = values[src]
                args[i] = bits(v) if bits is not None else v
            elif kind == "tmap":
                x = values[src[0]]
                args[i] = bits(x, data_ptr(x))
            else:
                pos, axis = src
                args[i] = int(values[pos].shape[axis])
        device = first.get_device() if first is not None and hasattr(first, "get_device") else -1
        loaded = self._loaded.get(device)
        if loaded is None:
            loaded = self._loaded[device] = self._load(device)
        stream = self._stream_of(first) if first is not None else 0
        drv = driver()
        success = drv.CUresult.CUDA_SUCCESS
        pushed = device >= 0 and _torch_device() != device
        if pushed:
            check(drv.cuCtxPushCurrent(loaded.ctx), "cuCtxPushCurrent")
        try:
            fast = raw_launch()
            with self._lock:
                self._struct.pack_into(self._buf, 0, *args)
                for n, (f, h, (grid, static, block, smem)) in enumerate(
                        zip(loaded.functions, loaded.handles, self._launches)):
                    g = grid if static else grid(args)
                    if g[0] <= 0 or g[1] <= 0 or g[2] <= 0:
                        continue  # an empty grid: nothing to do
                    if fast is not None:
                        dims = loaded.c_launch.get((n, g))
                        if dims is None:
                            if len(loaded.c_launch) > 1024:
                                loaded.c_launch.clear()
                            dims = loaded.c_launch[(n, g)] = tuple(
                                ctypes.c_uint(int(x)) for x in (*g, *block, smem))
                        code = fast(h, *dims, _c_stream(stream), self._c_ptrs, None)
                        if code == 0:
                            continue
                        err = drv.CUresult(code)
                    else:
                        (err,) = drv.cuLaunchKernel(f, g[0], g[1], g[2], block[0], block[1], block[2],
                                                    smem, stream, self._ptrs_addr, 0)
                    if err == drv.CUresult.CUDA_ERROR_INVALID_CONTEXT and not pushed:
                        # this thread has no (or another) current context: launch in the module's
                        check(drv.cuCtxPushCurrent(loaded.ctx), "cuCtxPushCurrent")
                        (err,) = drv.cuLaunchKernel(f, g[0], g[1], g[2], block[0], block[1], block[2],
                                                    smem, stream, self._ptrs_addr, 0)
                        drv.cuCtxPopCurrent()
                    if err != success:
                        raise CudaError(f"cuLaunchKernel failed: {error_name(drv, err)} (grid {g}, "
                                        f"block {block}, {smem} bytes of shared memory)")
        finally:
            if pushed:
                drv.cuCtxPopCurrent()


def _tma_encoder(p: ParamInfo) -> Any:
    return TmaEncoder(p.source[1], p.source[1].buffer.name)


def _torch_device() -> int:
    torch = sys.modules.get("torch")
    if torch is None:
        return -1
    return torch._C._cuda_getDevice()
