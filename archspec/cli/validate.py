"""`archspec validate`: published claims (parameters, training compute) against the exact computation:
source, deviation, status and explanation; all presets when no MODEL is given; a MODEL file in the
presets' format checks your own claims."""

from __future__ import annotations

from archspec.cli.output import EXIT_MISMATCH, EXIT_OK, render

HELP = (
    "published claims (parameters, training compute) against the exact computation: source, deviation, "
    "status and explanation; all presets when no MODEL is given; a MODEL file in the presets' format "
    "checks your own claims"
)
EXAMPLES = (
    "archspec validate\n  archspec validate gpt2 transformer-base\n  archspec validate my-claims.toml --format json"
)
MODELS = "*"


def _fmt_quantity(quantity: str, value) -> str:
    from archspec.render import human_sig, sci

    if quantity in ("params", "active_params", "non_embedding_params"):
        return f"{human_sig(value)} ({value:,})"
    if quantity == "pf_days":
        return f"{value:,.4g}" if abs(value) < 10**15 else sci(value, 4)
    return sci(value, 4)


def run(args) -> int:
    import textwrap

    from archspec.claims import assess
    from archspec.render import signed_pct

    objects, rows, notes = [], [], []
    unexplained = []
    from archspec.catalog import claim_sets
    from archspec.loading import parse_assignments

    for spec, claims in claim_sets(args.models, parse_assignments(args.overrides)):
        assessed = [assess(spec, c) for c in claims]
        objects.append({"name": spec.name, "claims": [a.to_dict() for a in assessed]})
        for a in assessed:
            c = a.claim
            lines = []
            if c.explanation:
                lines.append(c.explanation)
            if a.what_if:
                w = a.what_if
                changes = ", ".join(f"{k}={v}" for k, v in w["changes"].items())
                lines.append(
                    f"what if {changes}: {_fmt_quantity(c.quantity, w['computed'])}, {w['status']} "
                    f"({signed_pct(w['deviation'])}) [{w['label']}]"
                )
            if a.implied:
                i = a.implied
                if i["low"] is None:
                    lines.append(f"implied: {i['note']} (the spec has {i['field']} = {i['current']:,})")
                else:
                    lines.append(
                        f"implied: {c.printed} needs {i['field']} between {i['low']:,} and {i['high']:,} "
                        f"(the spec has {i['current']:,})"
                    )
            if a.using_params:
                u = a.using_params
                lines.append(
                    f"with N = {u['params']} as the source prints it: {_fmt_quantity(c.quantity, u['computed'])}, "
                    f"{u['status']} ({signed_pct(u['deviation'])})"
                )
            ref = ""
            if lines:
                notes.append((len(notes) + 1, spec.name, c.printed, lines))
                ref = f"[{len(notes)}]"
            if a.unexplained_off:
                unexplained.append(f"{spec.name} {c.quantity} {c.printed} ({c.source})")
            rows.append([spec.name, c.quantity, c.printed, _fmt_quantity(c.quantity, a.computed),
                         signed_pct(a.deviation), a.status, c.source, ref])  # fmt: skip

    def people() -> str:
        headers = ["model", "quantity", "claimed", "computed", "deviation", "status", "source", "note"]
        widths = [None, None, None, None, None, None, 48, None] if args.format == "table" else None
        from tabulate import tabulate

        out = tabulate(rows, headers=headers, tablefmt="github" if args.format == "markdown" else "simple",
                       disable_numparse=True, maxcolwidths=widths)  # fmt: skip
        blocks = [out, ""]
        for n, name, printed, lines in notes:
            body = [f"[{n}] {name} {printed}: {lines[0]}"] + [f"    {x}" for x in lines[1:]]
            blocks.append("\n".join(textwrap.fill(b, 110, subsequent_indent="    ") for b in body))
        counts = {k: sum(r[5] == k for r in rows) for k in ("match", "near", "off")}
        blocks.append(
            f"\n{len(rows)} claims: {counts['match']} match, {counts['near']} near (within 1%), {counts['off']} off; "
            "match = the exact value rounds to the printed figure at its printed precision"
        )
        if unexplained:
            blocks.append("off with no recorded explanation: " + "; ".join(unexplained))
        return "\n".join(blocks)

    render(args, objects, people)
    return EXIT_MISMATCH if unexplained else EXIT_OK
