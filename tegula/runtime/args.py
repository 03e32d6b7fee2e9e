"""Binding call arguments to a kernel's parameters.

Every argument is checked before anything runs: kind (tensor or scalar), dtype, number of
dimensions, shape (binding dynamic dimensions), device and contiguity. A mismatch raises
:class:`~tegula.errors.ArgumentError` naming the parameter, what was expected and what came.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from tegula.errors import ArgumentError
from tegula.ir import dtype as dt
from tegula.ir.buffer import Buffer
from tegula.ir.effects import effects
from tegula.ir.evaluate import evaluate
from tegula.ir.visitor import collect_vars
from tegula.ir.expr import Var
from tegula.ir import stmt as S
from tegula.ir.stmt import PrimFunc
from tegula.ir.visitor import post_order_visit


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def is_tensor_like(x: Any) -> bool:
    return isinstance(x, np.ndarray) or is_torch(x) or hasattr(x, "__cuda_array_interface__") \
        or hasattr(x, "__dlpack__")


def tensor_dtype(x: Any) -> dt.DType:
    return dt.as_dtype(x.dtype)


def device_of(x: Any) -> str:
    if is_torch(x):
        return str(x.device)
    if hasattr(x, "__cuda_array_interface__"):
        return "cuda"
    return "cpu"


def is_contiguous(x: Any) -> bool:
    if is_torch(x):
        return bool(x.is_contiguous())
    if isinstance(x, np.ndarray):
        return bool(x.flags.c_contiguous)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return cai.get("strides") is None
    return True


def to_numpy(x: Any) -> np.ndarray:
    """A numpy view of a CPU tensor (no copy), for dtypes numpy lacks too (bfloat16, fp8)."""
    if isinstance(x, np.ndarray):
        return x
    if is_torch(x):
        if x.requires_grad:  # the kernel reads and writes the storage; autograd does not see it
            x = x.detach()
        d = tensor_dtype(x)
        if d.name in ("bfloat16",):
            import torch

            return x.view(torch.int16).numpy().view(d.np)
        if d.name.startswith("float8"):
            import torch

            return x.view(torch.uint8).numpy().view(d.np)
        return x.numpy()
    return np.asarray(x)


@dataclass
class Bound:
    """Arguments after binding: one array or scalar per parameter, and the dynamic dims."""

    values: list
    dyn: dict           # Var -> int
    like_torch: Optional[Any]  # a torch tensor among the inputs (outputs follow its kind/device)


def _shape_str(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def eval_dim(d: Any, dyn: dict) -> int:
    """The value of a shape expression given the dynamic dimensions bound so far."""
    if isinstance(d, int):
        return d
    if isinstance(d, Var) and d in dyn:
        return int(dyn[d])
    for v in collect_vars(d):
        if v not in dyn:
            raise ArgumentError(f"dimension '{v.name}' is not bound by any argument")
    try:
        return int(evaluate(d, dyn))
    except (ArithmeticError, ValueError):
        raise ArgumentError(f"cannot evaluate the shape expression {d} on the host") from None


def written_params(func: PrimFunc) -> frozenset:
    """Names of the buffer parameters the kernel may write (stores and tile-op destinations)."""
    params = {id(p): p.name for p in func.params if isinstance(p, Buffer)}
    names: set = set()

    def visit(n: Any) -> None:
        if isinstance(n, S.BufferStore):
            targets = [n.buffer]
        elif isinstance(n, S.TileOp):   # its declared writes (ir/effects.py)
            targets = effects(n).written_buffers
        else:
            return
        names.update(params[id(b)] for b in targets if id(b) in params)

    post_order_visit(func.body, visit)
    return frozenset(names)


def order_arguments(func: PrimFunc, inputs: Sequence[int], args: Sequence[Any], kwargs: dict) -> list:
    """Positional ``args`` followed by ``kwargs`` given by parameter name, in parameter order.

    Raises ArgumentError for a name that is no parameter, a parameter given twice, or an output
    (which the kernel allocates)."""
    if not kwargs:
        return list(args)
    names = [func.params[i].name for i in inputs]
    outputs = {p.name for i, p in enumerate(func.params) if i not in inputs}
    ordered: list = list(args) + [_MISSING] * max(0, len(names) - len(args))
    for key, value in kwargs.items():
        if key in outputs:
            raise ArgumentError(f"{func.name}(): '{key}' is an output, which the kernel allocates",
                                hint="leave it out; the call returns it")
        if key not in names:
            import difflib

            lower = {n.lower(): n for n in names}
            close = [lower[c] for c in difflib.get_close_matches(key.lower(), list(lower), n=1)]
            raise ArgumentError(f"{func.name}() has no parameter '{key}'; its inputs are "
                                f"{', '.join(names) or 'none'}",
                                hint=f"did you mean '{close[0]}'?" if close else None)
        pos = names.index(key)
        if pos < len(args):
            raise ArgumentError(f"{func.name}(): argument '{key}' given both by position and by name")
        ordered[pos] = value
    missing = [n for n, v in zip(names, ordered) if v is _MISSING]
    if missing:
        raise ArgumentError(f"{func.name}() takes {len(names)} argument(s) ({', '.join(names)}): "
                            f"missing {', '.join(repr(m) for m in missing)}")
    return ordered


_MISSING = object()


def check_writable(func: PrimFunc, name: str, arr: np.ndarray) -> None:
    """ArgumentError when numpy array ``arr``, given for parameter ``name``, is read-only and the
    kernel writes that parameter."""
    if not arr.flags.writeable and name in written_params(func):
        raise ArgumentError(f"argument '{name}': the numpy array is read-only, but the kernel writes it",
                            hint="pass a writable array (np.array(x) copies one)")


def bind(func: PrimFunc, inputs: Sequence[int], args: Sequence[Any], device: str) -> Bound:
    """Check ``args`` against the parameters at positions ``inputs`` and bind dynamic dims.

    ``device`` is where the kernel runs ("cpu" or "cuda"). Outputs (the other parameters) are
    left as None in ``values``.
    """
    params = func.params
    names = [p.name for p in params]
    if len(args) != len(inputs):
        want = ", ".join(names[i] for i in inputs)
        if len(args) < len(inputs):
            missing = ", ".join(f"'{names[i]}'" for i in inputs[len(args):])
            raise ArgumentError(f"{func.name}() takes {len(inputs)} argument(s) ({want}), got {len(args)}: "
                                f"missing {missing}")
        raise ArgumentError(f"{func.name}() takes {len(inputs)} argument(s) ({want}), got {len(args)}")
    values: list = [None] * len(params)
    dyn: dict = {}
    like_torch = None
    # first bind dynamic dims that appear bare in some shape, then check every shape
    for pos, arg in zip(inputs, args):
        p = params[pos]
        if isinstance(p, Var):
            values[pos] = _scalar(p, arg)
            dyn[p] = values[pos]
            continue
        _check_tensor(func, p, arg, device)
        if like_torch is None and is_torch(arg):
            like_torch = arg
        for k, d in enumerate(p.shape):
            if isinstance(d, Var):
                actual = int(arg.shape[k])
                if d in dyn and dyn[d] != actual:
                    raise ArgumentError(
                        f"argument '{p.name}': dimension {k} is '{d.name}' = {actual}, but '{d.name}' "
                        f"is {dyn[d]} from an earlier argument")
                dyn[d] = actual
        values[pos] = arg
    for pos, arg in zip(inputs, args):
        p = params[pos]
        if isinstance(p, Buffer):
            want = tuple(eval_dim(d, dyn) for d in p.shape)
            got = tuple(int(s) for s in arg.shape)
            if want != got:
                raise ArgumentError(f"argument '{p.name}': expected shape {_shape_str(p.shape)} = "
                                    f"{_shape_str(want)}, got {_shape_str(got)}")
    return Bound(values, dyn, like_torch)


_UNCHANGED: dict = {}


def unchanged(args: tuple) -> Optional[tuple]:
    """``(check, state)`` such that ``check(later, state)`` is True when the tuple ``later`` holds
    exactly the tensors of ``args``, alive and unchanged since: the same objects, at the same
    version (torch bumps it on every in-place change, of data or of sizes and strides) and
    address (``x.data = y`` bumps nothing). None when a tensor keeps no version (inference
    tensors). Both the check and the state's making are straight-line code made once per
    number of arguments: a call's cheapest safe test that its validated plan still applies."""
    n = len(args)
    fns = _UNCHANGED.get(n)
    if fns is None:
        a = "".join(f"a{i}, " for i in range(n))
        names = "".join(f"r{i}, " for i in range(n)) + "".join(f"v{i}, " for i in range(n)) + \
            "".join(f"p{i}, " for i in range(n))
        conds = [f"r{i}() is a{i}" for i in range(n)] + [f"a{i}._version == v{i}" for i in range(n)] + \
                [f"a{i}.data_ptr() == p{i}" for i in range(n)]
        made = [f"ref(a{i})" for i in range(n)] + [f"a{i}._version" for i in range(n)] + \
               [f"a{i}.data_ptr()" for i in range(n)]
        unpack = f"    {a}= args\n" if n else ""
        src = (f"def check(args, state):\n    if len(args) != {n}:\n        return False\n{unpack}"
               + (f"    {names}= state\n" if n else "") + f"    return {' and '.join(conds) or 'True'}\n"
               + f"def make(args):\n{unpack}    return ({''.join(m + ', ' for m in made)})\n")
        env: dict = {"ref": weakref.ref}
        exec(src, env)
        fns = _UNCHANGED[n] = (env["check"], env["make"])
    try:
        return fns[0], fns[1](args)
    except (RuntimeError, AttributeError, TypeError):
        return None


def _scalar(p: Var, arg: Any) -> Any:
    if is_tensor_like(arg) and getattr(arg, "ndim", 1) != 0:
        raise ArgumentError(f"argument '{p.name}': expected a scalar {p.dtype}, got a tensor")
    if hasattr(arg, "item"):
        arg = arg.item()
    if p.dtype.is_float and isinstance(arg, (int, float)) and not isinstance(arg, bool):
        return float(arg)
    if p.dtype.is_int and isinstance(arg, int) and not isinstance(arg, bool):
        info = np.iinfo(p.dtype.np)
        if not info.min <= arg <= info.max:
            raise ArgumentError(f"argument '{p.name}': {arg} does not fit in {p.dtype}")
        return int(arg)
    if p.dtype.is_bool and isinstance(arg, (bool, np.bool_)):
        return bool(arg)
    raise ArgumentError(f"argument '{p.name}': expected a scalar {p.dtype}, got {type(arg).__name__} {arg!r}")


def _check_tensor(func: PrimFunc, p: Buffer, arg: Any, device: str) -> None:
    if not is_tensor_like(arg):
        raise ArgumentError(f"argument '{p.name}': expected a tensor of dtype {p.dtype} and shape "
                            f"{_shape_str(p.shape)}, got {type(arg).__name__}")
    try:
        d = tensor_dtype(arg)
    except (TypeError, ValueError):
        raise ArgumentError(f"argument '{p.name}': dtype {arg.dtype} is not supported") from None
    if d != p.dtype and not (p.dtype == dt.handle and d in (dt.int64, dt.uint64)):  # T.ptr: data_ptr()s
        raise ArgumentError(f"argument '{p.name}': expected dtype {p.dtype}, got {d}")
    ndim = len(arg.shape)
    if ndim != p.ndim:
        raise ArgumentError(f"argument '{p.name}': expected {p.ndim} dimension(s) "
                            f"{_shape_str(p.shape)}, got {ndim} {_shape_str(tuple(arg.shape))}")
    for k, want in enumerate(p.shape):
        if isinstance(want, int) and int(arg.shape[k]) != want:
            raise ArgumentError(f"argument '{p.name}': expected shape {_shape_str(p.shape)}, got "
                                f"{_shape_str(tuple(arg.shape))} (dimension {k} is {arg.shape[k]}, not {want})")
    dev = device_of(arg)
    if isinstance(arg, np.ndarray):
        check_writable(func, p.name, arg)
    if not dev.startswith(device):
        raise ArgumentError(f"argument '{p.name}': the tensor is on {dev} but the kernel runs on {device}",
                            hint=f"move it with .to('{device}')" if is_torch(arg) else None)
    if not is_contiguous(arg):
        raise ArgumentError(f"argument '{p.name}': the tensor is not contiguous",
                            hint="call .contiguous() on it first")


def alloc_output(p: Buffer, dyn: dict, like_torch: Any, device: str) -> Any:
    """An output tensor for parameter ``p``: torch when the inputs are (or the device needs it),
    numpy otherwise; filled with poison when ``config.poison_outputs`` is on."""
    shape = tuple(eval_dim(d, dyn) for d in p.shape)
    if like_torch is not None or device != "cpu":
        import torch

        tdt = _torch_dtype(p.dtype)
        dev = like_torch.device if like_torch is not None else device
        out = torch.empty(shape, dtype=tdt, device=dev)
    else:
        out = np.empty(shape, dtype=p.dtype.np)
    from tegula import config

    if config.get().poison_outputs:
        poison(out, p.dtype)
    return out


def poison(t: Any, d: dt.DType) -> None:
    """Fill ``t`` with a value a correct kernel overwrites: NaN, or a marker for ints and bools."""
    if d.is_float:
        value: Any = float("nan")
    elif d.is_bool:
        value = True
    elif d.kind == "uint":
        value = int(np.iinfo(d.np).max)
    else:
        value = int(max(np.iinfo(d.np).min, -0x5A5A5A5A))
    if is_torch(t):
        t.fill_(value)
    else:
        t.fill(value)


def _torch_dtype(d: dt.DType) -> Any:
    import torch

    name = {"float8_e4m3": "float8_e4m3fn", "bool": "bool"}.get(d.name, d.name)
    return getattr(torch, name)


def to_device_tensor(a: np.ndarray, name: str) -> Any:
    """A CUDA torch tensor holding a copy of numpy array ``a`` (bfloat16 / fp8 included), for
    parameter ``name``; ArgumentError when there is no GPU (or no torch) to move it to."""
    from tegula.target import gpu_available

    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not gpu_available():
        why = "torch is not installed" if torch is None else "no CUDA GPU is available"
        raise ArgumentError(f"argument '{name}': a numpy array cannot be moved to the GPU: {why}",
                            hint="build the kernel for target='cpu' or 'cuda-emu' to run it here")
    d = dt.as_dtype(a.dtype)
    a = np.ascontiguousarray(a)
    if d.name == "bfloat16":
        t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    elif d.name.startswith("float8"):
        t = torch.from_numpy(a.view(np.uint8)).view(_torch_dtype(d))
    else:
        t = torch.from_numpy(a)
    return t.to("cuda")


def to_host_array(t: Any) -> np.ndarray:
    """A numpy copy of a device tensor, in the matching numpy dtype."""
    return to_numpy(t.detach().cpu()).copy()
