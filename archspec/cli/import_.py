"""`archspec import`: the archspec spec file of a Hugging Face config.json or a GGUF file's header (TOML on
stdout, or -o FILE by its suffix): transformers' defaults for missing keys, the head of the class in `architectures`;
keys the spec cannot represent are refused by name."""

from __future__ import annotations

import argparse
import sys

from archspec.cli.output import EXIT_OK, emit
from archspec.core.errors import SpecError

HELP = (
    "the archspec spec file of a Hugging Face config.json (TOML on stdout, or -o FILE by its suffix): "
    "transformers' defaults for missing keys, the head of the class in `architectures`; keys the spec "
    "cannot represent are refused by name"
)
EXAMPLES = (
    "archspec import Llama-3-8B/config.json\n  archspec import mixtral/config.json -o mixtral.toml\n"
    "  archspec import t5-base.json --format json\n  archspec import flan-t5-xxl/ --set tie_embeddings=false"
)
MODELS = None
DEFAULT_FORMAT = None
FORMATS = (["json"], "json: print the spec as JSON instead of TOML (with -o, the suffix decides)")
OVERRIDES = True
# options this command has that change nothing in some uses of it: (dest, used, what it needs)
UNUSED_UNLESS = [
    ("format", lambda a: not a.output and a.format == "json",
     "--format changes nothing here: `archspec import` prints TOML, or JSON with --format json; "
     "with -o FILE the suffix of FILE chooses"),
]  # fmt: skip


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", metavar="CONFIG", help="a Hugging Face config.json, a folder holding one, or a .gguf file")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the spec here (.toml, .json or .yaml, by the suffix) instead of printing TOML",
    )


def run(args) -> int:
    from pathlib import Path

    from archspec.io import loading, specfile
    from archspec.io.catalog import with_overrides
    from archspec.io.loading import build_spec, parse_assignments

    overrides = parse_assignments(args.overrides)
    if str(args.config).lower().endswith(".gguf"):  # a GGUF file's header (archspec.sources.gguf)
        from archspec.sources import gguf

        header, stored, _ = gguf.read_model(args.config)
        imported = gguf.imported(header, gguf.spec_name(args.config), args.config, stored)
    else:
        imported = loading.import_config(args.config)
    spec = with_overrides(build_spec(imported.data, args.config), overrides, args.config)
    suffix = Path(args.output).suffix if args.output else (".json" if args.format == "json" else ".toml")
    comments = [
        f"{spec.name}: the archspec spec of {args.config} (model_type {imported.model_type}, "
        f"{imported.architecture}), written by `archspec import`",
        *(f"note: {n}" for n in imported.notes),
    ]
    text = specfile.dump(specfile.essential(spec), suffix, comments)
    for note in imported.notes:
        sys.stderr.write(f"archspec: note: {note}\n")
    if not args.output:
        emit(text)
        return EXIT_OK
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{args.output}: cannot write: {exc}") from None
    return EXIT_OK
