"""`archspec sweep`: one row per combination of --vary values: the varied fields, total and active
parameters, forward FLOPs per token, weights and KV cache per token. The rows stream from
archspec.sweep (the API's path): CSV and JSON lines are written as they are made, to standard output
or to a file (-o) that appears whole or not at all."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from archspec.cli.models import read_specs
from archspec.cli.options import DTYPE_HELP, dtype_name, positive_int, positive_length
from archspec.cli.output import EXIT_MISMATCH, EXIT_OK, ROUNDING_NOTE, OutputError, emit, fmt_value, progress_callback
from archspec.core.errors import SpecError, shown

HELP = (
    "one row per combination of --vary values: the varied fields, total and active parameters, forward FLOPs "
    "per token, weights and KV cache per token"
)
EXAMPLES = (
    "archspec sweep gpt2 --vary d_model=512:1024:256 --vary n_heads=8,16\n"
    "  archspec sweep gpt3-6.7b --vary n_kv_heads=1,8,32 --dtype bfloat16\n"
    "  archspec sweep llama-3-8b --vary d_model=3072:6144:128 --vary decoder_layers=16:48 "
    "--where 'total within 1% of 7e9'\n"
    "  archspec sweep gpt2 --vary d_model=256:4096:16 --vary decoder_layers=1:96 -o shapes.csv"
)
FORMATS = (
    ["table", "markdown", "json", "csv", "jsonl"],
    "output format: table (default), markdown, json (exact numbers), csv, jsonl (one JSON object a line); "
    "with -o, the file's suffix (.csv, .jsonl, .json, .md) when not given",
)
SKIPPED_SHOWN = 10  # refused combinations named on stderr, one line each; the rest are counted
TABLE_ROWS = 1_000  # rows a table or markdown prints; more are written to a file (-o) or as csv/jsonl
SUFFIX_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".json": "json", ".md": "markdown", ".txt": "table"}


def add_args(p: argparse.ArgumentParser) -> None:
    from archspec.memory import DTYPE_BYTES
    from archspec.plan.sweep import KEEP, LIMIT

    p.add_argument(
        "--vary",
        action="append",
        required=True,
        metavar="FIELD=VALUES",
        help="a field and its values: a list (d_model=512,1024; activation=gelu,swiglu) or an inclusive range "
        "START:STOP[:STEP] (d_model=512:4096:512); repeat for more fields: one row per combination",
    )
    p.add_argument(
        "--zip",
        action="append",
        metavar="FIELD,FIELD",
        default=[],
        help="vary these --vary fields in lock-step (equal-length lists: the first values together, then the "
        "second...) instead of in every combination; repeatable, e.g. --zip d_model,n_heads",
    )
    p.add_argument(
        "--keep",
        choices=list(KEEP),
        help="d_head: keep the head width while d_model varies, so that n_heads = d_model / d_head",
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="CONSTRAINT",
        help="keep the rows that satisfy it (repeatable): FIELD OP VALUE with OP one of == != < <= > >= "
        "('d_head == 128', 'kv_cache_bytes_per_token <= 131072'), or FIELD within P%% of VALUE "
        "('total within 1%% of 7e9'); FIELD is a spec field or a figure of the row",
    )
    p.add_argument(
        "--seq-len",
        type=positive_length,
        help="sequence length for FLOPs per token (default: each row's max_positions)",
    )
    p.add_argument("--dtype", default="bf16", type=dtype_name, choices=list(DTYPE_BYTES), help=DTYPE_HELP)
    p.add_argument(
        "--limit",
        type=positive_int,
        default=LIMIT,
        metavar="N",
        help=f"the most combinations a sweep runs (default {LIMIT:,}); --force runs any number",
    )
    p.add_argument("--force", action="store_true", help="run a sweep of more combinations than --limit")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the rows to FILE (CSV, JSON lines, JSON or markdown by --format or the suffix), streamed; "
        "the file appears when the sweep is done, never half-written; - is standard output",
    )


def run(args) -> int:
    from archspec.plan.sweep import sweep

    specs = read_specs(args)
    fmt = output_format(args)
    limit = None if args.force else args.limit
    zipped = [[f.strip() for f in z.split(",")] for z in args.zip]
    sweeps = [sweep(spec, args.vary, args.seq_len, args.dtype, where=args.where, zipped=zipped, keep=args.keep,
                    limit=limit, strict=False) for spec in specs]  # fmt: skip
    total = sum(s.n_combinations for s in sweeps)
    if limit is not None and total > limit:
        raise SpecError(f"the sweeps have {total:,} combinations, over the limit of {limit:,}; narrow the ranges, "
                        "raise --limit or give --force")  # fmt: skip
    with _Output(args.output) as out:
        if fmt in ("table", "markdown"):
            _tabulate(args, sweeps, fmt, out)
        else:
            _stream(sweeps, fmt, out, len(specs))
    if args.output is not None:
        rows = sum(s.n_rows for s in sweeps)
        emit(f"wrote {args.output}: {rows:,} rows ({fmt}) of {total:,} combinations")
    skipped = sum(s.n_skipped for s in sweeps)
    for s in sweeps:
        for refused in s.skipped[:SKIPPED_SHOWN]:
            sys.stderr.write(f"archspec: skipped {refused}\n")
        if s.n_skipped > SKIPPED_SHOWN:
            sys.stderr.write(f"archspec: skipped {s.n_skipped - SKIPPED_SHOWN:,} more combinations of {s.spec.name} "
                             "(archspec.sweep(...).skipped lists them)\n")  # fmt: skip
    return EXIT_MISMATCH if skipped else EXIT_OK


def output_format(args) -> str:
    """--format, or the output file's suffix; the file's folder must exist and be writable (checked before
    any row is made)."""
    given = "format" in getattr(args, "given", set())
    if args.output == "-":  # standard output, as the other tools of a pipe read it
        args.output = None
    if args.output is None:
        return args.format
    path = Path(args.output)
    if not given:
        if path.suffix.lower() not in SUFFIX_FORMATS:
            raise SpecError(f"-o {shown(args.output)}: say the format with --format csv|jsonl|json|markdown, or end "
                            f"the name in {', '.join(SUFFIX_FORMATS)}")  # fmt: skip
        args.format = SUFFIX_FORMATS[path.suffix.lower()]
    folder = path.parent
    if path.is_dir():
        raise SpecError(f"-o {shown(args.output)} is a folder; give a file name")
    if not folder.is_dir():
        raise SpecError(f"-o {shown(args.output)}: no such folder {shown(str(folder))}")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise SpecError(f"-o {shown(args.output)}: not writable")
    return args.format


class _Output:
    """Standard output, or a file written under a temporary name beside it and renamed when the sweep is
    done: an error or an interrupt leaves no half-written file."""

    def __init__(self, path: str | None) -> None:
        self.path, self.file, self.tmp = path, None, None

    def __enter__(self) -> _Output:
        if self.path is not None:
            import tempfile

            target = Path(self.path)
            try:
                fd, self.tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
            except OSError as exc:
                raise SpecError(f"-o {shown(self.path)}: cannot be written ({exc.strerror or exc})") from None
            self.file = os.fdopen(fd, "w", encoding="utf-8", newline="")
        return self

    def write(self, text: str) -> None:
        if self.file is None:
            emit(text)
            return
        try:
            self.file.write(text + "\n")
        except OSError as exc:
            raise OutputError(f"{self.path}: {exc.strerror or exc}") from None

    def __exit__(self, kind, exc, tb) -> None:
        if self.file is None:
            return
        try:
            self.file.close()
            if kind is None:
                os.replace(self.tmp, self.path)
        except OSError as err:
            kind = kind or OSError
            raise OutputError(f"{self.path}: {err.strerror or err}") from None
        finally:
            if kind is not None and os.path.exists(self.tmp):
                os.unlink(self.tmp)


def _ticks(s, i: int, n: int):
    label = f"sweep {s.spec.name}" + (f" ({i + 1}/{n})" if n > 1 else "")
    s.progress = progress_callback(label)


def _stream(sweeps, fmt: str, out: _Output, n: int) -> None:
    """CSV, JSON lines or a JSON array, one row at a time (the CSV header and the array's bracket with
    the first row, so that a sweep the spec refuses whole writes nothing)."""
    import csv
    import io
    import json

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=sweeps[0].columns, lineterminator="")
    written = 0

    def start() -> None:
        if fmt == "csv":
            writer.writeheader()
            out.write(buf.getvalue())
        elif fmt == "json":
            out.write("[")

    for i, s in enumerate(sweeps):
        _ticks(s, i, n)
        for row in s:
            if not written:
                start()
            if fmt == "csv":
                buf.seek(0)
                buf.truncate()
                writer.writerow({k: _csv(v) for k, v in row.items()})
                out.write(buf.getvalue())
            else:
                try:
                    text = json.dumps(row, allow_nan=False)
                except ValueError as exc:
                    raise SpecError(f"a result cannot be written as JSON: {exc}") from None
                out.write(text if fmt == "jsonl" else ("  " if not written else ", ") + text)
            written += 1
    _refused_whole(sweeps)
    if not written:
        start()
    if fmt == "json":
        out.write("]")


def _refused_whole(sweeps) -> None:
    """A SpecError when the spec refuses every combination (none left out by --where, none given)."""
    if not any(s.n_rows or s.n_filtered for s in sweeps) and any(s.n_skipped for s in sweeps):
        first = next(s for s in sweeps if s.skipped).skipped[0]
        raise SpecError(f"no combination of the sweep is a valid spec; the first: {first}")


def _csv(v):
    return "true" if v is True else "false" if v is False else v


def _tabulate(args, sweeps, fmt: str, out: _Output) -> None:
    """A table for people, of at most TABLE_ROWS rows: a sweep that gives more says how many it would print."""
    from archspec.render.text import human, human_bytes, table

    fields = sweeps[0].fields
    headers = ["model", *fields, "params", "active", "FLOPs/token", f"weights {args.dtype}", "KV/token"]
    rows, n = [], 0
    for i, s in enumerate(sweeps):
        _ticks(s, i, len(sweeps))
        for o in s:
            n += 1
            if n <= TABLE_ROWS:
                rows.append([o["name"], *(fmt_value(o[f]) for f in fields), human(o["total"]), human(o["active"]),
                             human(float(o["forward_per_token"])), human_bytes(o["weights_bytes"]),
                             human_bytes(o["kv_cache_bytes_per_token"])])  # fmt: skip
    _refused_whole(sweeps)
    if n > TABLE_ROWS:
        raise SpecError(f"the sweep gives {n:,} rows, too many to print as a {fmt}; write them to a file "
                        "(-o FILE.csv or -o FILE.jsonl) or print them with --format csv|jsonl, or narrow it "
                        "with --where")  # fmt: skip
    at = f"{args.seq_len:,}-token sequences" if args.seq_len else "each row's max_positions"
    note = (
        f"FLOPs/token: exact forward matmul FLOPs per token over {at} (2 per multiply-accumulate); "
        f"weights and KV cache per token in {args.dtype}."
    )
    if args.keep:
        note += " n_heads follows d_model (--keep d_head)."
    filtered = sum(s.n_filtered for s in sweeps)
    if filtered:
        note += f"\n{filtered:,} combination(s) left out by --where."
    skipped = sum(s.n_skipped for s in sweeps)
    if skipped:
        note += f"\n{skipped:,} combination(s) skipped (the spec refuses them; see stderr)."
    out.write(table(rows, headers, fmt) + "\n\n" + ROUNDING_NOTE + "\n" + note)
