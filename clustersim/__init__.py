"""clustersim: replay cluster traces against scheduling policies.

Installed, the subpackages ``clustersim.simulator``, ``.policies``, ``.traces`` and ``.configs``
sit inside this package (pyproject's ``package-dir`` maps them there). In a source checkout
they are the folders beside this one, so the checkout's parent folder joins the search path.
"""

from pathlib import Path as _Path

__version__ = "0.1.0"

_checkout = _Path(__file__).resolve().parent.parent
if not (_Path(__file__).parent / "simulator").is_dir() and (_checkout / "simulator" / "engine.py").is_file():
    __path__.append(str(_checkout))  # noqa: F821  (the package's own __path__)
