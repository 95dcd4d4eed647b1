"""mkdocs hooks: the pages that repeat what a command prints are filled from the command when the site
is built, so they cannot drift from it.

- docs/cli.md: the line `<!-- archspec: command-line reference -->` becomes `archspec --help` and every
  command's `--help`, from the parser (archspec.cli.build_parser).
- docs/spec-format.md: the line `<!-- archspec: schema -->` becomes `archspec schema`'s output (the JSON
  Schema of a spec file) and `<!-- archspec: schema table -->` its `--format markdown` table.

The API reference (mkdocstrings) reads the package as an install lays it out: `archspec.reference` and
`archspec.presets` are the folders reference/ and presets/ beside archspec/ in the repository
(pyproject's package-dir), so the handler reads a copy that puts them in
place (`on_config`, a copy in a temporary folder); nothing is written into the tree.

tests/test_docs_site.py holds what these produce equal to the commands.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority

WIDTH = "100"  # the columns argparse wraps help at


def command_output(*argv: str) -> str:
    """What `archspec ARGV` prints on stdout."""
    from archspec.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(list(argv))
    return out.getvalue()


def cli_reference() -> str:
    """`archspec --help` and every command's `--help`, one section each."""
    from archspec.cli import COMMANDS

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parts = ["## archspec\n", "```text\n" + command_output("--help").rstrip() + "\n```\n"]
        for name in COMMANDS:
            parts += [f"## archspec {name}\n", "```text\n" + command_output(name, "--help").rstrip() + "\n```\n"]
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    return "\n".join(parts)


def schema_json() -> str:
    return "```json\n" + command_output("schema").rstrip() + "\n```\n"


def schema_table() -> str:
    return command_output("schema", "--format", "markdown").rstrip() + "\n"


GENERATED = {
    "<!-- archspec: command-line reference -->": cli_reference,
    "<!-- archspec: schema -->": schema_json,
    "<!-- archspec: schema table -->": schema_table,
}


def fill(markdown: str) -> str:
    """The page with each marker line replaced by what it stands for."""
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown


def on_page_markdown(markdown: str, page, config, files) -> str:
    return fill(markdown)


def installed_layout(root: Path) -> Path:
    """A temporary folder holding a copy of `archspec/` as an install lays it out (griffe does not follow
    links into folders)."""
    top = Path(tempfile.mkdtemp(prefix="archspec-docs-"))
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(root / "archspec", top / "archspec", ignore=skip)
    for folder in ("reference", "presets"):
        shutil.copytree(root / folder, top / "archspec" / folder, ignore=skip)
    return top


@event_priority(100)  # before mkdocstrings makes its handler
def on_config(config):
    root = Path(config.config_file_path).resolve().parent
    python = config.plugins["mkdocstrings"].config["handlers"]["python"]
    python["paths"] = [str(installed_layout(root))]
    return config
