"""Passes and pipelines: :class:`Pass`, :class:`Pipeline`, :func:`pipeline_for`, the instruments
that run around every pass, and the target-neutral passes (one file each). ``PassConfigKey`` is
importable from here too, as in TileLang."""
from tegula.passconfig import PassConfigKey
from tegula.transform.instruments import Dump, Instrument, Record, Timing, Verify
from tegula.transform.pipeline import INPUT, Pass, PassSpec, Pipeline, pipeline_for
from tegula.transform.trace import Step, Trace

__all__ = ["PassConfigKey", "Pass", "Pipeline", "PassSpec", "pipeline_for", "INPUT", "Instrument", "Record",
           "Verify", "Dump", "Timing", "Trace", "Step"]
