"""`archspec show`: the full spec of each MODEL, defaults resolved."""

from __future__ import annotations

from archspec.cli.models import read_specs
from archspec.cli.output import EXIT_OK, fmt_value, render

HELP = "the full spec of each MODEL, defaults resolved"
EXAMPLES = "archspec show gpt2\n  archspec show my-model.toml --format json\n  archspec show gpt2 --set n_kv_heads=4"


def _kind_counts(spec) -> dict[str, str]:
    """Each stack's layer kinds with their counts, from the per-layer view: {'decoder': '6 x local, 2 x global'}."""
    from archspec.spec.layers import layer_groups

    stacks = {"encoder": spec.encoder_layers, "decoder": spec.decoder_layers}
    return {
        stack: ", ".join(f"{g.count:,} x {g.kind}" for g in layer_groups(spec, depth))
        for stack, depth in stacks.items()
        if depth
    }


def run(args) -> int:
    from archspec.render.text import table

    specs = read_specs(args)
    objects = [
        {"name": s.name, **{k: v for k, v in s.resolved().items() if k != "name"}, "kind": s.kind} for s in specs
    ]

    def people() -> str:
        blocks = []
        for s in specs:
            given = s.model_fields_set
            rows = [[k, fmt_value(v), "" if k in given else "default"] for k, v in s.resolved().items()]
            rows.append(["(kind)", s.kind, "derived"])
            rows += [[f"({stack} layers)", kinds, "derived"] for stack, kinds in _kind_counts(s).items()]
            blocks.append(table(rows, ["field", "value", ""], args.format))
        return "\n\n".join(blocks)

    render(args, objects, people)
    return EXIT_OK
