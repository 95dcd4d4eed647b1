"""Published numbers held against the exact figures.

- ``claims``: claims and how a spec measures up to them;
- ``conventions``: the counting conventions a paper's figure may follow.
"""

from archspec.core.lazy import submodules

__getattr__ = submodules(__name__)
