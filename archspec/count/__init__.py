"""Counts folded over the description.

- ``params``: ``count_params``, parameters by component, role and kind;
- ``flops``: ``count_flops``, exact matmul FLOPs and the labelled non-matmul estimate;
- ``formula``: the count and FLOPs as polynomials in the spec's fields.
"""

from archspec.core.lazy import submodules

__getattr__ = submodules(__name__)
