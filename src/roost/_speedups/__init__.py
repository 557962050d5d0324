"""Optional compiled twins of Roost's hottest pure functions.

Each module here is compiled (Cython, with the machine's C compiler) by the project's own install,
`pip install -e .`, through setup.py; when no compiler is at hand the install goes on without it.
A twin mirrors pure-Python functions that live beside the code that owns them, and the pure
function stays the reference: the same results and the same errors on any input, malformed input
included, which tests/speedups checks with hypothesis.

    from roost._speedups import load
    _twin = load("records")                       # the compiled module, or None
    decode = _twin.decode_records_into if _twin else decode_records_into_py

`load` gives None when the module was not built, when it was built from an older interface (a
stale build in an editable install), or when the environment variable ROOST_PURE_PYTHON is set to
anything but "" or "0" (which forces the pure-Python path everywhere, e.g. to test it).

Adding a twin: write `_speedups/<name>.pyx` (setup.py compiles every .pyx here) with a module-level
`INTERFACE = n`, list n in INTERFACES below, pick it at import time in the owning module with
`load(<name>)`, and add a hypothesis test that compares both on arbitrary input.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

log = logging.getLogger("roost.speedups")

PURE_PYTHON_ENV = "ROOST_PURE_PYTHON"

# The interface version each twin must declare: bumped whenever a twin's functions change shape,
# so that a compiled file left over from an older checkout is ignored rather than misused.
INTERFACES: dict[str, int] = {"records": 1}


def pure_python_forced() -> bool:
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def load(name: str) -> ModuleType | None:
    """The compiled twin `roost._speedups.<name>`, or None (see the module docstring)."""
    assert name in INTERFACES, f"unknown speedup module {name!r}"
    if pure_python_forced():
        return None
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ImportError:
        return None
    if getattr(module, "INTERFACE", None) != INTERFACES[name]:
        log.warning("roost: ignoring the compiled %s module (interface %s, expected %s): "
                    "reinstall with `pip install -e .` to rebuild it",
                    name, getattr(module, "INTERFACE", None), INTERFACES[name])
        return None
    return module
