"""Autotuning: ``tegula.autotune`` picks the fastest configuration of a kernel factory
(see :mod:`tegula.autotuner.tuner`)."""
from tegula.autotuner.tuner import AutoTuneFunction, autotune

__all__ = ["autotune", "AutoTuneFunction"]
