"""`archspec check`: a checkpoint's stored tensors (safetensors headers) against the spec of its config,
tensor by tensor; exit 1 when they differ."""

from __future__ import annotations

from archspec.cli.models import read_loaded
from archspec.cli.output import EXIT_OK, render
from archspec.core.errors import SpecError

HELP = "the stored tensors of a checkpoint against its config's spec, tensor by tensor (exit 1 when they differ)"
EXAMPLES = "archspec check tests/data/checkpoints/tiny-llama\n  archspec check Qwen/Qwen3-8B --format json"
OVERRIDES = False
SHOWN = 20  # names listed per kind of difference in the table (JSON lists all)


def _tally(t) -> dict:
    return {"tensors": t.tensors, "params": t.params, "bytes": t.bytes}


def to_dict(r) -> dict:
    return {
        "name": r.name,
        "source": r.source,
        "files": list(r.files),
        "layout": r.layout,
        "ok": r.ok,
        "missing": list(r.missing),
        "misshapen": [
            {"names": list(m.names), "stored": [list(s) for s in m.stored], "expected": [list(s) for s in m.expected]}
            for m in r.misshapen
        ],
        "extra": list(r.extra),
        "hidden": {k: _tally(v) for k, v in r.hidden.items()},
        "scales": _tally(r.scales),
        "buffers": _tally(r.buffers),
        "by_dtype": {k: _tally(v) for k, v in r.by_dtype.items()},
        "by_component": {k: _tally(v) for k, v in r.by_component.items()},
        "stored_params": r.stored.params,
        "stored_bytes": r.stored.bytes,
        "spec_params": r.spec_params,
        "weights_format": r.weights_format,
        "predicted_bytes": r.predicted_bytes,
    }


def report(loaded):
    """The check of one resolved model (archspec.io.loading.Loaded: the spec and its source; a SpecError
    where there is nothing to check it by)."""
    from archspec.sources.check import check
    from archspec.sources.names import known_types, layouts

    spec, source = loaded.spec, loaded.source
    if source is None or not source.tensors:
        what = "its Hub repository holds no safetensors" if source is not None else "it is not a checkpoint"
        raise SpecError(
            f"{spec.name}: nothing to check ({what}); give a checkpoint folder (config.json beside "
            "*.safetensors), a .safetensors file or a Hub id of a repository with weights"
        )
    if source.format == "gguf":  # llama.cpp's names for the spec's tensors (archspec.sources.gguf_names)
        from archspec.sources.gguf_names import check as check_gguf

        return check_gguf(spec, list(source.tensors), source.model_type, source.ref, source.files, source.file_type)
    maps = layouts(source.model_type)
    if not maps:
        raise SpecError(
            f"{source.ref}: archspec has no weight map for model_type {source.model_type!r}, so it cannot "
            f"name the stored tensors for the spec's (it has for: {', '.join(known_types())})"
        )
    return check(spec, list(source.tensors), maps, source.ref, source.files)


def _names(items, limit=SHOWN) -> list[str]:
    out = [f"  {n}" for n in items[:limit]]
    if len(items) > limit:
        out.append(f"  ... and {len(items) - limit:,} more (--format json lists all)")
    return out


def run(args) -> int:
    from archspec.count.params import count_params
    from archspec.render.text import exact, human, human_bytes, table

    read = read_loaded(args)
    specs = [loaded.spec for loaded in read]
    reports = [report(loaded) for loaded in read]
    objects = [to_dict(r) for r in reports]

    def people() -> str:
        blocks = []
        for spec, r in zip(specs, reports):
            lines = [f"{r.name}: {r.source}, {len(r.files)} file(s), read as {r.layout}"]
            if r.missing:
                lines += [
                    f"missing ({len(r.missing):,}: the spec has them, the checkpoint does not):",
                    *_names(r.missing),
                ]
            if r.misshapen:
                lines.append(f"of another shape ({len(r.misshapen):,}):")
                lines += [
                    f"  {', '.join(m.names)}: stored {', '.join(map(str, m.stored))}, the spec's "
                    f"{', '.join(map(str, m.expected))}"
                    for m in r.misshapen[:SHOWN]
                ]
            for comp, t in r.hidden.items():
                lines.append(
                    f"not in the spec: {comp}, {t.tensors:,} tensors, {human(t.params)} params "
                    f"({exact(t.params)}), {human_bytes(t.bytes)}"
                )
            if r.extra:
                lines += [f"extra ({len(r.extra):,}: stored, not the spec's):", *_names(r.extra)]
            if r.scales.tensors:
                lines.append(
                    f"scales: {r.scales.tensors:,} tensors of their weights' scales, {human_bytes(r.scales.bytes)}"
                )
            if r.buffers.tensors:
                lines.append(f"buffers: {r.buffers.tensors:,} stored tensors the spec does not count as parameters")
            rows = [
                [d, f"{t.tensors:,}", human(t.params), exact(t.params), human_bytes(t.bytes), exact(t.bytes)]
                for d, t in r.by_dtype.items()
            ]
            lines.append(table(rows, ["dtype", "tensors", "values", "exact", "bytes", "exact bytes"], args.format))
            spec_components = count_params(spec).components
            rows = [
                [
                    c,
                    f"{t.tensors:,}",
                    human(t.params),
                    exact(t.params),
                    exact(spec_components.get(c, 0)),
                    human_bytes(t.bytes),
                ]
                for c, t in r.by_component.items()
            ]
            lines.append(table(rows, ["component", "tensors", "stored", "exact", "spec", "bytes"], args.format))
            lines.append(
                f"stored: {human(r.stored.params)} values ({exact(r.stored.params)}), "
                f"{human_bytes(r.stored.bytes)} ({exact(r.stored.bytes)} bytes); the spec: "
                f"{human(r.spec_params)} params ({exact(r.spec_params)})"
            )
            aside = (*r.hidden, "extra", "buffers", "scales")
            held = sum(t.bytes for c, t in r.by_component.items() if c not in aside)
            scales = f", their scales {exact(r.scales.bytes)} bytes besides" if r.scales.tensors else ""
            lines.append(f"the spec's tensors as stored: {human_bytes(held)} ({exact(held)} bytes){scales}")
            if r.weights_format:
                lines.append(
                    f"--weights {r.weights_format} (most stored values) predicts "
                    f"{human_bytes(r.predicted_bytes)} ({exact(r.predicted_bytes)} bytes) for the spec's tensors"
                )
            lines.append("the stored tensors are the spec's" if r.ok else "the stored tensors differ from the spec's")
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    render(args, objects, people)
    return EXIT_OK if all(r.ok for r in reports) else 1
