"""Host stand-ins for running the official TileLang puzzles on a CPU (``run_puzzles.sh``).

torch has no fast float16 matrix product on most CPUs: ``torch.matmul`` of two 4096 x 4096
float16 matrices, the reference of puzzles 08 and 10, takes minutes on the 2-core development
machine (1024^3 took 7.6 s, 512^3 0.39 s). Here it multiplies in float32 and rounds the result
to float16, as cuBLAS does for those operands on the GPU the puzzles were written for. Nothing
else changes: no kernel, no tegula code; torch.cuda's queries come from
``shared/conformance/cpu_shim`` (put on PYTHONPATH next to this folder's parent, see the script).
"""
import importlib.util
import os
import sys

# chain to the conformance run's shim (the torch.cuda queries a CPU lacks), which is also named
# sitecustomize: load it from the folder named by TEGULA_CPU_SHIM
_shim = os.environ.get("TEGULA_CPU_SHIM")
if _shim:
    _spec = importlib.util.spec_from_file_location("_tegula_cpu_shim", os.path.join(_shim, "sitecustomize.py"))
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["_tegula_cpu_shim"] = _mod
    _spec.loader.exec_module(_mod)

try:
    import torch
except ImportError:
    torch = None

if torch is not None:
    _matmul = torch.matmul

    def matmul(input, other, *, out=None):  # noqa: A002 (torch's parameter names)
        if out is None and input.dtype == torch.float16 == other.dtype and input.device.type == "cpu":
            return _matmul(input.float(), other.float()).half()
        return _matmul(input, other, out=out) if out is not None else _matmul(input, other)

    torch.matmul = matmul
