"""LoRA adapters (Hu et al. 2021): which projections they adapt and the parameters they train (archspec/memory)."""

from __future__ import annotations

from archspec.core.checks import check_args, check_int, check_text
from archspec.core.errors import SpecError, shown
from archspec.describe.blocks import AttentionShape, Linear, describe
from archspec.memory.parallel import module_name
from archspec.spec.model import ModelSpec

LORA_GROUPS = {"attention": ("q", "k", "v", "o"), "mlp": ("gate", "up", "down")}
LORA_GROUPS["all"] = LORA_GROUPS["attention"] + LORA_GROUPS["mlp"]
LORA_PROJECTIONS = LORA_GROUPS["all"]


def lora_targets_of(targets: str) -> tuple[str, ...]:
    """'attention' -> ('q', 'k', 'v', 'o'); 'q,v' -> ('q', 'v'): groups (attention, mlp, all) and
    projections (q, k, v, o, gate, up, down), comma-separated."""
    check_text("lora_targets", targets, "lora_params")
    out: list[str] = []
    for word in (w.strip().lower() for w in targets.split(",")):
        names = LORA_GROUPS.get(word, (word,) if word in LORA_PROJECTIONS else None)
        if names is None:
            raise SpecError(
                f"unknown LoRA target {shown(word)}; use {', '.join(LORA_GROUPS)} or projections "
                f"{', '.join(LORA_PROJECTIONS)}, comma-separated"
            )
        out += [n for n in names if n not in out]
    return tuple(out)


def lora_params(spec: ModelSpec, rank: int, targets: str = "all") -> tuple[int, list]:
    """Trainable parameters of rank-`rank` LoRA adapters (Hu et al. 2021) on the `targets` projections:
    r·(d_in + d_out) per adapted matrix (A: r x d_in, B: d_out x r, no bias), as peft adds them.

    The description fuses q, k and v into one `qkv` map; adapters are counted as peft puts them on
    separate q, k and v projections (a LoRA on the fused map would be r·(d + q + k + v), less). `o` is
    the attention output projection; gate, up and down the MLP's, of dense MLPs, shared experts and
    every routed expert (one adapter per expert, as peft on per-expert Linear modules). Embeddings,
    routers and the head are never adapted. Returns (count, [(stack, rows, rank-wide outputs per row)]).
    """
    check_args("lora_params", spec=spec)
    check_int("rank", rank, "lora_params", minimum=1)
    wanted = lora_targets_of(targets)
    total = 0
    adapted: list = []
    present: set[str] = set()  # the projections the model has, adapted or not
    for part in describe(spec):
        if part.component in ("attention", "cross_attention"):
            kind_spec = part.group.spec
            if kind_spec.mixer.kind != "standard":
                if any(t in wanted for t in LORA_GROUPS["attention"]):
                    raise SpecError(
                        f"LoRA on {spec.name}'s {kind_spec.mixer.kind} attention is not modelled (its projections "
                        "are not q, k, v, o); target mlp projections only"
                    )
                continue
            a = AttentionShape.of(kind_spec)
            cross = part.component == "cross_attention"
            kv_rows = "source" if cross else "tokens"
            maps = {"q": (a.d_model, a.q, "tokens"), "k": (a.d_model, a.k, kv_rows), "v": (a.d_model, a.v, kv_rows),
                    "o": (a.out_in, a.d_model, "tokens")}  # fmt: skip
            present.update(maps)
            for name in wanted:
                if name in maps:
                    n_in, n_out, rows = maps[name]
                    total += part.copies * rank * (n_in + n_out)
                    adapted.append((part.stack, rows, part.repeat))
        elif part.role in ("dense", "expert", "shared_expert") and part.component in ("mlp", "experts",
                                                                                        "shared_experts"):  # fmt: skip
            for e in part.entries:
                if isinstance(e, Linear) and (name := module_name(part, e.name)) in LORA_PROJECTIONS:
                    present.add(name)
                    if name in wanted:
                        total += part.copies * e.copies * rank * (e.n_in + e.n_out)
                        uses = e.per_row if e.copies > 1 else 1
                        adapted.append((part.stack, e.rows, part.repeat * uses))
    _check_targets(spec, targets, wanted, present)
    return total, adapted


def _check_targets(spec: ModelSpec, targets: str, wanted: tuple[str, ...], present: set[str]) -> None:
    """A projection named on its own must be one the model has (a group adapts those it has, at least one)."""
    named = [w for w in (w.strip().lower() for w in targets.split(",")) if w in LORA_PROJECTIONS]
    lacking = [n for n in dict.fromkeys(named) if n not in present]
    if not lacking and present & set(wanted):
        return
    has = ", ".join(p for p in LORA_PROJECTIONS if p in present) or "none"
    what = ", ".join(lacking) if lacking else shown(targets)
    raise SpecError(f"{spec.name} has no {what} projection for LoRA to adapt; its projections: {has}")
