"""tegula's version (a module of its own, so that any floor of the package can read it)."""
__version__ = "0.1.0"
