"""``python -m tegula``: see :mod:`tegula.tools.cli`."""
import sys

from tegula.tools.cli import main

sys.exit(main())
