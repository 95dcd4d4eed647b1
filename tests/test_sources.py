"""Model sources: checkpoint folders, .safetensors files and Hub ids, and `archspec check`.

The checkpoints are written by the `safetensors` library with the names and shapes of transformers'
own models built on the meta device (an oracle archspec did not write), at toy widths; the Hub is a
local server on 127.0.0.1 (tests/hubserver.py) that the real huggingface_hub client talks to through
HF_ENDPOINT. No network is used.
"""

from __future__ import annotations

import json
import math
import struct
from functools import cache
from pathlib import Path

import pytest

import archspec
from archspec.sources import headers
from archspec.sources.stored import StoredTensor

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")
pytest.importorskip("huggingface_hub")

from hubserver import Hub, Serving  # noqa: E402
from released import DATA  # noqa: E402
from safetensors.torch import save as st_save  # noqa: E402

TOY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
           vocab_size=100)  # fmt: skip
MOE = dict(num_experts_per_tok=2, moe_intermediate_size=16)
CASES = {
    # name: (model_type, config keys beyond TOY), each a family of a different kind
    "llama": ("llama", dict(head_dim=8, tie_word_embeddings=False)),
    "qwen3": ("qwen3", dict(head_dim=8, tie_word_embeddings=True)),
    "gpt2": ("gpt2", dict(n_embd=32, n_layer=2, n_head=4, n_positions=16)),
    "mixtral": ("mixtral", dict(head_dim=8, num_local_experts=4, num_experts_per_tok=2)),
    "qwen3_moe": ("qwen3_moe", dict(head_dim=8, num_experts=4, **MOE)),
    "jamba": ("jamba", dict(num_experts=4, num_experts_per_tok=2, attn_layer_period=2, attn_layer_offset=1,
                            expert_layer_period=2, expert_layer_offset=1, mamba_d_state=4, mamba_dt_rank=4,
                            mamba_expand=2, mamba_d_conv=4)),
    "gpt_oss": ("gpt_oss", dict(head_dim=8, num_local_experts=4, num_experts_per_tok=2)),
    "deepseek_v3": ("deepseek_v3", dict(n_routed_experts=4, first_k_dense_replace=1, q_lora_rank=16, kv_lora_rank=16,
                                        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, n_group=1, topk_group=1,
                                        num_hidden_layers=3, **MOE)),
}  # fmt: skip


@cache
def meta_model(case: str) -> tuple[str, dict[str, tuple[int, ...]]]:
    """(config.json text, {tensor name: shape}) of transformers' model of a toy config, built on meta; a tied
    head is left out, as save_pretrained leaves it out."""
    model_type, extra = CASES[case]
    kwargs = {} if model_type == "gpt2" else dict(TOY)
    cfg = transformers.CONFIG_MAPPING[model_type](**{**kwargs, **extra, "vocab_size": 100})
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    cfg.architectures = [type(model).__name__]
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if cfg.tie_word_embeddings:
        shapes.pop("lm_head.weight", None)
    data = json.loads(cfg.to_json_string())
    if model_type == "qwen3_moe":  # transformers 5 writes num_local_experts; released files say num_experts
        data["num_experts"] = data.pop("num_local_experts")
    return json.dumps(data), shapes


def per_expert(shapes: dict) -> dict:
    """transformers 5's stacked experts as the released checkpoints store them: one tensor per expert
    (Qwen3-30B-A3B's and DeepSeek-V3's index: mlp.experts.{e}.gate_proj.weight, up_proj, down_proj)."""
    out = {}
    for name, shape in shapes.items():
        if name.endswith("experts.gate_up_proj"):
            at, (e, two_f, d) = name.removesuffix("gate_up_proj"), shape
            for i in range(e):
                out[f"{at}{i}.gate_proj.weight"] = out[f"{at}{i}.up_proj.weight"] = (two_f // 2, d)
        elif name.endswith("experts.down_proj"):
            at, (e, d, f) = name.removesuffix("down_proj"), shape
            for i in range(e):
                out[f"{at}{i}.down_proj.weight"] = (d, f)
        else:
            out[name] = shape
    return out


def st_bytes(shapes: dict, dtypes: dict | None = None) -> bytes:
    """A safetensors file of zeros, written by the safetensors library (bf16 unless `dtypes` names another)."""
    dtypes = dtypes or {}
    return st_save({k: torch.zeros(s, dtype=dtypes.get(k, torch.bfloat16)) for k, s in shapes.items()})


def write_checkpoint(folder: Path, config: str, shapes: dict, shards: int = 1, dtypes: dict | None = None) -> Path:
    """config.json and the tensors in `shards` files (with an index where more than one)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(config)
    for name, data in checkpoint_files(shapes, shards, dtypes).items():
        (folder / name).write_bytes(data)
    return folder


def checkpoint_files(shapes: dict, shards: int = 1, dtypes: dict | None = None) -> dict[str, bytes]:
    if shards == 1:
        return {"model.safetensors": st_bytes(shapes, dtypes)}
    names = list(shapes)
    files, weight_map = {}, {}
    for i in range(shards):
        part = names[i::shards]
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        files[fname] = st_bytes({k: shapes[k] for k in part}, dtypes)
        weight_map.update(dict.fromkeys(part, fname))
    files[headers.INDEX] = json.dumps({"metadata": {}, "weight_map": weight_map}).encode()
    return files


def spec_of(config: str, tmp_path: Path):
    (tmp_path / "cfg").mkdir(exist_ok=True)
    (tmp_path / "cfg" / "config.json").write_text(config)
    return archspec.load_spec(tmp_path / "cfg" / "config.json")


# ---------------------------------------------------------------- the header reader


def test_header_reader_equals_the_safetensors_library(tmp_path):
    """read_file (the header alone) names the tensors, shapes and dtypes safe_open reads, and each tensor's
    bytes are its values times the dtype's size."""
    from safetensors import safe_open

    tensors = {"a": torch.zeros(3, 5, dtype=torch.bfloat16), "b": torch.zeros(7, dtype=torch.float32),
               "c": torch.zeros(2, 4, dtype=torch.float8_e4m3fn), "d": torch.zeros(1, dtype=torch.int64)}  # fmt: skip
    path = tmp_path / "x.safetensors"
    path.write_bytes(st_save(tensors))
    mine = {t.name: t for t in headers.read_file(path)}
    with safe_open(path, framework="pt") as f:
        theirs = {k: f.get_slice(k) for k in f.keys()}  # noqa: SIM118
        assert set(mine) == set(theirs)
        for k, s in theirs.items():
            assert mine[k].shape == tuple(s.get_shape()) and mine[k].dtype == s.get_dtype()
            assert mine[k].nbytes == tensors[k].numel() * tensors[k].element_size()


def test_the_shape_rules_are_the_reference_transforms():
    """archspec.sources.weightmap names the transforms the reference loads with, and its shape rule of each
    gives the shapes the torch transform makes (on meta tensors)."""
    from archspec.reference.weights import TRANSFORMS
    from archspec.sources.weightmap import TRANSFORM_NAMES, shapes_after

    assert set(TRANSFORMS) == set(TRANSFORM_NAMES)
    spec = archspec.ModelSpec(name="t", vocab_size=10, d_model=8, decoder_layers=1, n_heads=2, max_positions=4)
    cases = {  # transform: (source shapes, target shapes)
        "copy": ([(4, 8)], [(4, 8)]), "transpose": ([(8, 12)], [(12, 8)]), "cat": ([(8, 8), (4, 8)], [(12, 8)]),
        "split": ([(6, 8)], [(4, 8), (2, 8)]), "heads": ([(24, 8)], [(24, 8)]), "stack": ([(3, 8)] * 5, [(5, 3, 8)]),
        "io": ([(5, 8, 3)], [(5, 3, 8)]), "interleaved": ([(5, 8, 6)], [(5, 3, 8)] * 2),
        "split_io": ([(5, 8, 6)], [(5, 3, 8)] * 2), "plus_one": ([(8,)], [(8,)]),
        "q_gate": ([(16, 8), (8, 8), (8, 8)], [(32, 8)]),
    }  # fmt: skip
    for name, (src, tgt) in cases.items():
        made = TRANSFORMS[name]([torch.empty(s, device="meta") for s in src],
                                [torch.empty(t, device="meta") for t in tgt], spec)  # fmt: skip
        assert shapes_after(name, src, tgt) == [tuple(t.shape) for t in made], name


@pytest.mark.parametrize("case", ["llama", "gpt2", "mixtral", "jamba"])
def test_the_expansion_over_the_spec_is_the_reference_plan(case, tmp_path):
    """expand() over the description's tensors gives the steps plan() gives over the reference model."""
    from archspec.reference import build
    from archspec.reference.weights import plan
    from archspec.sources.names import layouts
    from archspec.sources.weightmap import expand

    config, _ = meta_model(case)
    spec = spec_of(config, tmp_path)
    model = build(spec, device="meta")
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters(remove_duplicate=False)}
    for wmap in layouts(CASES[case][0]):
        assert expand(wmap, shapes) == plan(wmap, model), wmap.name


# ---------------------------------------------------------------- archspec check


def check_json(run_cli, *argv):
    code, out, err = run_cli("check", *argv, "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out)[0]


@pytest.mark.parametrize("case", list(CASES))
def test_check_of_transformers_own_names_and_shapes(case, tmp_path, run_cli):
    """A checkpoint with the names and shapes of transformers' model of the config is the spec's: exit 0,
    and its stored values per component are the spec's parameters per component."""
    config, shapes = meta_model(case)
    folder = write_checkpoint(tmp_path / case, config, shapes)
    code, r = check_json(run_cli, str(folder))
    assert (code, r["ok"], r["missing"], r["misshapen"], r["extra"]) == (0, True, [], [], [])
    spec = archspec.load_spec(folder / "config.json")
    counted = archspec.count_params(spec).components
    stored = {c: t["params"] for c, t in r["by_component"].items() if c != "buffers"}
    assert stored == {c: n for c, n in counted.items() if n}
    assert r["stored_bytes"] == 2 * sum(math.prod(s) for s in shapes.values())  # bf16


@pytest.mark.parametrize("case", ["qwen3_moe", "deepseek_v3"])
def test_check_of_a_released_per_expert_layout(case, tmp_path, run_cli):
    """Released MoE checkpoints store one tensor per expert: read through the per-expert layout."""
    config, shapes = meta_model(case)
    folder = write_checkpoint(tmp_path / case, config, per_expert(shapes), shards=3)
    code, r = check_json(run_cli, str(folder))
    assert (code, r["missing"], r["misshapen"], r["extra"]) == (0, [], [], [])
    assert r["layout"].endswith("(per-expert checkpoint)")


def mtp_layer(shapes: dict, config: str) -> dict:
    """DeepSeek-V3's multi-token-prediction module as its released index names it: model.layers.{L}.* (L the
    config's num_hidden_layers: 61 in the release) with enorm, hnorm, eh_proj, embed_tokens, shared_head.norm,
    shared_head.head, and a decoder layer of the last layer's shapes."""
    cfg = json.loads(config)
    n, d, v = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["vocab_size"]
    last = f"model.layers.{n - 1}."
    out = {f"model.layers.{n}." + k.removeprefix(last): s for k, s in per_expert(shapes).items() if k.startswith(last)}
    out.update(
        {
            f"model.layers.{n}.enorm.weight": (d,),
            f"model.layers.{n}.hnorm.weight": (d,),
            f"model.layers.{n}.eh_proj.weight": (d, 2 * d),
            f"model.layers.{n}.embed_tokens.weight": (v, d),
            f"model.layers.{n}.shared_head.norm.weight": (d,),
            f"model.layers.{n}.shared_head.head.weight": (v, d),
        }
    )
    return out


def test_check_names_and_counts_the_mtp_layer(tmp_path, run_cli):
    """DeepSeek-V3's checkpoint holds its MTP module as layer 61, which the config's 61 layers do not
    describe: named as the component mtp and counted; the rest is the spec's. Exit 1: the files differ."""
    config, shapes = meta_model("deepseek_v3")
    mtp = mtp_layer(shapes, config)
    folder = write_checkpoint(tmp_path / "v3", config, {**per_expert(shapes), **mtp}, shards=2)
    code, r = check_json(run_cli, str(folder))
    assert (code, r["ok"], r["missing"], r["misshapen"], r["extra"]) == (1, False, [], [], [])
    assert r["hidden"] == {"mtp": {"tensors": len(mtp), "params": sum(math.prod(s) for s in mtp.values()),
                                   "bytes": 2 * sum(math.prod(s) for s in mtp.values())}}  # fmt: skip
    code, out, _ = run_cli("check", str(folder))
    assert code == 1 and f"not in the spec: mtp, {len(mtp)} tensors" in out


@pytest.mark.parametrize("scale", ["weight_scale_inv", "weight_scale"])
def test_check_reads_fp8_weights_with_their_scales(scale, tmp_path, run_cli):
    """FP8 checkpoints store the linear layers' weights in F8_E4M3 beside scales: DeepSeek's 128x128 block
    scales `weight_scale_inv` (F32), Meta's and compressed-tensors' per-row `weight_scale`; embeddings, norms
    and head stay bf16. The scales are their weights', not extra tensors; bytes are counted by dtype."""
    config, shapes = meta_model("llama")
    linear = [k for k, s in shapes.items() if len(s) == 2 and ".layers." in k]
    scales = {}
    for k in linear:
        out, inp = shapes[k]
        base = k.removesuffix(".weight")
        scales[f"{base}.{scale}"] = (math.ceil(out / 128), math.ceil(inp / 128)) if scale.endswith("inv") else (out, 1)
    dtypes = {**dict.fromkeys(linear, torch.float8_e4m3fn), **dict.fromkeys(scales, torch.float32)}
    folder = write_checkpoint(tmp_path / "fp8", config, {**shapes, **scales}, dtypes=dtypes)
    code, r = check_json(run_cli, str(folder))
    assert (code, r["missing"], r["misshapen"], r["extra"]) == (0, [], [], [])
    assert r["scales"]["tensors"] == len(linear) and r["scales"]["bytes"] == 4 * sum(map(math.prod, scales.values()))
    fp8 = sum(math.prod(shapes[k]) for k in linear)
    assert r["by_dtype"]["F8_E4M3"] == {"tensors": len(linear), "params": fp8, "bytes": fp8}
    spec = archspec.load_spec(folder / "config.json")
    from archspec.memory.parallel import stored_weights_bytes

    assert r["weights_format"] == "fp8" and r["predicted_bytes"] == stored_weights_bytes(spec, "fp8")


def test_check_names_missing_and_misshapen_tensors(tmp_path, run_cli):
    config, shapes = meta_model("llama")
    shapes = dict(shapes)
    del shapes["model.layers.1.mlp.up_proj.weight"]
    shapes["model.layers.0.self_attn.k_proj.weight"] = (24, 32)
    shapes["model.layers.0.self_attn.extra.weight"] = (4,)
    folder = write_checkpoint(tmp_path / "bad", config, shapes)
    code, r = check_json(run_cli, str(folder))
    assert code == 1 and r["missing"] == ["layers.1.mlp.up_proj.weight"]
    assert [m["names"] for m in r["misshapen"]][0][1] == "model.layers.0.self_attn.k_proj.weight"
    assert r["extra"] == ["model.layers.0.self_attn.extra.weight"]


def test_check_of_a_preset_is_refused(run_cli):
    code, _, err = run_cli("check", "gpt2")
    assert code == 2 and "nothing to check" in err and err.count("\n") == 1


# ---------------------------------------------------------------- the local Hub


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A local Hub (HF_ENDPOINT) and a fresh cache (HF_HOME), online."""
    h = Hub()
    serving = Serving(h, lifetime=300)
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for name in ("HF_HUB_OFFLINE", "HF_TOKEN", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    yield h
    serving.stop()


def serve_checkpoint(hub: Hub, repo: str, case: str, shards: int = 1, **kw):
    config, shapes = meta_model(case)
    return hub.add(repo, {"config.json": config.encode(), **checkpoint_files(shapes, shards, **kw)})


def records(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "hf" / "archspec").rglob("*.json"))


def test_a_hub_checkpoint_reads_as_the_local_one_with_one_range_request_per_shard(hub, tmp_path, run_cli):
    serve_checkpoint(hub, "toy/mixtral", "mixtral", shards=3)
    config, shapes = meta_model("mixtral")
    local = write_checkpoint(tmp_path / "mixtral", config, shapes, shards=3)
    code, remote = check_json(run_cli, "toy/mixtral")
    code_local, mine = check_json(run_cli, str(local))
    assert code == code_local == 0
    assert {**remote, "source": "", "files": []} == {**mine, "source": "", "files": []}
    shards = [f for f in hub.repos["toy/mixtral"].files if f.startswith("model-")]
    for f in shards:  # one range request per shard for its header, never the whole file
        gets = hub.requests("GET", f)
        assert len(gets) == 1 and gets[0][2] and gets[0][2].startswith("bytes=0-"), f
    assert len(records(tmp_path)) == 1


def test_a_model_read_online_answers_offline(hub, tmp_path, run_cli, monkeypatch):
    serve_checkpoint(hub, "toy/qwen3", "qwen3", shards=2)
    _, online = check_json(run_cli, "toy/qwen3")
    code, out_online, _ = run_cli("params", "toy/qwen3", "--format", "json")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.log.clear()
    _, offline = check_json(run_cli, "toy/qwen3")
    code2, out_offline, _ = run_cli("params", "toy/qwen3", "--format", "json")
    commit = hub.repos["toy/qwen3"].sha
    _, pinned = check_json(run_cli, f"toy/qwen3@{commit}")
    assert online == offline and out_online == out_offline and code == code2 == 0
    assert pinned["stored_bytes"] == online["stored_bytes"]
    assert hub.log == []  # offline: not one request


def test_released_configs_served_by_the_hub_count_as_read_from_disk(hub, run_cli):
    """Every released config.json of the test set, served as a repository holding it alone, gives the
    counts the file gives read from disk."""
    files = sorted(DATA.glob("*.json"))
    for path in files:
        hub.add(f"released/{path.stem}", {"config.json": path.read_bytes()})
    counted = 0
    for path in files:
        code, local, _ = run_cli("params", str(path), "--format", "json")
        code_hub, remote, err = run_cli("params", f"released/{path.stem}", "--format", "json")
        assert code_hub == code, (path.stem, err)  # the files archspec refuses are refused by both
        if code == 0:
            assert json.loads(remote) == json.loads(local), path.stem
            counted += 1
    assert counted > 100


def test_a_hub_id_without_the_extra_is_refused_in_one_line(monkeypatch, run_cli):
    import sys

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    code, _, err = run_cli("params", "someone/some-model")
    assert code == 2 and "archspec-transformers[hub]" in err and err.count("\n") == 1


def corrupt(data: bytes, how: str) -> bytes:
    n = struct.unpack("<Q", data[:8])[0]
    if how == "truncated":  # the download stopped inside the header
        return data[: 8 + n // 2]
    if how == "beyond":  # a header length past the end of the file
        return struct.pack("<Q", len(data) + 10) + data[8:]
    if how == "absurd":
        return struct.pack("<Q", 1 << 60) + data[8:]
    if how == "json":
        return data[:8] + b"{" * n + data[8 + n :]
    raise ValueError(how)


BAD_HEADERS = {
    "truncated": "header claims",
    "beyond": "beyond the file",
    "absurd": "corrupt file",
    "json": "not valid JSON",
}


@pytest.mark.parametrize("how", list(BAD_HEADERS))
def test_a_bad_header_is_one_line_and_nothing_is_cached(how, hub, tmp_path, run_cli):
    config, shapes = meta_model("llama")
    data = corrupt(st_bytes(shapes), how)
    hub.add("toy/bad", {"config.json": config.encode(), "model.safetensors": data})
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "config.json").write_text(config)
    (tmp_path / "local" / "model.safetensors").write_bytes(data)
    for ref in ("toy/bad", str(tmp_path / "local")):
        code, _, err = run_cli("params", ref)
        assert code == 2 and err.count("\n") == 1 and BAD_HEADERS[how] in err, err
    assert records(tmp_path) == []


def test_hub_refusals_are_one_line(hub, tmp_path, run_cli, monkeypatch):
    serve_checkpoint(hub, "toy/llama", "llama")
    hub.repos["toy/llama"].gated = True
    code, _, err = run_cli("params", "toy/llama")
    assert code == 2 and "HF_TOKEN" in err and err.count("\n") == 1
    code, _, err = run_cli("params", "toy/unknown")
    assert code == 2 and "no repository toy/unknown" in err and err.count("\n") == 1
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run_cli("params", "toy/never-read")
    assert code == 2 and "offline" in err and err.count("\n") == 1
    assert records(tmp_path) == []


def test_shards_that_disagree_with_their_index_are_refused(hub, tmp_path, run_cli):
    config, shapes = meta_model("llama")
    files = checkpoint_files(shapes, shards=2)
    index = json.loads(files[headers.INDEX])
    moved = next(iter(index["weight_map"]))
    index["weight_map"][moved] = "model-00002-of-00002.safetensors" if index["weight_map"][moved].startswith(
        "model-00001") else "model-00001-of-00002.safetensors"  # fmt: skip
    files[headers.INDEX] = json.dumps(index).encode()
    hub.add("toy/split", {"config.json": config.encode(), **files})
    folder = tmp_path / "split"
    folder.mkdir()
    (folder / "config.json").write_text(config)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    for ref in ("toy/split", str(folder)):
        code, _, err = run_cli("params", ref)
        assert code == 2 and "disagree with their index" in err and err.count("\n") == 1, err
    assert records(tmp_path) == []


def test_a_config_and_a_checkpoint_of_different_models_are_refused(hub, tmp_path, run_cli):
    config, _ = meta_model("llama")
    _, other = meta_model("qwen3")
    other = {k: ((200, 32) if "embed" in k else s) for k, s in other.items()}
    hub.add("toy/mixed", {"config.json": config.encode(), "model.safetensors": st_bytes(other)})
    folder = write_checkpoint(tmp_path / "mixed", config, other)
    for ref in ("toy/mixed", str(folder)):
        code, _, err = run_cli("params", ref)
        assert code == 2 and "different models" in err and err.count("\n") == 1, err
    assert records(tmp_path) == []


def test_stored_tensor_counts_its_values():
    assert StoredTensor("x", (3, 4), "BF16", 24).numel == 12 and StoredTensor("s", (), "F32", 4).numel == 1


def fp8_checkpoint(tmp_path: Path) -> Path:
    config, shapes = meta_model("llama")
    linear = [k for k, s in shapes.items() if len(s) == 2 and ".layers." in k]
    scales = {k.removesuffix(".weight") + ".weight_scale": (shapes[k][0], 1) for k in linear}
    dtypes = {**dict.fromkeys(linear, torch.float8_e4m3fn), **dict.fromkeys(scales, torch.float32)}
    return write_checkpoint(tmp_path / "fp8", config, {**shapes, **scales}, dtypes=dtypes)


def test_memory_inference_and_fit_plan_a_checkpoint_as_stored(tmp_path, run_cli):
    """Without --weights, a checkpoint is planned in the format most of its values are stored in (here fp8,
    the linear layers'), and says so; --weights overrides it, and says that too."""
    folder = str(fp8_checkpoint(tmp_path))
    spec = archspec.load_spec(Path(folder) / "config.json")
    code, out, _ = run_cli("memory", folder, "--format", "json")
    (m,) = json.loads(out)
    assert code == 0 and m["weights_source"] == "stored" and m["weights"] == "fp8"
    assert m["stored"]["by_dtype"]["F8_E4M3"] == sum(
        math.prod(s) for k, s in meta_model("llama")[1].items() if len(s) == 2 and ".layers." in k
    )
    code, out, _ = run_cli("memory", folder, "--weights", "bf16", "--format", "json")
    (b,) = json.loads(out)
    assert b["weights_source"] == "option" and b["weights"] == "bf16"
    assert b["inference_weights_bytes"] == 2 * archspec.count_params(spec).total
    code, out, _ = run_cli("memory", folder)
    assert "note: weights as stored: --weights fp8" in out
    args = ("--gpu", "h100", "-p", "64", "-g", "8", "--format", "json")
    code, out, _ = run_cli("inference", folder, *args)
    (i,) = json.loads(out)
    assert i["weights_source"] == "stored" and i["dtype"] == "fp8"
    code, out, _ = run_cli("fit", folder, "--gpu", "h100", "--format", "json")
    assert [(o["dtype"], o["weights_source"]) for o in json.loads(out)] == [("fp8", "stored")]
    code, out, _ = run_cli("params", folder, "--format", "json")
    assert json.loads(out)[0]["stored"]["format"] == "fp8"


def test_the_source_travels_with_the_resolved_model(tmp_path, run_cli):
    """archspec.io.catalog.resolve's Loaded carries where a checkpoint was read from, nothing kept on the
    side: its tensors are the headers as read here, --set keeps them (the check of a changed width finds
    the stored matrices of the other shape; memory plans it as stored), and a preset or a config has none."""
    from archspec.io.catalog import resolve

    folder = fp8_checkpoint(tmp_path)
    loaded = resolve(str(folder))
    tensors, files = headers.read_folder(folder)
    assert loaded.source.tensors == tuple(tensors) and loaded.source.files == tuple(files)
    assert resolve(str(folder)).source == loaded.source
    wider = resolve(str(folder), {"d_ff": 2 * loaded.spec.d_ff})
    assert wider.spec.d_ff == 2 * loaded.spec.d_ff and wider.source == loaded.source
    from archspec.cli.check import report

    up = [m for m in report(wider).misshapen if m.names[0].endswith("mlp.up_proj.weight")]
    assert len(up) == loaded.spec.decoder_layers
    assert up[0].stored == ((loaded.spec.d_ff, loaded.spec.d_model),) and up[0].expected[0][0] == wider.spec.d_ff
    code, out, _ = run_cli("memory", str(folder), "--set", f"d_ff={2 * loaded.spec.d_ff}", "--format", "json")
    assert code == 0 and json.loads(out)[0]["weights_source"] == "stored"
    assert resolve("gpt2").source is None and resolve(str(folder / "config.json")).source is None


def test_a_hub_id_without_the_extra_is_refused_offline_too(monkeypatch, run_cli):
    import sys

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    code, _, err = run_cli("params", "someone/some-model")
    assert code == 2 and "archspec-transformers[hub]" in err and err.count("\n") == 1


def test_a_commit_read_once_is_not_asked_again(hub, run_cli):
    """A commit never changes: `org/name@COMMIT` read once answers online without a request."""
    serve_checkpoint(hub, "toy/pinned", "llama")
    commit = hub.repos["toy/pinned"].sha
    code, first, _ = run_cli("params", f"toy/pinned@{commit}", "--format", "json")
    hub.log.clear()
    code2, again, _ = run_cli("params", f"toy/pinned@{commit}", "--format", "json")
    assert code == code2 == 0 and first == again and hub.log == []


# ---------------------------------------------------------------- the documents' checkpoints

CHECKPOINTS = Path(__file__).parent / "data" / "checkpoints"


def docs_checkpoints() -> dict[str, tuple[str, dict, dict]]:
    """The checkpoints docs/sources.md shows (tests/data/checkpoints/), as written: name -> (config.json,
    shapes, dtypes). tiny-llama: transformers' LlamaForCausalLM at toy width, bf16. tiny-deepseek-v3-fp8:
    DeepSeek-V3's released layout at toy width: per-expert tensors, the MTP module as the layer after the
    last, linear layers in F8_E4M3 with 128x128 block scales (weight_scale_inv, F32)."""
    llama_config, llama = meta_model("llama")
    v3_config, v3 = meta_model("deepseek_v3")
    shapes = {**per_expert(v3), **mtp_layer(v3, v3_config)}
    fp8 = [k for k, s in shapes.items() if len(s) == 2 and ".layers." in k and "norm" not in k and "embed" not in k
           and "shared_head.head" not in k and not k.endswith("mlp.gate.weight")]  # fmt: skip
    scales = {k.removesuffix(".weight") + ".weight_scale_inv": tuple(-(-d // 128) for d in shapes[k]) for k in fp8}
    dtypes = {**dict.fromkeys(fp8, torch.float8_e4m3fn), **dict.fromkeys(scales, torch.float32)}
    return {"tiny-llama": (llama_config, llama, {}), "tiny-deepseek-v3-fp8": (v3_config, {**shapes, **scales}, dtypes)}


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-deepseek-v3-fp8"])
def test_the_documents_checkpoints_are_as_written_here(name, tmp_path):
    """The committed files hold the names, shapes and dtypes docs_checkpoints() writes, and the config the
    same spec (to write them again: write_checkpoint(CHECKPOINTS / name, *docs_checkpoints()[name]))."""
    config, shapes, dtypes = docs_checkpoints()[name]
    fresh = write_checkpoint(tmp_path / name, config, shapes, dtypes=dtypes)
    committed = CHECKPOINTS / name
    assert archspec.load_spec(committed / "config.json") == archspec.load_spec(fresh / "config.json").replace(name=name)
    assert headers.read_folder(committed) == headers.read_folder(fresh)


def test_a_repository_the_hub_hides_names_hf_token(hub, run_cli):
    """The Hub answers a stranger's request for a private repository as for an unknown one: 401 with
    RepoNotFound. The line says both and names HF_TOKEN."""
    hub.add("toy/private", {"config.json": b"{}"}).private = True
    code, _, err = run_cli("params", "toy/private")
    assert code == 2 and "no repository toy/private" in err and "HF_TOKEN" in err and err.count("\n") == 1


def test_check_runs_without_torch():
    """archspec check reads the weight maps, not the reference model: it runs where torch cannot be imported."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None; from archspec.cli import main; "
            f"sys.exit(main(['check', {str(CHECKPOINTS / 'tiny-llama')!r}]))")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "the stored tensors are the spec's" in r.stdout, r.stderr[-2000:]


def test_check_names_towers_and_projectors_and_reads_a_wrapped_text_model(tmp_path, run_cli):
    """A multimodal checkpoint keeps its text model under model.language_model. (transformers 5's wrappers)
    beside a vision tower and a projector that the text config does not describe: the text model is the
    spec's, the tower and the projector are named and counted by their first name."""
    config, shapes = meta_model("llama")
    wrapped = {("model.language_model." + k.removeprefix("model.")) if k.startswith("model.") else k: s
               for k, s in shapes.items()}  # fmt: skip
    towers = {"model.vision_tower.blocks.0.attn.qkv.weight": (48, 16), "model.vision_tower.blocks.0.norm.weight": (16,),
              "model.multi_modal_projector.linear_1.weight": (32, 16)}  # fmt: skip
    folder = write_checkpoint(tmp_path / "mm", config, {**wrapped, **towers})
    code, r = check_json(run_cli, str(folder))
    assert (code, r["missing"], r["misshapen"], r["extra"]) == (1, [], [], [])
    assert r["hidden"] == {
        "vision_tower": {"tensors": 2, "params": 48 * 16 + 16, "bytes": 2 * (48 * 16 + 16)},
        "multi_modal_projector": {"tensors": 1, "params": 32 * 16, "bytes": 2 * 32 * 16},
    }


def test_the_names_tables_write_the_reference_models_paths():
    from archspec.reference.families.engine import DEC
    from archspec.sources import names

    assert names.DEC == DEC


def mxfp4(shapes: dict) -> tuple[dict, dict]:
    """gpt-oss's experts as its released checkpoint stores them (openai/gpt-oss-20b's index): each expert
    matrix X, which transformers holds (E, in, out), as X_blocks (E, out, in/32, 16) and X_scales
    (E, out, in/32), both U8. Returns the shapes and their dtypes."""
    out, dtypes = {}, {}
    for name, shape in shapes.items():
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            e, inp, rows = shape
            out[name + "_blocks"], out[name + "_scales"] = (e, rows, inp // 32, 16), (e, rows, inp // 32)
            dtypes[name + "_blocks"] = dtypes[name + "_scales"] = torch.uint8
        else:
            out[name] = shape
    return out, dtypes


def test_check_reads_gpt_oss_mxfp4_experts_as_their_matrices(tmp_path, run_cli):
    """gpt-oss's released checkpoint stores its experts in MXFP4 (U8 blocks and scales): each blocks tensor is
    read as its matrix, the scales as its scales; the rest is bf16 as released."""
    config, shapes = meta_model("gpt_oss")
    packed, dtypes = mxfp4(shapes)
    folder = write_checkpoint(tmp_path / "gpt-oss", config, packed, dtypes=dtypes)
    code, r = check_json(run_cli, str(folder))
    assert (code, r["missing"], r["misshapen"], r["extra"]) == (0, [], [], [])
    layers = json.loads(config)["num_hidden_layers"]
    u8 = [k for k in packed if k.endswith(("_blocks", "_scales"))]
    assert r["scales"]["tensors"] == 2 * layers and r["weights_format"] == "mxfp4"  # most values are the experts'
    assert r["by_dtype"]["U8"]["bytes"] == sum(math.prod(packed[k]) for k in u8)
    assert r["by_component"]["experts"]["bytes"] == sum(
        math.prod(packed[k]) for k in u8 if k.endswith("_blocks")
    ) + 2 * sum(math.prod(s) for k, s in shapes.items() if "experts" in k and k.endswith("_bias"))
