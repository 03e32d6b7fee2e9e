"""``python -m tegula``: see :mod:`tegula.tools.cli`; ``python -m tegula run PROG.py`` runs a
TileLang program through :mod:`tegula.compat.run` (the tools and the compatibility layer do not
import each other: this entry point, above both, joins them)."""
import sys

argv = sys.argv[1:]
if argv[:1] == ["run"] and argv[1:2] not in (["-h"], ["--help"]):
    from tegula.compat import run  # everything after `run` belongs to the program

    sys.exit(run.main(argv[1:]))

from tegula.tools.cli import main  # noqa: E402

sys.exit(main())
