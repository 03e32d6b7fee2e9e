"""``tvm.target``: ``Target`` descriptions."""
from __future__ import annotations

import types
from typing import Any


class Target:
    """``Target("cuda")``, ``Target("cuda -arch=sm_90a")``, ``Target("llvm")``: ``kind`` and ``arch``
    (``attrs["arch"]`` too); ``str()`` is the tegula target string (``"cuda:sm_90a"``, ``"cpu"``)."""

    def __init__(self, target: Any, host: Any = None):
        text = str(target).strip()
        parts = text.split()
        kind = parts[0] if parts else "cuda"
        arch = None
        for p in parts[1:]:
            key, _, value = p.lstrip("-").partition("=")
            if key in ("arch", "mcpu"):
                arch = value
        if ":" in kind:
            kind, arch = kind.split(":", 1)
        self.kind = types.SimpleNamespace(name={"llvm": "llvm", "c": "c"}.get(kind, kind))
        self.arch = arch
        self.attrs = {"arch": arch} if arch else {}
        self.host = host
        self._text = text

    def tegula_target(self) -> str:
        if self.kind.name in ("llvm", "c", "cpu"):
            return "cpu"
        return f"{self.kind.name}:{self.arch}" if self.arch else self.kind.name

    def __str__(self) -> str:
        return self.tegula_target()

    def __repr__(self) -> str:
        return f"Target({self._text!r})"
