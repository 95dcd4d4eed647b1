"""GGUF files on the Hub: `org/name:QUANT` picks a file of the repository, its header is read by range
requests (more only as the header needs), kept for offline use; a split model is read from every shard's
header. The Hub is tests/hubserver.py's stand-in on 127.0.0.1 and the real huggingface_hub client."""

from __future__ import annotations

import json

import pytest

gguf = pytest.importorskip("gguf")
pytest.importorskip("huggingface_hub")
hubserver = pytest.importorskip("hubserver")

import test_gguf as tg  # noqa: E402

from archspec.core.errors import SpecError  # noqa: E402
from archspec.io.catalog import resolve  # noqa: E402
from archspec.sources import gguf as ggufsrc  # noqa: E402
from archspec.sources import hub as hubsrc  # noqa: E402


def _tiny_raw() -> dict:
    """Qwen3-8B's released config at toy widths (its keys as released; the sizes small)."""
    raw = json.loads((tg.HF / "qwen3-8b.json").read_text())
    raw.update(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
               num_key_value_heads=2, head_dim=64, vocab_size=1024, bos_token_id=None, eos_token_id=None)  # fmt: skip
    return raw


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    path = folder / "tiny.gguf"
    tg.write_header_only(path, _tiny_raw(), "qwen3")
    return path


@pytest.fixture
def hub(monkeypatch, tmp_path):
    server = hubserver.Serving(hubserver.Hub())
    monkeypatch.setenv("HF_ENDPOINT", server.hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    yield server.hub
    server.stop()


def test_a_quantisation_picks_the_file_and_one_range_reads_its_header(hub, tiny, run_json):
    data = tiny.read_bytes()
    hub.add("org/tiny-GGUF", {"tiny-Q4_K_M.gguf": data, "tiny-Q8_0.gguf": data, "README.md": b"# tiny"})
    (remote,) = run_json("params", "org/tiny-GGUF:Q4_K_M")
    (local,) = run_json("params", str(tiny))
    assert {k: remote[k] for k in ("total", "components")} == {k: local[k] for k in ("total", "components")}
    reads = hub.requests("GET", "/resolve/")
    assert [(p.rsplit("/", 1)[1], r) for _, p, r in reads] == [("tiny-Q4_K_M.gguf", f"bytes=0-{(1 << 24) - 1}")]
    source = resolve("org/tiny-GGUF:Q4_K_M").source  # the source travels with the resolved model
    assert source.format == "gguf" and source.tensors == tuple(ggufsrc.stored_tensors(ggufsrc.read_header(tiny)))


def test_a_long_header_takes_more_ranges_and_is_kept_for_offline(hub, tiny, monkeypatch, run_json):
    hub.add("org/tiny-GGUF", {"tiny-Q8_0.gguf": tiny.read_bytes()})
    monkeypatch.setattr(hubsrc, "GGUF_FIRST_RANGE", 512)
    (online,) = run_json("params", "org/tiny-GGUF")  # the only GGUF file: no pick needed
    header_length = ggufsrc.read_header(tiny).data_offset
    ranges = [r for _, _, r in hub.requests("GET", "/resolve/")]
    assert len(ranges) > 1 and ranges[0] == "bytes=0-511"
    ends = [int(r.rsplit("-", 1)[1]) + 1 for r in ranges]
    assert ends[-2] < header_length <= ends[-1]  # it stopped as soon as it held the header
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = len(hub.log)
    (offline,) = run_json("params", "org/tiny-GGUF")
    assert offline == online and len(hub.log) == before


def test_a_split_model_is_read_from_every_shard(hub, tmp_path, run_cli):
    raw = _tiny_raw()
    tensors = tg.converter_tensors(raw, "qwen3")
    w = gguf.GGUFWriter(tmp_path / "tiny-Q8_0.gguf", "qwen3", split_max_tensors=20)
    tg.converter_metadata(w, raw, "qwen3")
    for name, shape in tensors.items():
        w.add_tensor_info(name, shape, tg.np.float32, tg.nbytes(shape, tg.T.F32), raw_dtype=tg.T.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    shards = sorted(tmp_path.glob("tiny-Q8_0-*-of-*.gguf"))
    assert len(shards) > 1
    for shard in shards:  # the data each shard's header places after it (left sparse)
        header = ggufsrc.read_header_only(shard)
        end = max(header.data_offset + t.offset + ggufsrc.stored_bytes(t) for t in header.tensors)
        with open(shard, "r+b") as f:
            f.truncate(end)
    hub.add("org/tiny-GGUF", {p.name: p.read_bytes() for p in shards})
    code, out, err = run_cli("check", "org/tiny-GGUF:Q8_0", "--format", "json")
    assert code == 0, out + err
    (report,) = json.loads(out)
    assert report["ok"] and report["files"] == [p.name for p in shards]
    assert report["stored_params"] == report["spec_params"] and report["name"] == "tiny-q8_0"
    code, out, err = run_cli("check", str(shards[0]), "--format", "json")  # the same shards on disk
    assert code == 0, err
    assert {k: v for k, v in json.loads(out)[0].items() if k != "source"} == {
        k: v for k, v in report.items() if k != "source"
    }
    shards[-1].unlink()
    code, out, err = run_cli("check", str(shards[0]))
    assert code == 2 and f"{shards[-1].name} is not beside it" in err


@pytest.mark.parametrize(
    ("files", "ref", "message"),
    [
        ({"a-Q4_K_M.gguf": b"", "a-Q8_0.gguf": b""}, "org/x", "holds several GGUF files; pick one with :QUANT"),
        ({"a-Q4_K_M.gguf": b""}, "org/x:Q5_K_S", "org/x:Q5_K_S: names no GGUF file in the repository"),
        ({"config.json": b"{}"}, "org/x:Q4_K_M", "the repository holds no .gguf file"),
    ],
)
def test_a_pick_that_names_no_one_file_is_refused(hub, files, ref, message, run_cli):
    hub.add("org/x", files)
    code, out, err = run_cli("params", ref)
    assert code == 2 and message in err and err.count("\n") == 1


def test_a_pick_reads_the_names_as_released():
    ref = hubsrc.HubRef("unsloth/Qwen3-8B-GGUF", None, "Q4_K_M")
    files = ["Qwen3-8B-Q4_K_M.gguf", "Qwen3-8B-Q4_K_S.gguf", "Qwen3-8B-UD-Q4_K_XL.gguf", "README.md"]
    assert hubsrc.pick_gguf(ref, files) == ["Qwen3-8B-Q4_K_M.gguf"]
    with pytest.raises(SpecError, match="Q4_K_M, Q4_K_S, Q4_K_XL"):
        hubsrc.pick_gguf(hubsrc.HubRef("unsloth/Qwen3-8B-GGUF"), files)


def test_a_refused_gguf_file_leaves_nothing_in_the_cache(hub, tmp_path, monkeypatch, run_cli):
    """An architecture archspec does not read is refused in one line, and offline the repository is still
    unread: nothing a later call would trust was kept."""
    path = tmp_path / "bert.gguf"
    w = gguf.GGUFWriter(path, "bert")
    w.add_block_count(2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    hub.add("org/bert-GGUF", {"bert-F16.gguf": path.read_bytes()})
    code, out, err = run_cli("params", "org/bert-GGUF:F16")
    assert code == 2 and "GGUF architecture 'bert' is not supported" in err and err.count("\n") == 1
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, out, err = run_cli("params", "org/bert-GGUF:F16")
    assert code == 2 and "offline (HF_HUB_OFFLINE), and archspec has not read" in err
