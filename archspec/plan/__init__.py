"""Planners over the counts.

- ``inference``: roofline prefill and decode, on one device or many;
- ``fit``: the fewest accelerators that hold a model;
- ``sweep``: a row of planning numbers per combination of fields, streamed;
- ``compare``: models side by side;
- ``hardware``: the accelerator table, with sources.
"""

from archspec.core.lazy import submodules

__getattr__ = submodules(__name__)
