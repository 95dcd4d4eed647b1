"""`archspec.presets` and `archspec.reference` when archspec is imported from a clone of its repository."""

from __future__ import annotations


def install() -> None:
    """Run from a clone (the repository root first on sys.path), `archspec/` is this folder, and the
    sibling folders `presets/` and `reference/` are `archspec.presets` and `archspec.reference`, as
    pyproject.toml maps them for an install. A finder for exactly those two names makes them resolve
    here too; an installed package (with the two inside it) needs none."""
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    siblings = {f"archspec.{n}": os.path.join(root, n) for n in ("presets", "reference")}
    if os.path.isdir(os.path.join(here, "presets")) or not all(
        os.path.isfile(os.path.join(d, "__init__.py")) for d in siblings.values()
    ):
        return
    import importlib.util

    class SourceTreeFinder:  # a meta path finder (importlib.abc.MetaPathFinder's protocol)
        def find_spec(self, fullname, path=None, target=None):
            folder = siblings.get(fullname)
            if folder is None:
                return None
            init = os.path.join(folder, "__init__.py")
            return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[folder])

    if not any(type(f).__name__ == "SourceTreeFinder" for f in sys.meta_path):
        sys.meta_path.append(SourceTreeFinder())


install()
