"""One self-contained HTML page about a set of models, to attach to a pull request or a plan.

Everything on the page comes from the library's own functions, as the commands print them: the
comparison (``archspec.plan.compare``), the parameter breakdowns (``count_params``), the three pictures
(``archspec.render.plot``, drawn as inline SVG), memory for training and inference (``estimate_memory``),
where each model fits (``archspec.plan.fit``) and the published claims with their sources
(``archspec.validate.claims.assess``). The page loads nothing at view time: no scripts, no fonts, no
stylesheets or images from elsewhere; its CSS and SVG are inline.
"""

from __future__ import annotations

import html
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from archspec.core.errors import SpecError
from archspec.spec.model import ModelSpec

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; margin: 0 auto;
       max-width: 1100px; padding: 24px; color: #1b1b1b; }
h1 { font-size: 24px; margin-bottom: 4px; } h2 { font-size: 19px; margin-top: 36px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; margin-top: 22px; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d6d6d6; padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; } td.wrap { white-space: normal; min-width: 260px; }
td.no { color: #a00; } td.yes { color: #060; }
figure { margin: 12px 0; } figure svg { max-width: 100%; height: auto; }
.note { color: #555; font-size: 12.5px; } code { font-size: 12.5px; }
"""


@dataclass(frozen=True)
class ReportInputs:
    specs: list[ModelSpec]
    refs: list[str]  # what each MODEL was on the command line (a preset name has claims)
    seq_len: int
    batch: int
    accelerators: list  # archspec.plan.hardware.Accelerator


def _e(x) -> str:
    return html.escape(str(x))


def _table(headers: list[str], rows: list[list], left: int = 1, classes: list[list[str]] | None = None,
           wrap_last: bool = False) -> str:  # fmt: skip
    """An HTML table; the first `left` columns align left (names), the rest right (numbers)."""
    head = "".join(f'<th class="{"l" if j < left else ""}">{_e(h)}</th>' for j, h in enumerate(headers))
    body = []
    for i, r in enumerate(rows):
        cells = []
        for j, c in enumerate(r):
            cls = ["l"] if j < left else []
            if classes and classes[i][j]:
                cls.append(classes[i][j])
            if wrap_last and j == len(r) - 1:
                cls.append("wrap")
            cells.append(f'<td class="{" ".join(cls)}">{_e(c)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _svg(kind: str, data) -> str:
    """The picture `kind` of `data`, drawn by archspec.render.plot, as inline SVG markup."""
    from archspec.render import plot

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{kind}.svg"
        try:
            plot.draw(kind, data, path)
        except SpecError as exc:  # figures past what an axis draws: the tables still hold them
            return f'<p class="note" id="plot-{kind}">{kind} not drawn: {_e(exc)}</p>'
        text = path.read_text(encoding="utf-8")
    text = re.sub(r"^<\?xml[^>]*>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    return f'<figure id="plot-{kind}">{text}</figure>'


def scaling_field(specs: list[ModelSpec]) -> str | None:
    """The layer count every model has: decoder_layers, else encoder_layers; None when they differ."""
    for field in ("decoder_layers", "encoder_layers"):
        if all(getattr(s, field) > 0 for s in specs):
            return field
    return None


def build_report(inputs: ReportInputs) -> str:
    """The page, as one string of HTML: its head, then one section per question."""
    from archspec.render import plot

    if not inputs.specs:
        raise SpecError("a report needs at least one MODEL")
    plot.require_matplotlib()
    out = _head(inputs)
    for section in (_comparison, _breakdowns, _pictures, _memory, _fits, _claims):
        out += section(inputs)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _head(inputs: ReportInputs) -> list[str]:
    from archspec import __version__

    names = ", ".join(s.name for s in inputs.specs)
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>archspec report: {_e(names)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>archspec report: {_e(names)}</h1>",
        f'<p class="note">Exact counts by archspec {_e(__version__)}; every figure below is computed from the '
        f"spec (FLOPs: 2 per multiply-accumulate; bytes: GiB = 2<sup>30</sup>). Sequences of {inputs.seq_len:,} "
        f"tokens (a model with a shorter context at its context, marked *), batch {inputs.batch}.</p>",
    ]


def _comparison(inputs: ReportInputs) -> list[str]:
    from archspec.plan.compare import compare
    from archspec.render.text import human, human_bytes

    T = inputs.seq_len
    rows = [compare(s, T) for s in inputs.specs]
    moe = any(r.count.active != r.count.total for r in rows)
    headers = ["model", "layers", "d_model", "heads", "d_ff", "vocab", "context", "params",
               *(["active"] if moe else []), "non-embedding", f"FLOPs/token at {T:,}", "weights bf16",
               "KV cache/token"]  # fmt: skip
    body = [[r.spec.name, r.spec.n_layers, r.spec.d_model, r.spec.n_heads, r.spec.d_ff,
             f"{r.spec.vocab_size:,}", f"{r.spec.max_positions:,}", human(r.count.total),
             *([human(r.count.active)] if moe else []), human(r.count.non_embedding),
             human(r.forward_per_token) + (f" (at {r.seq_len:,}*)" if r.seq_len_clamped else ""),
             human_bytes(r.weights_bytes), human_bytes(r.kv_cache_bytes_per_token)] for r in rows]  # fmt: skip
    return ['<h2 id="comparison">Comparison</h2>', _table(headers, body)]


def _breakdowns(inputs: ReportInputs) -> list[str]:
    from archspec.count.params import COMPONENTS, count_params
    from archspec.render.text import exact, human, pct, signed_pct

    out = ['<h2 id="breakdowns">Parameters by component</h2>']
    for s in inputs.specs:
        c = count_params(s)
        b = [[n, human(v), exact(v), pct(c.share(n))] for n in COMPONENTS if (v := c.components[n])]
        b.append(["total", human(c.total), exact(c.total), pct(1.0)])
        if c.active != c.total:
            b.append(["active per token", human(c.active), exact(c.active), pct(c.active / c.total)])
        out += [f"<h3>{_e(s.name)}</h3>", _table(["component", "params", "exact", "share"], b),
                f'<p class="note">non-embedding (Kaplan\'s N) {human(c.non_embedding)} ({exact(c.non_embedding)}); '
                f"seed estimate 12·L·d² + V·d {human(c.estimate)}, "
                f"{signed_pct((c.estimate - c.total) / c.total)} vs exact</p>"]  # fmt: skip
    return out


def _pictures(inputs: ReportInputs) -> list[str]:
    from archspec.render import plot

    specs, T, B = inputs.specs, inputs.seq_len, inputs.batch
    out = ['<h2 id="plots">Pictures</h2>', _svg("breakdown", plot.breakdown_data(specs))]
    shortest = min(T, *(s.max_positions for s in specs))  # the scaling plot's one length: the shortest context
    out.append(_svg("memory", plot.memory_data(specs, B, "bf16")))  # each model over its own context
    field = scaling_field(specs)
    if field:
        top = 2 * max(getattr(s, field) for s in specs)
        values = ",".join(str(2**i) for i in range(0, top.bit_length()) if 2**i <= top)
        try:
            out.append(_svg("scaling", plot.scaling_data(specs, f"{field}={values}", shortest)))
        except SpecError as exc:
            out.append(f'<p class="note" id="plot-scaling">scaling not drawn: {_e(exc)}</p>')
    else:
        out.append('<p class="note" id="plot-scaling">scaling not drawn: the models share no layer-count field</p>')
    return out


def _memory(inputs: ReportInputs) -> list[str]:
    from archspec.memory import estimate_memory
    from archspec.plan.compare import context_seq_len
    from archspec.render.text import human_bytes

    mem_rows = []
    for s in inputs.specs:
        t, _ = context_seq_len(s, inputs.seq_len)
        m = estimate_memory(s, inputs.batch, t, "bf16")
        mem_rows.append([s.name, f"{t:,}", human_bytes(m.weights_bytes), human_bytes(m.gradients_bytes),
                         human_bytes(m.optimizer_bytes), human_bytes(m.activations_bytes),
                         human_bytes(m.training_total_bytes), human_bytes(m.kv_cache_bytes),
                         human_bytes(m.inference_total_bytes)])  # fmt: skip
    return ['<h2 id="memory">Memory for training and inference</h2>',
            _table(["model", "tokens", "weights", "gradients", "AdamW states", "activations", "training total",
                    "KV cache", "inference total"], mem_rows),
            '<p class="note">One device, bf16 weights and activations (flash attention, no recomputation), AdamW '
            "in mixed precision (16 bytes per parameter); inference: weights + KV cache of the batch.</p>"]  # fmt: skip


def _fits(inputs: ReportInputs) -> list[str]:
    from archspec.plan.fit import DTYPES

    columns = [(task, d) for task in ("inference", "training") for d in DTYPES[task]]
    out = ['<h2 id="fit">Where each model fits</h2>']
    for s in inputs.specs:
        out += _fit(inputs, s, columns)
    out.append('<p class="note">The fewest devices that hold the model, and the layout: TP tensor parallel, PP '
               "pipeline stages, ZeRO stage over DP data-parallel devices, as <code>archspec fit</code> plans them. "
               "Workspace and fragmentation not counted.</p>")  # fmt: skip
    return out


def _fit(inputs: ReportInputs, s: ModelSpec, columns: list[tuple[str, str]]) -> list[str]:
    """One model on every accelerator: a table of the ones it needs more than one device of, a line for the rest."""
    from archspec.plan.compare import context_seq_len
    from archspec.plan.fit import fit

    B = inputs.batch
    t, clamped = context_seq_len(s, inputs.seq_len)
    memo: dict = {"inference": {}, "training": {}}
    rows, classes, single = [], [], []
    for acc in inputs.accelerators:
        row, cls = [acc.name], [""]
        plans = [fit(s, acc, d, task, B, t, memo[task]) for task, d in columns]
        if all(f.devices == 1 for f in plans):  # one device for every task and dtype: said in one line
            single.append(acc.name)
            continue
        for f in plans:
            row.append(f"{f.devices:,} ({f.layout})" if f.devices else "does not fit")
            cls.append("yes" if f.devices == 1 else ("no" if not f.devices else ""))
        rows.append(row)
        classes.append(cls)
    out = [f"<h3>{_e(s.name)}: batch {B} x {t:,} tokens{'*' if clamped else ''}</h3>"]
    if single:
        out.append(f'<p class="fit-one">One device of each of these holds it for every task and dtype below: '
                   f"{_e(', '.join(single))}.</p>")  # fmt: skip
    if rows:
        out.append(_table(["accelerator", *(f"{task} {d}" for task, d in columns)], rows, classes=classes))
    return out


def _claims(inputs: ReportInputs) -> list[str]:
    from archspec.io.catalog import get_preset, preset_names
    from archspec.render.text import human, signed_pct
    from archspec.validate.claims import assess

    out = ['<h2 id="claims">Published claims</h2>']
    known = set(preset_names())
    claim_rows = []
    for ref, s in zip(inputs.refs, inputs.specs):
        if ref not in known:
            continue
        for c in get_preset(ref).claims:
            a = assess(s, c)
            computed = human(a.computed) if c.quantity.endswith("params") else f"{float(a.computed):.4g}"
            claim_rows.append([s.name, c.quantity, c.printed, computed, signed_pct(a.deviation), a.status, c.source])
    if claim_rows:
        classes = [["", "", "", "", "", "yes" if r[5] == "match" else ("no" if r[5] == "off" else ""), ""]
                   for r in claim_rows]  # fmt: skip
        out.append(_table(["model", "quantity", "claimed", "computed", "deviation", "status", "source"], claim_rows,
                          left=2, classes=classes, wrap_last=True))  # fmt: skip
        out.append('<p class="note">match: the exact value rounds to the printed figure; near: within 1%; '
                   "<code>archspec validate</code> gives the explanations.</p>")  # fmt: skip
    else:
        out.append('<p class="note">No published claims are recorded for these models (claims live with the '
                   "presets).</p>")  # fmt: skip
    return out
