"""tegula: a tile-level GPU kernel language and compiler in pure Python."""
__version__ = "0.1.0"

from tegula import errors  # noqa: F401
