"""`archspec plot` and archspec.render.plot: the numbers behind each picture are the tables' numbers, and the
files are real PNG and SVG pictures."""

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import archspec
from archspec.render import plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PICTURES_PAGE = (Path(__file__).resolve().parent.parent / "docs" / "sweeps.md").read_text(encoding="utf-8")


def svg_texts(path: Path) -> str:
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return " ".join("".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text"))


# ---------------------------------------------------------------- the data behind each picture


def test_breakdown_data_is_the_params_table(run_json):
    names = ["transformer-base", "gpt2", "bert-base"]
    data = plot.breakdown_data([archspec.preset(n) for n in names])
    table = run_json("params", *names)
    for i, obj in enumerate(table):
        assert data.totals[i] == obj["total"]
        shown = dict(zip(data.components, data.counts[i]))
        assert shown == {c: v for c, v in obj["components"].items() if c in shown}
        assert not any(v for c, v in obj["components"].items() if c not in shown)  # nothing left out
        assert sum(data.shares[i]) == pytest.approx(1.0)


def test_memory_data_is_the_memory_table_at_each_length(run_json):
    data = plot.memory_data([archspec.preset("gpt2")], batch=2, gpu="h100")
    (curve,) = data.curves
    assert curve.seq_lens == [128, 256, 512, 1024]
    for T, training, inference in zip(curve.seq_lens, curve.training_bytes, curve.inference_bytes):
        (m,) = run_json("memory", "gpt2", "--batch", "2", "--seq-len", str(T))
        parts = m["weights_bytes"] + m["gradients_bytes"] + m["optimizer_bytes"] + m["activations_bytes"]
        assert training == parts
        assert inference == m["weights_bytes"] + m["kv_cache_bytes"]
    assert data.capacity_bytes == 80 * 2**30 and data.accelerator == "NVIDIA H100 SXM5"


def test_memory_lengths_double_up_to_the_context():
    spec = archspec.preset("gpt3-175b")
    assert plot.memory_seq_lens(spec) == [128, 256, 512, 1024, 2048]
    assert plot.memory_seq_lens(spec, 1500) == [128, 256, 512, 1024, 1500]
    assert plot.memory_seq_lens(spec, 100) == [100]


def test_scaling_data_is_the_sweep_table(run_json):
    data = plot.scaling_data([archspec.preset("gpt2")], "d_model=384:1536:384")
    rows = run_json("sweep", "gpt2", "--vary", "d_model=384:1536:384")
    (curve,) = data.curves
    assert curve.values == [r["d_model"] for r in rows] == [384, 768, 1152, 1536]
    assert curve.total == [r["total"] for r in rows]
    assert curve.forward_per_token == [r["forward_per_token"] for r in rows]
    assert curve.total[1] == archspec.count_params(archspec.preset("gpt2")).total


def test_plot_json_is_the_data_drawn(run_cli, tmp_path):
    out = tmp_path / "b.svg"
    code, text, err = run_cli("plot", "breakdown", "gpt2", "bert-base", "-o", str(out), "--format", "json")
    assert code == 0, err
    objects = json.loads(text)
    assert [o["name"] for o in objects] == ["gpt2", "bert-base"]
    assert objects[1]["total"] == archspec.count_params(archspec.preset("bert-base")).total
    assert out.exists()


# ---------------------------------------------------------------- the files


@pytest.mark.parametrize("kind, argv", [
    ("breakdown", ["gpt2", "bert-base"]),
    pytest.param("memory", ["gpt2", "--gpu", "h100"], marks=pytest.mark.slow),
    pytest.param("scaling", ["gpt2", "--vary", "d_model=384:1536:384"], marks=pytest.mark.slow),
])  # fmt: skip
def test_png_and_svg_are_written_by_suffix(run_cli, tmp_path, kind, argv):
    png, svg = tmp_path / f"{kind}.png", tmp_path / f"{kind}.svg"
    for path in (png, svg):
        code, out, err = run_cli("plot", kind, *argv, "-o", str(path))
        assert code == 0, err
        assert f"wrote {path}" in out
    assert png.read_bytes()[:8] == PNG_MAGIC
    svg_texts(svg)  # parses as SVG


@pytest.mark.slow  # matplotlib draws a picture: the documents' pictures are the fast set's
def test_axes_are_labelled_with_units(tmp_path):
    spec = archspec.preset("gpt2")
    labels = {
        "breakdown": (plot.breakdown_data([spec]), ["share of parameters (%)", "gpt2 (124.4M)"]),
        "memory": (plot.memory_data([spec], gpu="h100"), ["sequence length (tokens; K = 1,024)", "memory (GiB",
                                                          "80 GiB"]),
        "scaling": (plot.scaling_data([spec], "decoder_layers=6:24:6"), ["decoder_layers", "parameters",
                                                                         "forward FLOPs per token"]),
    }  # fmt: skip
    for kind, (data, words) in labels.items():
        path = tmp_path / f"{kind}.svg"
        plot.draw(kind, data, path)
        text = svg_texts(path)
        for w in words:
            assert w in text, (kind, w)


@pytest.mark.slow  # matplotlib draws a picture: the documents' pictures are the fast set's
def test_the_same_picture_gives_the_same_svg(tmp_path):
    data = plot.breakdown_data([archspec.preset("gpt2")])
    plot.draw("breakdown", data, tmp_path / "a.svg")
    plot.draw("breakdown", data, tmp_path / "b.svg")
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()


def test_the_pages_pictures_are_drawn_by_the_commands_beside_them(run_cli, tmp_path):
    # docs/sweeps.md shows `![...](name.svg)` (beside the page) under `$ archspec plot ... -o docs/name.svg`,
    # run from the repository's root
    images = ["docs/" + name for name in re.findall(r"!\[[^\]]*\]\(([^)/]+\.svg)\)", PICTURES_PAGE)]
    assert len(images) == 3
    root = Path(__file__).resolve().parent.parent
    for image in images:
        assert (root / image).is_file(), image
        command = re.search(r"\$ archspec (plot [^\n]*-o " + re.escape(image) + r")\n", PICTURES_PAGE)
        assert command, f"no command beside {image}"
        argv = command.group(1).split()
        argv[argv.index(image)] = str(tmp_path / Path(image).name)
        code, _, err = run_cli(*argv)
        assert code == 0, err
        assert (tmp_path / Path(image).name).stat().st_size > 0


# ---------------------------------------------------------------- bad input


def test_missing_matplotlib_names_the_extra(run_cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    out = tmp_path / "b.png"
    code, text, err = run_cli("plot", "breakdown", "gpt2", "-o", str(out))
    assert code == 2 and text == "" and not out.exists()
    assert "archspec-transformers[plot]" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv, words",
    [
        (["breakdown", "gpt2", "-o", "{tmp}/b.jpg"], "must end in .png or .svg"),
        (["breakdown", "gpt2", "-o", "{tmp}/no/such/b.png"], "no such folder"),
        (["breakdown", "gpt2", "-o", "{tmp}/b.png", "--vary", "d_model=512"], "--vary applies to `archspec plot"),
        (["breakdown", "gpt2", "-o", "{tmp}/b.png", "--seq-len", "512"], "--seq-len applies to"),
        (["scaling", "gpt2", "-o", "{tmp}/s.png"], "exactly one --vary"),
        (["scaling", "gpt2", "-o", "{tmp}/s.png", "--vary", "activation=gelu,swiglu"], "numeric field"),
        (["scaling", "gpt2", "-o", "{tmp}/s.png", "--vary", "d_model=1:2:0"], "step must be positive"),
        (["scaling", "gpt2", "-o", "{tmp}/s.png", "--gpu", "h100", "--vary", "d_model=768"], "--gpu applies to"),
        (["memory", "gpt2", "-o", "{tmp}/m.png", "--gpu", "h900"], "unknown accelerator 'h900'"),
        (["memory", "gpt2", "-o", "{tmp}/m.png", "--seq-len", "4096"], "longer than the learned position table"),
        (["pie", "gpt2", "-o", "{tmp}/m.png"], "invalid choice: 'pie'"),
        (["memory", "gpt2"], "--output/-o"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2(run_cli, tmp_path, argv, words):
    code, out, err = run_cli("plot", *[a.format(tmp=tmp_path) for a in argv])
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())
