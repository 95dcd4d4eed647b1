"""A package's modules as its attributes, imported on first use (PEP 562's module ``__getattr__``).

Each folder of archspec ends its ``__init__.py`` with ``__getattr__ = submodules(__name__)``, so that
after ``import archspec`` a script reaches ``archspec.plan.hardware.resolve_peak`` without importing
the module by hand, and ``import archspec`` itself stays cheap.
"""

from __future__ import annotations

import importlib


def submodules(package: str):
    """The module ``__getattr__`` of ``package``: a name that is one of its modules imports it."""

    def __getattr__(name: str):
        if not name.startswith("_"):
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as error:
                if error.name != f"{package}.{name}":  # the module exists and lacks a dependency
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
