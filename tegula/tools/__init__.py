"""Tools to look inside the compiler: the IR after every pass, diffs between passes, layout plots,
the roofline Analyzer, and the command line (``python -m tegula``)."""
from tegula.tools.analyzer import AnalysisResult, Analyzer
from tegula.tools.diff import diff
from tegula.tools.plot import plot_kernel_layouts, plot_layout
from tegula.tools.trace import Step, Trace, trace

__all__ = ["Analyzer", "AnalysisResult", "trace", "diff", "Trace", "Step", "plot_layout", "plot_kernel_layouts"]
