"""Autotuning: ``tegula.autotune`` picks the fastest configuration of a kernel factory or an eager
function (see :mod:`tegula.autotuner.tuner`); ``set_autotune_inputs`` gives it the inputs to use."""
from tegula.autotuner.tuner import AutoTuneFunction, autotune, set_autotune_inputs

__all__ = ["autotune", "AutoTuneFunction", "set_autotune_inputs"]
