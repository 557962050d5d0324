"""Builds Roost's optional compiled twins (src/roost/_speedups/*.pyx) with Cython.

Everything else is declared in pyproject.toml. The extensions are optional: without Cython or a
working C compiler the install goes on and Roost runs its pure-Python functions (see
roost._speedups). ROOST_PURE_PYTHON=1 at install time skips the build.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SPEEDUPS = Path("src/roost/_speedups")


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing when an extension cannot be compiled."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # no compiler at all (setuptools raises its own types)
            self._skip("the extensions", error)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as error:
            self._skip(ext.name, error)

    @staticmethod
    def _skip(what: str, error: Exception) -> None:
        print(f"roost: not building {what} ({error}); the pure-Python code will be used",
              file=sys.stderr)


def extensions() -> list[Extension]:
    if os.environ.get("ROOST_PURE_PYTHON", "") not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("roost: Cython is not installed; the pure-Python code will be used", file=sys.stderr)
        return []
    modules = [Extension(f"roost._speedups.{source.stem}", [str(source)], extra_compile_args=["-O2"])
               for source in sorted(SPEEDUPS.glob("*.pyx"))]
    try:
        return cythonize(modules, compiler_directives={"language_level": 3}, quiet=True)
    except Exception as error:  # a Cython that cannot translate the sources: install without them
        print(f"roost: Cython failed ({error}); the pure-Python code will be used", file=sys.stderr)
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
