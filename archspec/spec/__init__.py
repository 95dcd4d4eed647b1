"""The spec: ``ModelSpec``, its sub-tables and the per-layer view.

- ``model``: ``ModelSpec``, its fields and derived views;
- ``table``, ``subtables``, ``mixer_tables``: the sub-tables, each checking its own fields;
- ``rules``: the rules that read two tables or more;
- ``layers``: which kind each layer has, resolved once.
"""

from archspec.core.lazy import submodules
from archspec.spec.model import ModelSpec

__all__ = ["ModelSpec"]
__getattr__ = submodules(__name__)
