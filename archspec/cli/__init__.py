"""The `archspec` command line: a thin renderer over the pure functions of the package.

One module per command (`archspec.cli.params` is `archspec params`; `list_` and `import_` are `archspec
list` and `archspec import`, named so as not to shadow a builtin or a keyword),
each with its options (`add_args`), its run (`run(args) -> exit code`) and its text report; the
options and renderers several commands share live in `archspec.cli.options` and
`archspec.cli.output`, the MODEL arguments in `archspec.cli.models`. A command module says what it
is with constants: HELP, EXAMPLES, and where they differ from the defaults MODELS (argparse's
nargs of MODEL, None for none), DEFAULT_FORMAT, FORMATS ((choices, help) of --format), OVERRIDES
(whether --set applies) and UNUSED_UNLESS (options that change nothing in some uses of it).

Only the module of the command that runs is imported, and only its parser built; `archspec --help`
builds them all. Exit codes: 0 done, 1 a check found a mismatch, 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from types import ModuleType
from typing import NoReturn

from archspec.cli.output import EXIT_BAD_INPUT, EXIT_OK, PROGRESS, OutputError, progress_write, write_stdout
from archspec.core.errors import NoAdapter, SpecError, one_line

# command -> its module in this package, in the order `archspec --help` lists them
COMMANDS: dict[str, str] = {
    "list": "list_", "show": "show", "params": "params", "compare": "compare", "flops": "flops",
    "memory": "memory", "validate": "validate", "verify": "verify", "sweep": "sweep", "plot": "plot",
    "inference": "inference", "hardware": "hardware", "fit": "fit", "report": "report", "import": "import_",
    "schema": "schema", "formula": "formula", "check": "check",
}  # fmt: skip

SHELLS = ("bash", "zsh", "fish")  # the shells shtab writes completion scripts for


def command_module(name: str) -> ModuleType:
    """The module of one command (imported on first use)."""
    import importlib

    return importlib.import_module(f"archspec.cli.{COMMANDS[name]}")


class _Completion(argparse.Action):
    """--print-completion SHELL: the completion script of the whole parser, by shtab."""

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            import shtab
        except ImportError:
            parser.error("shell completion needs shtab: pip install shtab")
        sys.stdout.write(shtab.complete(parser, shell=values))
        parser.exit(EXIT_OK)


def build_parser(command: str | None = None):
    """The argument parser. With `command` (the first argument), only that subcommand is built: a
    command starts with the parser it needs; `archspec --help` and a bad command build them all."""
    from archspec.cli.options import Parser, common_args

    parser = Parser(
        prog="archspec",
        description=(
            "Exact parameter counts, FLOPs and memory for Transformer architectures, "
            "checked against the real PyTorch model and against published claims."
        ),
        epilog="examples:\n  archspec compare transformer-base gpt2 gpt3-175b\n  archspec params gpt2 --format json\n"
        "  archspec COMMAND --help",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from archspec import __version__

    parser.add_argument("--version", action="version", version=f"archspec {__version__}")
    parser.command = command
    if command is None:  # the whole parser: shell completion knows every command and option
        parser.add_argument(
            "--print-completion",
            choices=list(SHELLS),
            action=_Completion,
            help="print a shell completion script (shtab), e.g. archspec --print-completion bash > "
            "~/.local/share/bash-completion/completions/archspec",
        )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name in COMMANDS if command is None else [command]:
        c = command_module(name)
        p = sub.add_parser(
            name,
            help=c.HELP,
            description=c.HELP[0].upper() + c.HELP[1:] + ".",
            epilog="examples:\n  " + c.EXAMPLES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        models = getattr(c, "MODELS", "+")
        common_args(p, models, getattr(c, "OVERRIDES", models is not None))
        p.set_defaults(format=getattr(c, "DEFAULT_FORMAT", "table"), given=p.given)
        if hasattr(c, "FORMATS"):  # a command whose output is not a table says what --format means for it
            fmt = next(a for a in p._actions if a.dest == "format")
            fmt.choices, fmt.help = c.FORMATS
        if hasattr(c, "add_args"):
            c.add_args(p)
        p.set_defaults(run=c.run)
    return parser


def refuse_unused_options(args: argparse.Namespace) -> None:
    """A SpecError naming an option given where the command makes no use of it."""
    given = getattr(args, "given", set())
    for dest, used, needs in getattr(command_module(args.command), "UNUSED_UNLESS", ()):
        if dest in given and not used(args):
            raise SpecError(needs)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    with _closed_streams_discarded():
        return _main(argv)


@contextmanager
def _closed_streams_discarded():
    """A standard stream that is closed (`archspec ... >&-`: Python sets it to None) writes to the null
    device while main runs: output nobody can read ends quietly, and an error still exits 2."""
    closed = [name for name in ("stdout", "stderr") if getattr(sys, name) is None]
    sinks = {name: open(os.devnull, "w", encoding="utf-8") for name in closed}  # noqa: SIM115
    for name, sink in sinks.items():
        setattr(sys, name, sink)
    try:
        yield
    finally:
        for name, sink in sinks.items():
            if getattr(sys, name) is sink:
                setattr(sys, name, None)
            sink.close()


def _main(argv: list[str]) -> int:
    try:
        try:
            parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
            args = parser.parse_args(argv)
        except SystemExit:  # --help, --version (printed on stdout) or a usage error (one line on stderr)
            write_stdout(None)
            raise
        refuse_unused_options(args)
        try:
            code = args.run(args)
        except NoAdapter as exc:
            from archspec.cli.models import no_spec

            raise SpecError(no_spec(exc, args.command)) from None
        write_stdout(None)
        return code
    except SpecError as exc:
        if PROGRESS["live"]:
            progress_write(None)
        sys.stderr.write(f"archspec: error: {one_line(str(exc))}\n")
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `archspec list | head`
        _discard_stdout()
        return EXIT_OK
    except OutputError as exc:  # `archspec list > /dev/full`
        _discard_stdout()
        sys.stderr.write(f"archspec: error: cannot write the output: {one_line(str(exc))}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        sys.stderr.write("archspec: interrupted\n")
        return 130


def entry() -> NoReturn:
    """The `archspec` command and `python -m archspec`: main, then exit with its code. Before the
    interpreter exits, everything the collector tracks is frozen (gc.freeze): its last collection at
    exit then has nothing to walk, where otherwise it would walk every class and table archspec and
    pydantic built (about 30 ms of a 200 ms command: see the README's Performance section). Exit
    still flushes the standard streams and runs atexit handlers; every file archspec writes is closed
    before main returns. main itself, which the tests call in one process, freezes nothing."""
    import gc

    code = main()
    gc.freeze()
    sys.exit(code)


def _discard_stdout() -> None:
    """Point the standard output at the null device, so that what is left in its buffer cannot fail
    again when the interpreter exits (Python's advice for a closed pipe)."""
    import contextlib
    import os

    with contextlib.suppress(AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
