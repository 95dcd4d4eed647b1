"""The module paths from before archspec's layers became folders (0.4.0), still importable.

`archspec.sweep` is the function and `archspec.spec` and `archspec.render` are folders now, so those three
old module paths are not among them.

`import archspec.blocks` gives archspec.describe.blocks, the same module object: a finder at the end
of sys.meta_path answers only for the old names below, after every other finder has said no.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {
    "archspec.vocab": "archspec.core.vocab",
    "archspec.errors": "archspec.core.errors",
    "archspec.limits": "archspec.core.limits",
    "archspec.checks": "archspec.core.checks",
    "archspec.sizing": "archspec.core.sizing",
    "archspec.records": "archspec.core.records",
    "archspec.progress": "archspec.core.progress",
    "archspec.table": "archspec.spec.table",
    "archspec.rules": "archspec.spec.rules",
    "archspec.mixer_tables": "archspec.spec.mixer_tables",
    "archspec.subtables": "archspec.spec.subtables",
    "archspec.layers": "archspec.spec.layers",
    "archspec.entries": "archspec.describe.entries",
    "archspec.parts": "archspec.describe.parts",
    "archspec.attention": "archspec.describe.attention",
    "archspec.mlp": "archspec.describe.mlp",
    "archspec.mixers": "archspec.describe.mixers",
    "archspec.blocks": "archspec.describe.blocks",
    "archspec.params": "archspec.count.params",
    "archspec.flops": "archspec.count.flops",
    "archspec.formula": "archspec.count.formula",
    "archspec.inference": "archspec.plan.inference",
    "archspec.fit": "archspec.plan.fit",
    "archspec.compare": "archspec.plan.compare",
    "archspec.hardware": "archspec.plan.hardware",
    "archspec.claims": "archspec.validate.claims",
    "archspec.conventions": "archspec.validate.conventions",
    "archspec.tables": "archspec.io.tables",
    "archspec.values": "archspec.io.values",
    "archspec.loading": "archspec.io.loading",
    "archspec.specfile": "archspec.io.specfile",
    "archspec.catalog": "archspec.io.catalog",
    "archspec.plot": "archspec.render.plot",
    "archspec.report": "archspec.render.report",
    "archspec.notebook": "archspec.render.notebook",
}


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec):
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module):
        pass  # the module was executed under its own name


sys.meta_path.append(_OldPaths())
