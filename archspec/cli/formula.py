"""`archspec formula`: the exact parameter count and forward FLOPs per token of a model as polynomials in
its fields, traced through the description the counts use and proven equal to them (archspec.count.formula)."""

from __future__ import annotations

from archspec.cli.output import EXIT_MISMATCH, EXIT_OK, render

HELP = (
    "the exact parameter count and forward FLOPs per token as polynomials in the spec's fields, traced "
    "through the description the counts use and proven equal to them (needs sympy: the [formula] extra)"
)
EXAMPLES = "archspec formula gpt2\n  archspec formula llama-3-8b --format json\n  archspec formula my-model.toml"
FORMATS = (["table", "markdown", "json"], "table (default), markdown or json: the polynomials as text, with terms")


def _people(f, fmt: str) -> str:
    from archspec.render.text import exact, pct, table

    where = ", ".join(f"{s} = {v['field']} = {v['value']:,}" for s, v in f.symbols.items())
    lines = [f"{f.name}", f"parameters = {f.params.polynomial}", f"           = {exact(f.params.value)}"]
    lines += [f"forward FLOPs per token = {f.flops_per_token.polynomial}",
              f"                        = {exact(f.flops_per_token.value)} (at seq_len T, matmuls, 2 per multiply-add)"
              if "max_positions" in (v["field"] for v in f.symbols.values()) else
              f"                        = {exact(f.flops_per_token.value)} (matmuls, 2 per multiply-add)"]  # fmt: skip
    lines.append(f"where {where}")
    rows = [[t.term, exact(t.value), pct(t.value / f.params.value)] for t in f.params.terms]
    lines += ["", table(rows, ["term", "parameters", "share"], fmt, colalign=("left", "right", "right"))]
    lines.append(
        f"\nproven: both polynomials equal count_params and count_flops at the spec and at {f.points - 1} random "
        "specs of the same shape"
    )
    return "\n".join(lines)


def run(args) -> int:
    from archspec.cli.models import is_measured, read_models
    from archspec.core.errors import SpecError
    from archspec.count.formula import NotDerived, derive

    specs = read_models(args)
    formulas, failed = [], []
    for spec in specs:
        if is_measured(spec):
            raise SpecError(f"{spec.name}: counted by building transformers' model, so it has no description to trace")
        try:
            formulas.append(derive(spec))
        except NotDerived as exc:
            failed.append(str(exc))

    def people() -> str:
        return "\n\n".join(_people(f, args.format) for f in formulas)

    if formulas or args.format == "json":
        render(args, [f.to_dict() for f in formulas], people)
    for message in failed:  # on stderr, so that the JSON on stdout stays the formulas that hold
        import sys

        sys.stderr.write(f"archspec: formula: {message}\n")
    return EXIT_MISMATCH if failed else EXIT_OK
