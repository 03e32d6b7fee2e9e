"""Tools to look inside the compiler: the IR after every pass, diffs between passes, layout plots,
the roofline Analyzer, and the command line (``python -m tegula``)."""
from tegula.tools.analyzer import AnalysisResult, Analyzer
from tegula.tools.diff import compare, diff
from tegula.tools.plot import plot_kernel_layouts, plot_layout
from tegula.tools.source import kernel_source
from tegula.tools.trace import Step, Trace, trace

__all__ = ["Analyzer", "AnalysisResult", "trace", "diff", "compare", "kernel_source", "Trace", "Step", "plot_layout", "plot_kernel_layouts"]
