"""`archspec validate`: published claims (parameters, training compute) against the exact computation:
source, deviation, status and explanation; all presets when no MODEL is given; a MODEL file in the
presets' format checks your own claims; a TABLE (a packaged table's name, or a file of
archspec.io.tables' format) checks a paper's whole table, one line per row."""

from __future__ import annotations

from archspec.cli.output import EXIT_MISMATCH, EXIT_OK, render

HELP = (
    "published claims (parameters, training compute) against the exact computation: source, deviation, "
    "status and explanation; all presets when no MODEL is given; a MODEL file in the presets' format "
    "checks your own claims; a TABLE (a packaged paper's table by name, or a table file) checks every row"
)
EXAMPLES = (
    "archspec validate\n  archspec validate gpt2 transformer-base\n  archspec validate pythia\n"
    "  archspec validate my-claims.toml --format json"
)
MODELS = "*"
STATUSES = ("match", "truncated", "near", "off")


def _fmt_quantity(quantity: str, value) -> str:
    from archspec.render.text import human_sig, sci
    from archspec.validate.claims import COUNTS

    if quantity in COUNTS:
        return f"{human_sig(value)} ({value:,})"
    if quantity == "pf_days":
        return f"{value:,.4g}" if abs(value) < 10**15 else sci(value, 4)
    return sci(value, 4)


def _like_printed(printed: str, value) -> str:
    """`value` written as `printed` is, with one digit more than it prints: '6.7B' -> '6.74B', '70 M' -> '70.4M',
    '70,426,624' -> '70,426,624'."""
    from archspec.validate.claims import SUFFIX, _last_printed_digit

    text = printed.strip()
    suffix = text[-1:].upper()
    if not isinstance(value, int) or suffix not in SUFFIX:
        return f"{value:,}" if isinstance(value, int) else _fmt_quantity("training_flops", value)
    decimals = max(0, SUFFIX[suffix] - _last_printed_digit(text).adjusted() + 1)
    return f"{value / 10 ** SUFFIX[suffix]:,.{decimals}f}{suffix}"


def _tables(refs: list[str]) -> list[str]:
    """The refs that name a paper's table: a packaged table's name, or a file with [[rows]]."""
    from archspec.io.catalog import _looks_like_path, preset_names
    from archspec.io.loading import read_mapping
    from archspec.io.tables import is_table, packaged

    names, presets = packaged(), set(preset_names())
    for r in refs:
        if r not in names and r not in presets and not _looks_like_path(r):
            from archspec.core.errors import SpecError, did_you_mean, shown

            raise SpecError(f"unknown preset or table {shown(r)}{did_you_mean(r, [*presets, *names])} "
                            f"(presets: `archspec list`; tables: {', '.join(names)})")  # fmt: skip
    return [r for r in refs if (r in names and r not in presets) or (_looks_like_path(r) and is_table(read_mapping(r)))]


def notes_of(a, quantity_label=None) -> list[str]:
    """The lines that explain one assessment: its explanation, what-if, implied range, the source's own N,
    and, for a figure that stays off, the counting conventions that reproduce it."""
    from archspec.render.text import signed_pct

    c = a.claim
    show = quantity_label or (lambda value: _fmt_quantity(c.quantity, value))
    lines = []
    if a.explanation:
        lines.append(a.explanation)
    if a.conventions and not a.by_conventions:
        w = a.conventions
        lines.append(f"counted with {', '.join(w['names'])}: {show(w['computed'])}, {w['status']} "
                     f"({signed_pct(w['deviation'])})")  # fmt: skip
    if a.what_if:
        w = a.what_if
        changes = ", ".join(f"{k}={v}" for k, v in w["changes"].items())
        lines.append(f"what if {changes}: {show(w['computed'])}, {w['status']} ({signed_pct(w['deviation'])}) "
                     f"[{w['label']}]")  # fmt: skip
    if a.implied:
        i = a.implied
        if i["low"] is None:
            lines.append(f"implied: {i['note']} (the spec has {i['field']} = {i['current']:,})")
        else:
            lines.append(f"implied: {c.printed} needs {i['field']} between {i['low']:,} and {i['high']:,} "
                         f"(the spec has {i['current']:,})")  # fmt: skip
    if a.using_params:
        u = a.using_params
        lines.append(f"with N = {u['params']} as the source prints it: {_fmt_quantity(c.quantity, u['computed'])}, "
                     f"{u['status']} ({signed_pct(u['deviation'])})")  # fmt: skip
    if a.suggestions is not None:
        if a.suggestions:
            found = "; or ".join(f"{s['says']} ({', '.join(s['conventions'])}): {show(s['computed'])}, {s['status']}"
                                 for s in a.suggestions)  # fmt: skip
            lines.append(f"reproduced with {found}")
        else:
            lines.append("no known counting convention, alone or with two others, reproduces it")
    if a.gap_term:
        g = a.gap_term
        part = f"; the term {g['of']} is {g['times']} of it" if "of" in g else ""
        lines.append(f"the gap (printed less computed, {g['gap']:+,}) is the size of {g['term']} = {g['value']:,} "
                     f"in `archspec formula`{part}")  # fmt: skip
    return lines


def _summary(statuses: list[str], what: str, explained: int = 0) -> str:
    counts = {k: statuses.count(k) for k in STATUSES}
    off = f"{counts['off']} off" + (f" ({explained} explained)" if explained else "")
    return (
        f"{what}: {counts['match']} match, {counts['truncated']} truncated, {counts['near']} near (within 1%), "
        f"{off}; match = the exact value rounds to the printed figure at its printed precision, "
        "truncated = it is cut off to it"
    )


def _notes_block(notes) -> list[str]:
    import textwrap

    out = []
    for n, name, printed, lines in notes:
        if isinstance(name, list):  # a note that rows of a paper's table share
            name, printed = (name[0], printed) if len(name) == 1 else (f"{len(name)} rows, {name[0]} to {name[-1]}", "")
        head = f"[{n}] {name} {printed}".rstrip()
        body = [f"{head}: {lines[0]}"] + [f"    {x}" for x in lines[1:]]
        out.append("\n".join(textwrap.fill(b, 110, subsequent_indent="    ") for b in body))
    return out


def _table_report(args, table, assessed, objects) -> tuple[str, list[str]]:
    """One paper's table: one line per row, a column group per printed quantity, its notes and summary."""
    from tabulate import tabulate

    from archspec.render.text import signed_pct

    quantities = list(dict.fromkeys(a.claim.quantity for _, rows in assessed for a in rows))
    label = {"params": "params", "non_embedding_params": "non-embedding", "embedding_params": "embedding",
             "active_params": "active", "training_flops": "training FLOPs", "pf_days": "PF-days"}  # fmt: skip
    headers = ["model"]
    for q in quantities:
        headers += [f"{label[q]} printed", "computed", "status"]
    headers.append("note")
    lines, notes, statuses, unexplained = [], [], [], []
    shared: dict[tuple[str, ...], int] = {}
    explained = 0
    for row, rows in assessed:
        objects.append({"name": row.spec.name, "table": table.title, "quote": row.quote,
                        "claims": [a.to_dict() for a in rows]})  # fmt: skip
        cells = {q: ([], [], []) for q in quantities}
        refs = []
        for a in rows:
            c = a.claim
            printed, computed, status = cells[c.quantity]
            printed.append(c.printed)
            computed.append(_like_printed(c.printed, a.computed))
            cell = a.status if a.status == "match" else f"{a.status} {signed_pct(a.deviation, 1)}"
            if a.conventions and a.conventions["status"] != a.status:  # as the source counts, beside archspec's
                cell += f"; {a.conventions['status']} as counted"
            status.append(cell)
            statuses.append(a.status)
            explained += a.status == "off" and a.explained
            extra = notes_of(a, lambda value, c=c: _like_printed(c.printed, value))
            if extra:  # rows with the same note (a convention the whole table follows) share its number
                n = shared.setdefault(tuple(extra), len(notes) + 1)
                if n > len(notes):
                    notes.append((n, [], c.printed, extra))
                notes[n - 1][1].append(row.spec.name)
                refs.append(f"[{n}]")
            if a.unexplained_off:
                unexplained.append(f"{row.spec.name} {c.quantity} {c.printed}")
        line = [row.spec.name]
        for q in quantities:
            line += ["; ".join(x) for x in cells[q]]
        lines.append(line + [" ".join(refs)])
    fmt = "github" if args.format == "markdown" else "simple"
    text = [f"{table.title} ({table.source})", tabulate(lines, headers=headers, tablefmt=fmt, disable_numparse=True)]
    text += [""] + _notes_block(notes) if notes else []
    text.append(_summary(statuses, f"\n{len(assessed)} rows, {len(statuses)} printed figures", explained))
    if unexplained:
        text.append("off with no recorded explanation: " + "; ".join(unexplained))
    return "\n".join(text), unexplained


def run(args) -> int:
    from archspec.render.text import signed_pct
    from archspec.validate.claims import assess

    objects, rows, notes = [], [], []
    unexplained, in_tables = [], []
    from archspec.io.catalog import claim_sets, with_overrides
    from archspec.io.loading import parse_assignments

    overrides = parse_assignments(args.overrides)
    tables = _tables(args.models or [])
    blocks = []
    for ref in tables:
        from archspec.io.tables import load_table

        table = load_table(ref)
        assessed = []
        for row in table.rows:
            spec = with_overrides(row.spec, overrides, row.spec.name)
            assessed.append((row, [assess(spec, c) for c in row.claims]))
        text, off = _table_report(args, table, assessed, objects)
        blocks.append(text)
        in_tables += off
    others = [r for r in args.models or [] if r not in tables]
    sets = claim_sets(others, overrides) if others or not tables else []
    for spec, claims in sets:
        assessed = [assess(spec, c) for c in claims]
        objects.append({"name": spec.name, "claims": [a.to_dict() for a in assessed]})
        for a in assessed:
            c = a.claim
            lines = notes_of(a)
            ref = ""
            if lines:
                notes.append((len(notes) + 1, spec.name, c.printed, lines))
                ref = f"[{len(notes)}]"
            if a.unexplained_off:
                unexplained.append(f"{spec.name} {c.quantity} {c.printed} ({c.source})")
            rows.append([spec.name, c.quantity, c.printed, _fmt_quantity(c.quantity, a.computed),
                         signed_pct(a.deviation), a.status, c.source, ref])  # fmt: skip

    def people() -> str:
        out = list(blocks)
        if sets:
            out.append(_claims_report(args, rows, notes, unexplained))
        return "\n\n".join(out)

    render(args, objects, people)
    return EXIT_MISMATCH if unexplained or in_tables else EXIT_OK


def _claims_report(args, rows, notes, unexplained) -> str:
    headers = ["model", "quantity", "claimed", "computed", "deviation", "status", "source", "note"]
    widths = [None, None, None, None, None, None, 48, None] if args.format == "table" else None
    from tabulate import tabulate

    out = tabulate(rows, headers=headers, tablefmt="github" if args.format == "markdown" else "simple",
                   disable_numparse=True, maxcolwidths=widths)  # fmt: skip
    blocks = [out] + ([""] + _notes_block(notes) if notes else [])
    blocks.append(_summary([r[5] for r in rows], f"\n{len(rows)} claims"))
    if unexplained:
        blocks.append("off with no recorded explanation: " + "; ".join(unexplained))
    return "\n".join(blocks)
