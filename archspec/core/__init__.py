"""The base layer, beneath everything: what several layers read and none owns.

- ``vocab``: the enumerated choices (dtypes, components, roles, activations), each written once;
- ``errors``: ``SpecError``, the one exception for bad input;
- ``limits``: the limits on input, each with its message;
- ``checks``: the public functions' argument checks;
- ``sizing``: the rounding rules families use to pick sizes (``pad_vocab``, ``swiglu_hidden``);
- ``records``: result types as frozen dataclasses rendered from their fields;
- ``progress``: progress bars of long runs;
- ``tracing``, ``plancode``, ``compiled``: counters recorded once per structure and run as plain
  arithmetic on the numbers of every later shape;
- ``lazy``: a folder's modules as its attributes, on first use.
"""

from archspec.core.lazy import submodules

__getattr__ = submodules(__name__)
