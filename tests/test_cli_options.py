"""Friendlier options: torch's dtype names, a progress line on a terminal, and --help examples that run."""

import io
import shlex

import pytest

import archspec
from archspec.cli import COMMANDS, build_parser, command_module, main


@pytest.mark.parametrize("torch_name, short", [("float32", "fp32"), ("bfloat16", "bf16"), ("float16", "fp16"),
                                               ("float8_e4m3fn", "fp8"), ("torch.bfloat16", "bf16")])  # fmt: skip
def test_torch_dtype_names_give_the_short_names_numbers(run_json, torch_name, short):
    assert run_json("memory", "gpt2", "--dtype", torch_name) == run_json("memory", "gpt2", "--dtype", short)
    assert run_json("compare", "gpt2", "--dtype", torch_name) == run_json("compare", "gpt2", "--dtype", short)


def test_float32_weights_are_four_bytes_a_parameter(run_json):
    (row,) = run_json("compare", "gpt2", "--dtype", "float32")
    assert row["weights_bytes"] == 4 * archspec.count_params(archspec.preset("gpt2")).total
    (row,) = run_json("sweep", "gpt2", "--vary", "n_heads=12", "--dtype", "float8_e4m3fn")
    assert row["weights_bytes"] == row["total"]


def test_every_torch_name_maps_to_a_known_dtype():
    from archspec.core.vocab import DTYPE_ALIASES
    from archspec.memory import DTYPE_BYTES, dtype_bytes

    assert set(DTYPE_ALIASES.values()) <= set(DTYPE_BYTES)
    assert dtype_bytes("torch.bfloat16") == dtype_bytes("bf16") and dtype_bytes("float8_e4m3fn") == 1


def test_unknown_dtype_is_still_refused(run_cli):
    code, _, err = run_cli("flops", "gpt2", "--dtype", "float8_e4m3fn")  # flops' peaks have no fp8 row
    assert code == 2 and "invalid choice: 'fp8'" in err
    code, _, err = run_cli("memory", "gpt2", "--dtype", "float64")
    assert code == 2 and "invalid choice: 'float64'" in err


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _cleared(shown: str) -> bool:
    """tqdm's bar (leave=False) ends by writing blanks over itself and returning to the line's start."""
    return shown.endswith("\r") and shown.split("\r")[-2].strip() == ""


def test_progress_line_only_on_a_terminal(monkeypatch, capsys):
    args = ["sweep", "gpt2", "--vary", "n_heads=4,6,12", "--format", "json"]
    assert main(args) == 0
    assert capsys.readouterr().err == ""  # not a terminal: nothing on stderr
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    assert main(args) == 0
    shown = term.getvalue()
    assert "sweep gpt2:" in shown and "/3 [" in shown
    assert _cleared(shown)  # the bar is cleared when the run ends
    assert capsys.readouterr().out.startswith("[")  # stdout stays clean for scripts


def _line_after_the_bar(shown: str, line: str) -> bool:
    """`line` is written after the bar was blanked out: at the start of a cleared line, after the bar."""
    at = shown.index(line)
    return shown.rindex("sweep gpt2:", 0, at) < at and _cleared(shown[:at])


def test_progress_line_is_cleared_before_an_error(monkeypatch, capsys):
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    assert main(["sweep", "gpt2", "--vary", "max_positions=2048,512", "--seq-len", "1024"]) == 2
    assert _line_after_the_bar(term.getvalue(), "archspec: error: gpt2 with max_positions=512")


def test_progress_line_is_cleared_before_the_skipped_lines(monkeypatch, capsys):
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    assert main(["sweep", "gpt2", "--vary", "d_model=768,1000"]) == 1  # one combination skipped
    assert _line_after_the_bar(term.getvalue(), "archspec: skipped gpt2 with d_model=1000")


def test_verify_shows_which_model_runs(monkeypatch, capsys):
    pytest.importorskip("torch")
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    assert main(["verify", "transformer-base", "gpt2", "--format", "json"]) == 0
    shown = term.getvalue()
    assert "1/2 [" in shown and "transformer-base]" in shown and "2/2 [" in shown and "gpt2]" in shown
    assert _cleared(shown)


def _examples(name: str) -> list[list[str]]:
    out = []
    for line in command_module(name).EXAMPLES.splitlines():
        words = shlex.split(line.strip())
        if ">" in words:
            words = words[: words.index(">")]
        out.append(words)
    return out


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_examples_are_valid_commands(name, capsys):
    examples = _examples(name)
    assert len(examples) >= 2, f"{name} needs at least two --help examples"
    for words in examples:
        assert words[:2] == ["archspec", name], words
        build_parser(name).parse_args(words[1:])  # argparse exits 2 on an invalid example
    help_text = build_parser(name)._subparsers._group_actions[0].choices[name].format_help()
    assert "examples:" in help_text and f"archspec {name}" in help_text


def test_the_removed_no_dropout_option_is_a_bad_option(run_cli):
    """No dropout is the default; the hidden --no-dropout that once turned it off is gone."""
    code, _, err = run_cli("memory", "gpt2", "--no-dropout")
    assert code == 2 and "`archspec memory` has no option --no-dropout" in err and err.count("\n") == 1
