"""The description: the model laid out as parts, one per component and layer kind.

- ``entries``: the entry types (``Linear``, ``Table``, ``Norm``, ...), each owning its formulas;
- ``parts``: ``Part``, the description's unit;
- ``attention``, ``mlp``, ``mixers``: the parts of each sub-layer;
- ``blocks``: ``describe(spec)``, the whole model.
"""

from archspec.core.lazy import submodules

__getattr__ = submodules(__name__)
