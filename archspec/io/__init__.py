"""Inputs: what a user writes or names, read into specs.

- ``loading``: spec files and config.json files (``load_spec``);
- ``values``: numbers and ``--set`` values as a person types them;
- ``catalog``: presets and any MODEL argument (``preset``, ``resolve``);
- ``specfile``: a spec written back out as a file;
- ``tables``: a paper's whole table of models.
"""

from archspec.core.lazy import submodules

__getattr__ = submodules(__name__)
