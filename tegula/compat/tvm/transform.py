"""``tvm.transform``: ``PassContext``, pass configs for the kernels compiled inside."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from tegula.passconfig import pass_context as _pass_context


class PassContext:
    """``with PassContext(opt_level=3, config={"tl.disable_tma_lower": True}):`` kernels compiled
    inside get these pass configs (an explicit ``pass_configs=`` wins). Keys are checked as
    ``pass_configs`` are: unknown ones are a ConfigError. ``opt_level`` is accepted."""

    def __init__(self, opt_level: int = 2, required_pass: Any = None, disabled_pass: Any = None,
                 instruments: Any = None, config: Optional[Mapping[str, Any]] = None):
        self.opt_level = opt_level
        self.config = dict(config or {})
        self._cm: Any = None

    def __enter__(self) -> "PassContext":
        self._cm = _pass_context(self.config)
        self._cm.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)
        self._cm = None
