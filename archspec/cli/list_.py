"""`archspec list`: presets with a one-line summary."""

from __future__ import annotations

from archspec.cli.output import EXIT_OK, ROUNDING_NOTE, layers_of, render

HELP = "presets with a one-line summary"
EXAMPLES = "archspec list\n  archspec list --format json"
MODELS = None


def run(args) -> int:
    from archspec.count.params import count_params
    from archspec.io.catalog import get_preset, preset_names
    from archspec.render.text import human, table

    objects, rows = [], []
    for name in preset_names():
        p = get_preset(name)
        spec = p.spec
        total = count_params(spec).total
        objects.append(
            {
                "name": name,
                "family": p.family,
                "kind": spec.kind,
                "total": total,
                "summary": p.summary,
                "source": p.source,
            }
        )
        rows.append([name, spec.kind, layers_of(spec), spec.d_model, human(total), p.summary])
    render(
        args,
        objects,
        lambda: (
            table(rows, ["preset", "kind", "layers", "d_model", "params", "summary"], args.format)
            + "\n\n"
            + ROUNDING_NOTE
        ),
    )
    return EXIT_OK
