"""Whether a message names one of tegula's own files, whatever the checkout's folder is called.

Error messages must point at the user's line, never at tegula's internals. A plain ``"tegula/" not in
message`` fails when the checkout itself is a folder named ``tegula`` (``~/tegula/tests/x.py``), so the
checkout's path is taken out of the message first; what is left names an internal file only as
``tegula/...`` (a path inside the package, absolute or relative).
"""
import os

import tegula

PACKAGE = os.path.dirname(os.path.abspath(tegula.__file__))
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/..


def names_a_tegula_file(text: str) -> bool:
    """True when ``text`` names a file of the tegula package (by absolute or package-relative path)."""
    if PACKAGE + os.sep in text:
        return True
    for root in {CHECKOUT, os.path.dirname(PACKAGE)}:
        text = text.replace(root + os.sep, "<checkout>" + os.sep)
    return "tegula" + os.sep in text
