"""``tilelang.utils``: see :mod:`tegula.compat.utils` (``tilelang.utils.tensor`` is the same module)."""
from tegula.compat.utils import KernelParam, TensorSupplyType, get_tensor_supply, torch_assert_close  # noqa: F401
