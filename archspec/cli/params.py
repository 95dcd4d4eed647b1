"""`archspec params`: exact parameter count by component, with the seed estimate and Kaplan's N."""

from __future__ import annotations

import argparse

from archspec.cli.models import MEASURED_LINE, is_measured, read_models_and_notes
from archspec.cli.output import EXIT_OK, ROUNDING_NOTE, layers_of, render
from archspec.core.errors import SpecError

HELP = "exact parameter count by component, with the seed estimate and Kaplan's N"
EXAMPLES = (
    "archspec params gpt2\n  archspec params gpt3-175b --format json\n  archspec params gpt2 --set vocab_size=50_304"
    "\n  archspec params glm-4.5-air --mtp"
)


def _measured_params_block(m, fmt: str) -> str:
    from archspec.render.text import exact, human, pct, table

    rows = [[group, human(n), exact(n), pct(n / m.total)] for group, n in m.components.items()]
    rows.append(["total", human(m.total), exact(m.total), pct(1.0)])
    if m.active is not None and m.active != m.total:
        rows.append(["active per token", human(m.active), exact(m.active), pct(m.active / m.total)])
    lines = [
        f"{m.name}: {m.source} ({m.architecture}, model_type {m.model_type})",
        MEASURED_LINE,
        table(rows, ["module", "params", "exact", "share"], fmt, colalign=("left", "right", "right", "right")),
        f"non-embedding (total less nn.Embedding tables): {human(m.non_embedding)} ({exact(m.non_embedding)})",
    ]
    if m.active is not None and m.active != m.total:
        lines.append(f"active: {m.active_note}")
    elif m.active is None:
        lines.append(f"active: not known ({m.active_note})")
    if m.estimate is not None:
        lines.append(f"seed estimate 12*L*d^2 + V*d: {human(m.estimate)} ({exact(m.estimate)})")
    return "\n".join(lines)


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mtp",
        action="store_true",
        help="count the multi-token-prediction modules of a spec with `mtp` too (component mtp); transformers "
        "does not build them, published totals often include them",
    )


def run(args) -> int:
    from archspec.count.params import COMPONENTS, count_params
    from archspec.render.text import exact, human, pct, signed_pct, table

    read = read_models_and_notes(args)
    specs, notes = [m for m, _, _ in read], [said for _, said, _ in read]
    mtp = getattr(args, "mtp", False)
    if mtp and not any(not is_measured(s) and s.mtp is not None for s in specs):
        raise SpecError(f"--mtp changes nothing: {', '.join(s.name for s in specs)[:200]} "
                        f"{'has' if len(specs) == 1 else 'have'} no multi-token-prediction modules")  # fmt: skip
    # with several models, --mtp counts the modules of those that have them
    counts = [s if is_measured(s) else count_params(s, mtp=mtp and s.mtp is not None) for s in specs]
    objects = [c.params_dict() if is_measured(c) else c.to_dict() for c in counts]
    from archspec.sources.resolve import stored

    held = [stored(source) for _, _, source in read]
    for obj, said, s in zip(objects, notes, held):
        if said:
            obj["notes"] = list(said)
        if s is not None:
            obj["stored"] = s.to_dict()

    def people() -> str:
        blocks = []
        for spec, c, said, s in zip(specs, counts, notes, held):
            if is_measured(c):
                blocks.append(_measured_params_block(c, args.format))
                continue
            rows = [[name, human(n), exact(n), pct(c.share(name))] for name in COMPONENTS if (n := c.components[name])]
            rows.append(["total", human(c.total), exact(c.total), pct(1.0)])
            if c.active != c.total:  # a mixture of experts: what one token uses, beside the total
                rows.append(["active per token", human(c.active), exact(c.active), pct(c.active / c.total)])
            head = f"{spec.name}: {spec.kind}, {layers_of(spec)} layers, d_model {spec.d_model}"
            per = "; ".join(
                f"{stack} layer {human(v['total'])} ({exact(v['total'])})" for stack, v in c.per_layer.items()
            )
            kinds = "; ".join(
                f"{stack}: " + ", ".join(f"{k['layers']:,} x {name} {human(k['total'])} ({exact(k['total'])})"
                                         for name, k in ks.items())
                for stack, ks in c.kinds.items() if len(ks) > 1
            )  # fmt: skip
            dev = (c.estimate - c.total) / c.total
            lines = [
                head,
                table(
                    rows,
                    ["component", "params", "exact", "share"],
                    args.format,
                    colalign=("left", "right", "right", "right"),
                ),
                f"per layer: {per}" + (" (the kind most layers have)" if kinds else ""),
                *([f"layers by kind: {kinds}"] if kinds else []),
                f"non-embedding (Kaplan's N): {human(c.non_embedding)} ({exact(c.non_embedding)})",
                f"seed estimate 12*L*d^2 + V*d: {human(c.estimate)} ({exact(c.estimate)}), {signed_pct(dev)} vs exact; "
                "leaves out biases, norms, position tables, cross-attention and any other departure "
                "from the GPT-2 block",
                *(f"note: {n}" for n in said),
                *([f"note: {s.line()}; `archspec check` holds them against the spec tensor by tensor"] if s else []),
            ]
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks) + "\n\n" + ROUNDING_NOTE

    render(args, objects, people)
    return EXIT_OK
