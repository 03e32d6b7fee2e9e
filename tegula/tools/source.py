"""The generated source of a kernel, or its IR after one pass, without a GPU or a compiler.

::

    import tegula.tools as tools
    print(tools.kernel_source(matmul, 1024, 1024, 1024, target="cuda:sm_90a"))   # CUDA C++
    print(tools.kernel_source(matmul, 1024, 1024, 1024, target="ascendc:a2a3"))  # Ascend C
    print(tools.kernel_source(matmul, 1024, 1024, 1024, after="PipelineCopies"))  # IR after a pass

For ``cuda`` targets the source is the CUDA C++ that would be compiled (the pipeline and the code
generator run here; NVRTC is not needed). For the other targets it is what the built kernel's
``get_kernel_source()`` returns: the tile IR (``cpu``), the lowered IR the emulator runs
(``cuda-emu``, ``ascend-emu``), PTO C++ (``ascend-pto``) or Ascend C (``ascendc``).
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.errors import ConfigError
from tegula.target import parse_target
from tegula.tools.trace import DEFAULT_TARGET, Point, pipeline_to_trace, resolve, trace


def kernel_source(kernel_or_func: Any, *args: Any, target: Any = None,
                  pass_configs: Optional[dict] = None, after: Optional[Point] = None,
                  **kwargs: Any) -> str:
    """The generated source of a kernel for ``target`` (default ``cuda:sm_90a``), or with
    ``after`` the IR right after that pass (a pass name, ``"input"`` or a step number).

    ``kernel_or_func`` is what :func:`tegula.tools.trace` takes (``args`` / ``kwargs`` go to a
    factory). Raises the error of the pass that fails, ConfigError for a pass the pipeline does
    not have (naming the ones it has).
    """
    if after is not None:
        tr = trace(kernel_or_func, *args, target=target or DEFAULT_TARGET, pass_configs=pass_configs,
                   **kwargs)
        try:
            return tr[tr.index(after)].ir
        except ConfigError:   # no such step: a pass failed before it, or there is no such pass
            if tr.error is not None:
                raise tr.error from None
            raise
    t = parse_target(target or DEFAULT_TARGET)
    r = resolve(kernel_or_func, args, kwargs)
    cfg = pass_configs if pass_configs is not None else r.pass_configs
    if t.kind == "cuda":   # the C++ NVRTC would compile: pipeline and code generator, no compiler
        from tegula.backends.cuda.codegen import codegen
        from tegula.passconfig import check_pass_configs

        func, pipe = pipeline_to_trace(r, t, cfg, None)
        checked = check_pass_configs(cfg)
        return codegen(pipe.run(func), t, checked).source
    import tegula

    return tegula.compile(r.func, target=t, pass_configs=cfg).get_kernel_source()
