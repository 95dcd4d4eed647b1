"""Pictures for planning: parameters by component, memory against sequence length, scaling with a field.

Two layers, kept apart so that scripts and tests can read the numbers behind every picture:

- data functions (:func:`breakdown_data`, :func:`memory_data`, :func:`scaling_data`) return plain
  data built from the same library functions as the tables (``count_params``,
  ``estimate_memory``, :func:`archspec.plan.sweep.sweep`); they need nothing beyond archspec itself;
- drawing functions (:func:`draw_breakdown`, :func:`draw_memory`, :func:`draw_scaling`, or
  :func:`draw` by kind) write a PNG or SVG file, chosen by the suffix. They import matplotlib on
  first use (the optional extra ``[plot]``) and never touch pyplot's global state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archspec.core.errors import SpecError
from archspec.core.records import per_item, rendered
from archspec.spec.model import ModelSpec

KINDS = ("breakdown", "memory", "scaling")
SUFFIXES = (".png", ".svg")
GIB = 2**30
MATPLOTLIB_MISSING = "plotting needs matplotlib, the optional extra [plot]: pip install 'archspec-transformers[plot]'"


# ---------------------------------------------------------------- data


@dataclass(frozen=True)
class BreakdownData:
    """Parameters by component for each model; `counts[i][j]` is model i's count of component j."""

    models: list[str]
    components: list[str]  # components any of the models has, in COMPONENTS order
    counts: list[list[int]]
    totals: list[int]
    actives: list[int] | None = None  # parameters one token uses (less than the total for a mixture of experts)

    @property
    def shares(self) -> list[list[float]]:
        return [[c / t for c in row] for row, t in zip(self.counts, self.totals)]

    def to_dicts(self) -> list[dict[str, Any]]:
        actives = self.actives or self.totals
        return [
            {"name": m, "total": t, "active": a, "components": dict(zip(self.components, row))}
            for m, row, t, a in zip(self.models, self.counts, self.totals, actives)
        ]


def breakdown_data(specs: list[ModelSpec]) -> BreakdownData:
    from archspec.count.params import COMPONENTS, count_params

    counts = [count_params(s) for s in specs]
    present = [c for c in COMPONENTS if any(pc.components[c] for pc in counts)]
    return BreakdownData(
        models=[s.name for s in specs],
        components=present,
        counts=[[pc.components[c] for c in present] for pc in counts],
        totals=[pc.total for pc in counts],
        actives=[pc.active for pc in counts],
    )


@dataclass(frozen=True)
class MemoryCurve:
    """One model's memory at each sequence length: training total and inference total (weights + KV)."""

    name: str
    seq_lens: list[int]
    training_bytes: list[int]
    inference_bytes: list[int]


@dataclass(frozen=True)
class MemoryData:
    """Memory curves of several models with the settings they share; one record per curve (to_dicts)."""

    batch: int
    dtype: str
    optimizer: str
    recompute: str
    curves: list[MemoryCurve] = field(metadata=rendered(hidden=True))
    accelerator: str | None = field(metadata=rendered(omit_none=True))  # its title, when a capacity line is drawn
    capacity_bytes: int | None = field(metadata=rendered(omit_none=True))

    def to_dicts(self) -> list[dict[str, Any]]:
        return per_item(self, "curves")


def memory_seq_lens(spec: ModelSpec, longest: int | None = None) -> list[int]:
    """Powers of two from 128 up to `longest` (default: max_positions), and `longest` itself."""
    top = spec.max_positions if longest is None else longest
    if top < 1:
        raise SpecError(f"the longest sequence must be positive, got {top}")
    out, n = [], 128
    while n < top:
        out.append(n)
        n *= 2
    return out + [top]


def memory_data(
    specs: list[ModelSpec],
    batch: int = 1,
    dtype: str = "bf16",
    optimizer: str = "adamw",
    recompute: str = "none",
    gpu: str | None = None,
    longest: int | None = None,
) -> MemoryData:
    """Training and inference memory of each model at the sequence lengths of `memory_seq_lens`;
    with `gpu`, the accelerator's capacity for the line drawn across."""
    from archspec.memory import estimate_memory
    from archspec.plan.hardware import accelerator

    acc = accelerator(gpu) if gpu else None
    curves = []
    for spec in specs:
        lens = memory_seq_lens(spec, longest)
        try:
            ms = [estimate_memory(spec, batch, T, dtype, optimizer, recompute) for T in lens]
        except ValueError as exc:
            raise SpecError(f"{spec.name}: {exc}") from None
        curves.append(
            MemoryCurve(
                name=spec.name,
                seq_lens=lens,
                training_bytes=[m.training_total_bytes for m in ms],
                inference_bytes=[m.inference_total_bytes for m in ms],
            )
        )
    return MemoryData(
        curves=curves,
        batch=batch,
        dtype=ms[0].dtype if specs else dtype,
        optimizer=optimizer,
        recompute=recompute,
        accelerator=acc.title if acc else None,
        capacity_bytes=acc.memory_bytes if acc else None,
    )


@dataclass(frozen=True)
class ScalingCurve:
    name: str
    values: list[int]
    total: list[int]
    forward_per_token: list[int | float]
    seq_lens: list[int]  # the sequence length of each FLOPs-per-token figure


@dataclass(frozen=True)
class ScalingData:
    """Scaling curves of several models along one field; one record per curve (to_dicts)."""

    field: str
    curves: list[ScalingCurve] = field(metadata=rendered(hidden=True))

    def to_dicts(self) -> list[dict[str, Any]]:
        return per_item(self, "curves")


def scaling_data(specs: list[ModelSpec], vary, seq_len: int | None = None) -> ScalingData:
    """Parameters and forward FLOPs per token of each model as one numeric field takes its values;
    `vary` is an archspec.plan.sweep.Vary or its text ('d_model=512:4096:512'). The rows are sweep's."""
    from archspec.plan.sweep import Vary, parse_vary, sweep

    v = vary if isinstance(vary, Vary) else parse_vary(vary)
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in v.values):
        raise SpecError(f"--vary {v}: a scaling plot needs a numeric field with whole-number values")
    curves = []
    for spec in specs:
        rows = list(sweep(spec, [v], seq_len, strict=True))
        curves.append(
            ScalingCurve(
                name=spec.name,
                values=[r[v.field] for r in rows],
                total=[r["total"] for r in rows],
                forward_per_token=[r["forward_per_token"] for r in rows],
                seq_lens=[r["seq_len"] for r in rows],
            )
        )
    return ScalingData(field=v.field, curves=curves)


# ---------------------------------------------------------------- drawing


def output_format(path: str | Path) -> str:
    """'png' or 'svg' from the suffix; a SpecError for anything else or a missing folder."""
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise SpecError(f"{p}: the output must end in .png or .svg, not {p.suffix or '(no suffix)'!r}")
    if not p.parent.is_dir():
        raise SpecError(f"{p}: no such folder {str(p.parent)!r}")
    if p.is_dir():
        raise SpecError(f"{p} is a folder; name the picture inside it, e.g. {p / ('plot' + p.suffix.lower())}")
    return p.suffix.lower()[1:]


def require_matplotlib() -> None:
    """A SpecError naming the extra when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SpecError(MATPLOTLIB_MISSING) from None


_STYLE = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": False,
    "legend.frameon": False,
    "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial", "Liberation Sans"],  # the SVG's fallbacks: narrow ones
    "svg.fonttype": "none",  # text stays text: smaller files, searchable labels
    "svg.hashsalt": "archspec",  # the same picture gives the same file
}
_COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974"]
# one colour per component of archspec.core.vocab.COMPONENTS, none shared (a legend with two blues names two
# components with one colour); tests/test_hostile_surfaces.py holds the keys equal to COMPONENTS
COMPONENT_COLOURS = {
    "embed": "#4c72b0",
    "position": "#64b5cd",
    "token_type": "#2a9d8f",
    "attention": "#dd8452",
    "cross_attention": "#f4c27a",
    "mixer": "#a05195",
    "mlp": "#55a868",
    "router": "#8c564b",
    "experts": "#c44e52",
    "shared_experts": "#e377c2",
    "norm": "#8172b3",
    "pooler": "#bcbd22",
    "head": "#444444",
    "mtp": "#9c755f",
}


def _figure(width: float, height: float):
    require_matplotlib()
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


DRAWABLE = 10**150  # a log axis spans its figures and margins in floats: past about the square root of the float
# range (1.8e308) its limits overflow


def drawable(values, what: str) -> list[float]:
    """`values` as the floats a picture draws; a SpecError when one is past DRAWABLE."""
    out = [float(v) for v in values] if all(abs(v) <= DRAWABLE for v in values) else None
    if out is None:
        largest = max(abs(v) for v in values)
        raise SpecError(f"{what} of {float(largest):.3g} is past what a picture's axis draws (10^150); "
                        "--format json gives the exact figures")  # fmt: skip
    return out


def _save(fig, path: str | Path) -> None:
    fmt = output_format(path)
    metadata = {"Date": None} if fmt == "svg" else {"Software": None}
    try:
        fig.savefig(path, format=fmt, dpi=120, metadata=metadata)
    except OSError as exc:
        raise SpecError(f"{path}: cannot write: {exc}") from None


def _count_axis(ax) -> None:
    """Tick labels such as 250M, 1.25B: the scale of the largest tick, then as many digits as needed."""
    from matplotlib.ticker import FuncFormatter

    scales = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"))

    def label(v: float, _pos) -> str:
        if v == 0:
            return "0"
        top = max(abs(t) for t in ax.get_yticks())
        for scale, suffix in scales:
            if top >= scale:
                return f"{v / scale:g}{suffix}"
        return f"{v:g}"

    ax.yaxis.set_major_formatter(FuncFormatter(label))


def draw_breakdown(data: BreakdownData, path: str | Path) -> None:
    """Horizontal bars, one per model, split by component as shares of the model's total."""
    import matplotlib

    from archspec.render.text import human

    output_format(path)
    with matplotlib.rc_context(_STYLE):
        fig = _figure(7.0, 1.2 + 0.45 * len(data.models))
        ax = fig.add_subplot()
        ys = list(range(len(data.models)))[::-1]  # first model on top
        left = [0.0] * len(data.models)

        for j, comp in enumerate(data.components):
            widths = [100 * row[j] for row in data.shares]
            colour = COMPONENT_COLOURS[comp]
            ax.barh(ys, widths, left=left, height=0.6, color=colour, label=comp, edgecolor="white", linewidth=0.5)
            for y, x0, w in zip(ys, left, widths):
                if w >= 7:
                    ax.text(x0 + w / 2, y, f"{w:.0f}%", ha="center", va="center", color="white", fontsize=8)
            left = [a + b for a, b in zip(left, widths)]
        actives = data.actives or data.totals
        labels = [f"{m} ({human(t)}" + (f", {human(a)} active)" if a != t else ")")
                  for m, t, a in zip(data.models, data.totals, actives)]  # fmt: skip
        for y, t, a in zip(ys, data.totals, actives):
            if a != t:  # a mixture of experts: where the share one token uses ends
                x = 100 * a / t
                ax.plot([x, x], [y - 0.38, y + 0.38], color="black", linewidth=1.5)
                ax.annotate("active", (x, y + 0.38), xytext=(0, 1), textcoords="offset points", ha="center",
                            va="bottom", fontsize=7)  # fmt: skip
        ax.set_yticks(ys, labels)
        ax.set_xlim(0, 100)
        ax.set_xlabel("share of parameters (%)")
        ax.spines["left"].set_visible(False)
        ax.tick_params(axis="y", length=0)
        ax.set_title("Parameters by component (total beside each model)", loc="left")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, handlelength=1)
        _save(fig, path)


def draw_memory(data: MemoryData, path: str | Path) -> None:
    """Training (solid) and inference (dashed) memory against sequence length, log-log, with the
    accelerator's capacity as a dotted line."""
    import matplotlib
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    output_format(path)
    with matplotlib.rc_context(_STYLE):
        fig = _figure(7.0, 4.0)
        ax = fig.add_subplot()
        for i, c in enumerate(data.curves):
            colour = _COLOURS[i % len(_COLOURS)]
            lengths = drawable(c.seq_lens, "a sequence length")  # floats: numpy takes no log of an int past 2^63
            ax.plot(lengths, drawable([b / GIB for b in c.training_bytes], "memory (GiB)"), "-o", color=colour,
                    markersize=3, label=f"{c.name} training")  # fmt: skip
            ax.plot(lengths, drawable([b / GIB for b in c.inference_bytes], "memory (GiB)"), "--o", color=colour,
                    markersize=3, label=f"{c.name} inference")  # fmt: skip
        if data.capacity_bytes:
            cap = data.capacity_bytes / GIB
            ax.axhline(cap, color="#444444", linestyle=":", linewidth=1)
            ax.annotate(f"{data.accelerator}: {cap:g} GiB", (0.0, cap), xycoords=("axes fraction", "data"),
                        xytext=(2, 3), textcoords="offset points", fontsize=8, color="#444444")  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = length_ticks(sorted({n for c in data.curves for n in c.seq_lens}))
        ax.xaxis.set_major_locator(FixedLocator([float(t) for t in ticks]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: tokens_label(int(round(v)))))
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
        ax.set_xlabel("sequence length (tokens; K = 1,024)")
        ax.set_ylabel("memory (GiB, log scale)")
        recompute = "" if data.recompute == "none" else f", recompute {data.recompute}"
        ax.set_title(
            f"Memory against sequence length (batch {data.batch}, {data.dtype})\n"
            f"training = weights + gradients + {data.optimizer} states + activations{recompute}; "
            "inference = weights + KV cache",
            loc="left",
            fontsize=9,
        )
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
        _save(fig, path)


MAX_TICKS = 8


def length_ticks(lens: list[int], most: int = MAX_TICKS) -> list[int]:
    """At most `most` of the sequence lengths as ticks, evenly spaced, the longest always among them."""
    if len(lens) <= most:
        return lens
    step = -(-(len(lens) - 1) // (most - 1))
    picked = lens[::-1][::step][::-1]
    return picked


def tokens_label(n: int) -> str:
    """Short labels that stay apart at any range: 512, 8K, 128K, 1M, 2^50 (K = 1,024 tokens, M = 1,024 K),
    exact digits when the length is not a whole number of K; past 2^40 a power of two as 2^k, else 3 digits."""
    if n >= 2**40:
        return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else f"{n:.3g}"
    for scale, suffix in ((2**20, "M"), (2**10, "K")):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{suffix}"
    return f"{n:,}"


def draw_scaling(data: ScalingData, path: str | Path) -> None:
    """Parameters and forward FLOPs per token against the varied field, side by side."""
    import matplotlib

    output_format(path)
    with matplotlib.rc_context(_STYLE):
        fig = _figure(7.5, 3.4)
        ax_p, ax_f = fig.subplots(1, 2)
        for i, c in enumerate(data.curves):
            colour = _COLOURS[i % len(_COLOURS)]
            xs = drawable(c.values, data.field) if all(isinstance(v, int | float) for v in c.values) else c.values
            ax_p.plot(xs, drawable(c.total, "a parameter count"), "-o", color=colour, markersize=3, label=c.name)
            ax_f.plot(xs, drawable(c.forward_per_token, "FLOPs per token"), "-o", color=colour, markersize=3,
                      label=c.name)  # fmt: skip
        lens = sorted({n for c in data.curves for n in c.seq_lens})
        at = f"{lens[0]:,}-token sequences" if len(lens) == 1 else "each model's context length"
        fig.suptitle(
            f"Scaling with {data.field}: exact parameters, and forward FLOPs per token\n"
            f"over {at} (2 FLOPs per multiply-add)",
            x=0.01,
            ha="left",
            fontsize=9,
        )
        for ax, ylabel in ((ax_p, "parameters"), (ax_f, "forward FLOPs per token")):
            ax.set_xlabel(data.field)
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0)
            _count_axis(ax)
        if len(data.curves) > 1:
            ax_p.legend(fontsize=8)
        _save(fig, path)


def draw(kind: str, data, path: str | Path) -> None:
    """Draw `data` (from the data function of the same kind) to `path`."""
    drawers = {"breakdown": draw_breakdown, "memory": draw_memory, "scaling": draw_scaling}
    if kind not in drawers:
        raise SpecError(f"unknown plot {kind!r}; use one of {', '.join(KINDS)}")
    drawers[kind](data, path)
