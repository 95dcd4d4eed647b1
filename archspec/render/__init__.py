"""Output for people.

- ``text``: rows as tables, markdown, JSON and CSV;
- ``plot``: pictures for planning;
- ``report``: one self-contained HTML page about a set of models;
- ``notebook``: pandas tables and Jupyter HTML.
"""

from archspec.core.lazy import submodules

__getattr__ = submodules(__name__)
