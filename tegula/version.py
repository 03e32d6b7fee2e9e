"""tegula's version (a module of its own, so that any floor of the package can read it).

``__version__`` says which TileLang API tegula implements, in TileLang's own version format
(``0.1.7.post3+cuda.d20260127.git...``): the public part is the TileLang release whose API
programs get (``TILELANG_API``, 0.1.15), the local part names tegula's own release
(``TEGULA_VERSION``, as in pyproject.toml). So ``packaging.version.Version(tilelang.__version__)``
compares as TileLang 0.1.15 does, and ``tegula.__version__`` still tells tegula's release.
"""
TILELANG_API = "0.1.15"   # the TileLang release whose Python API tegula implements
TEGULA_VERSION = "0.1.0"  # tegula's own release (pyproject.toml)
__version__ = f"{TILELANG_API}+tegula.{TEGULA_VERSION}"
