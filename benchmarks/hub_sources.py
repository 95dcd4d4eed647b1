"""A Hub id against a local config.json: what a cached Hub id costs, and how many requests a checkpoint's
headers cost.

    python benchmarks/hub_sources.py [--runs 11]

A local Hub (tests/hubserver.py, on 127.0.0.1, the real huggingface_hub client through HF_ENDPOINT)
serves Qwen3-8B's released config.json as `Qwen/Qwen3-8B`, and a toy checkpoint in four safetensors
shards (transformers' names and shapes, tests/test_sources.py) as `toy/llama-4-shards`, into a fresh
HF_HOME. Timed side by side, interleaved (benchmarks/timing.py), each a fresh `archspec params`:

- `archspec params tests/data/hf/qwen3-8b.json` (the local file);
- `archspec params Qwen/Qwen3-8B` with HF_HUB_OFFLINE=1 after one online read (the cached Hub id:
  the budget, at most 1.5 x the local file, for it and the next);
- `archspec params Qwen/Qwen3-8B@COMMIT` online (a commit never changes: no request once read);
- `archspec params Qwen/Qwen3-8B` online, the Hub asked where `main` is (one request), the rest from the
  cache (importing huggingface_hub is most of its cost).

Then `archspec check toy/llama-4-shards` from a fresh cache, counting the requests for each shard: one
range request per shard is the budget. Exits 1 when either is past its budget.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from results import run  # writes the figures into RESULTS.md
from timing import byte_compile_archspec, command, interleaved  # this folder is on sys.path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
BUDGET = 1.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    from hubserver import Hub, Serving
    from test_sources import checkpoint_files, meta_model

    byte_compile_archspec()
    hub = Hub()
    local = ROOT / "tests" / "data" / "hf" / "qwen3-8b.json"
    hub.add("Qwen/Qwen3-8B", {"config.json": local.read_bytes()})
    config, shapes = meta_model("llama")
    hub.add("toy/llama-4-shards", {"config.json": config.encode(), **checkpoint_files(shapes, shards=4)})
    serving = Serving(hub, lifetime=1800)
    try:
        with tempfile.TemporaryDirectory() as home:
            env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": home}
            env.pop("HF_HUB_OFFLINE", None)
            archspec = [sys.executable, "-m", "archspec", "params"]
            command([*archspec, "Qwen/Qwen3-8B"], env=env)()  # the one online read
            offline = {**env, "HF_HUB_OFFLINE": "1"}
            commit = hub.repos["Qwen/Qwen3-8B"].sha
            t_local, t_offline, t_pinned, t_online = interleaved(
                args.runs,
                command([*archspec, str(local)], env=env),
                command([*archspec, "Qwen/Qwen3-8B"], env=offline),
                command([*archspec, f"Qwen/Qwen3-8B@{commit}"], env=env),
                command([*archspec, "Qwen/Qwen3-8B"], env=env),
            )
            hub.log.clear()
            command([sys.executable, "-m", "archspec", "check", "toy/llama-4-shards"], env=env)()
        shards = sorted(f for f in hub.repos["toy/llama-4-shards"].files if f.endswith(".safetensors"))
        per_shard = {f: len(hub.requests("GET", f)) for f in shards}
        whole = [r for r in hub.log if r[0] == "GET" and r[1].endswith(".safetensors") and not r[2]]
    finally:
        serving.stop()
    ratio = max(t_offline, t_pinned) / t_local
    print(f"archspec params tests/data/hf/qwen3-8b.json            wall median {1000 * t_local:7.1f} ms")
    print(f"archspec params Qwen/Qwen3-8B (cached, HF_HUB_OFFLINE=1) wall median {1000 * t_offline:7.1f} ms")
    print(f"archspec params Qwen/Qwen3-8B@COMMIT (cached, online)   wall median {1000 * t_pinned:7.1f} ms")
    print(f"archspec params Qwen/Qwen3-8B (cached, online: 1 request) wall median {1000 * t_online:7.1f} ms")
    print(f"[{args.runs} runs each, interleaved]")
    print(f"cached Hub id / local config.json: offline {t_offline / t_local:.2f}, by commit {t_pinned / t_local:.2f} "
          f"(budget {BUDGET}); by branch online {t_online / t_local:.2f}")  # fmt: skip
    print(f"archspec check of a 4-shard checkpoint: requests per shard {sorted(set(per_shard.values()))} "
          f"(budget 1), whole-file reads {len(whole)}")  # fmt: skip
    ok = ratio <= BUDGET and set(per_shard.values()) == {1} and not whole
    print("within budget" if ok else "past budget")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run("hub_sources.py", main))
