"""`archspec report`: one self-contained page, checked as a real browser renders it.

The page is rendered by Debian's chromium in headless mode; the text and the layout are read from
the rendered document (a measuring script is added to a copy of the page, and chromium's
--dump-dom returns what it wrote), not from the HTML string. Without chromium the browser tests
are skipped, except in CI (the CI environment variable set), where they fail: .ci/run installs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser

import pytest

import archspec
from archspec.plan.fit import fit
from archspec.plan.hardware import ACCELERATORS
from archspec.render.text import human

MODELS = ["gpt2", "mixtral-8x7b"]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed; CI must provide it (.ci/run installs Debian's chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium); CI runs this test")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from archspec.cli import main

    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", *MODELS, "--gpu", "h100", "--gpu", "rtx4090", "-o", str(out)]) == 0
    return out


class Resources(HTMLParser):
    """Every tag that could load something at view time."""

    def __init__(self):
        super().__init__()
        self.loads = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "link", "img", "iframe", "object", "embed", "video", "audio", "source"):
            self.loads.append(tag)
        for key in ("src", "href", "xlink:href"):
            if a.get(key) and not a[key].startswith("#"):
                self.loads.append(f"{tag} {key}={a[key]}")


@pytest.mark.slow  # a browser renders the page: seconds
def test_page_loads_nothing_from_elsewhere(page):
    text = page.read_text(encoding="utf-8")
    parser = Resources()
    parser.feed(text)
    assert parser.loads == []
    assert re.findall(r"url\((?!#)", text) == [] and "@import" not in text  # url(#clip): this page


MEASURE = """<pre id="layout"></pre><script>
const box = e => e.getBoundingClientRect();
const svgs = [...document.querySelectorAll("figure svg")].map(s => ({id: s.parentElement.id,
  width: box(s).width, height: box(s).height, right: box(s).right}));
const tables = [...document.querySelectorAll("table")].map(t => ({width: box(t).width,
  parent: box(t.parentElement).width, rows: t.rows.length}));
document.getElementById("layout").textContent = JSON.stringify({
  viewport: window.innerWidth, scroll: document.documentElement.scrollWidth, svgs, tables,
  sections: [...document.querySelectorAll("h2")].map(h => h.id),
  text: document.body.innerText});
</script>"""


def render(page, tmp_path, width: int):
    """The rendered document's measurements and text at a window `width` pixels wide."""
    probe = tmp_path / f"probe-{width}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    run = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}",
         f"--window-size={width},2000", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    m = re.search(r'<pre id="layout">(.*?)</pre>', run.stdout, re.S)
    assert m, run.stderr[-2000:]
    import html

    return json.loads(html.unescape(m.group(1)))


@pytest.mark.slow  # a browser renders the page: seconds
@pytest.mark.parametrize("width", [1280, 700])
def test_rendered_page_has_every_section_and_fits_the_window(page, tmp_path, width):
    r = render(page, tmp_path, width)
    assert r["sections"] == ["comparison", "breakdowns", "plots", "memory", "fit", "claims"]
    # the page never scrolls sideways: wide tables scroll inside their own box
    assert r["scroll"] <= r["viewport"]
    assert all(t["width"] > 0 and t["rows"] > 1 for t in r["tables"])
    # the three pictures were drawn (gpt2 and mixtral share decoder_layers, so scaling is there too)
    assert [s["id"] for s in r["svgs"]] == ["plot-breakdown", "plot-memory", "plot-scaling"]
    assert all(s["width"] > 200 and s["height"] > 100 and s["right"] <= r["viewport"] for s in r["svgs"])


@pytest.mark.slow  # a browser renders the page: seconds
def test_rendered_text_holds_the_library_numbers(page, tmp_path):
    text = render(page, tmp_path, 1280)["text"]
    for name in MODELS:
        c = archspec.count_params(archspec.preset(name))
        assert f"{c.total:,}" in text and human(c.total) in text
    mixtral = archspec.count_params(archspec.preset("mixtral-8x7b"))
    assert f"{mixtral.active:,}" in text  # the active count beside the total for the MoE model
    # where it fits: the same plan as archspec.plan.fit, read back from the rendered table
    f = fit(archspec.preset("mixtral-8x7b"), ACCELERATORS["h100"], "bf16", "inference", 1, 4096)
    assert f"{f.devices} ({f.layout})" in text
    # claims with their sources
    for claim in archspec.get_preset("gpt2").claims:
        assert claim.source in text
    assert "Parameters by component (total beside each model)" in text  # SVG text, rendered as text


@pytest.mark.slow  # a browser renders the page: seconds
def test_screenshot_is_the_window_size(page, tmp_path):
    shot = tmp_path / "shot.png"
    subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}",
         "--window-size=1200,1600", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1200, 1600) and len(data) > 20_000  # a page drawn, not a blank one


@pytest.mark.parametrize(
    "argv, words",
    [
        (["gpt2", "-o", "r.pdf"], "name it FILE.html"),
        (["gpt2", "-o", "nowhere/r.html"], "no such folder"),
        (["gpt2"], "required: --output"),
        (["nosuch", "-o", "r.html"], "unknown preset"),
        (["gpt2", "-o", "r.html", "--gpu", "h900"], "unknown accelerator 'h900'"),
        (["gpt2", "-o", "r.html", "--seq-len", "0"], "must be greater than 0"),
    ],
)
def test_bad_input_is_one_line_exit_2(run_cli, tmp_path, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("report", *argv)
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1
