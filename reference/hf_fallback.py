"""Counting a Hugging Face config whose model_type has no adapter: transformers builds the model.

archspec reads a config.json into a spec for every model_type that has an adapter (archspec.hf). For
any other type, when transformers and torch are installed, this module builds the class named in
`architectures` on the meta device (the config class of `model_type` fills missing keys, as
transformers does; eager attention; nothing is downloaded: no from_pretrained, no remote code) and
measures it. The result is measured, not analytic: there is no spec, so the breakdown is by module of
transformers' model, and every output says so (`source`).

- parameters: unique tensors (a tied matrix once), exact; by module group: the parameter's path
  without the base model's prefix, layer indices folded into `*` and cut after the first module
  inside a layer (`h.*.attn`, `h.*.mlp`, `wte`, `lm_head`), so the groups sum to the total;
- non_embedding: the total less the parameters of nn.Embedding modules (token, position and
  token-type tables; Kaplan's N);
- active parameters, where routing is recognisable (ROUTING_RULE): the tensors under a module named
  `experts` (not a router or gate) that are one expert of a list (`experts.3.w1`) or a stack of all E
  experts (leading dimension E) are the routed experts, split evenly among E, of which k serve a token, with k
  from num_experts_per_tok / top_k / moe_top_k / num_selected_experts and E from num_experts /
  num_local_experts / n_routed_experts / moe_num_experts; active = total - routed + routed * k / E.
  Without `experts` modules the model is dense (active = total); with them but without both keys,
  active is not known (None) and the result says why;
- forward FLOPs: torch's FlopCounterMode over one forward pass at the command's batch x seq_len
  (source and target alike for an encoder-decoder), 2 per multiply-accumulate, matmuls only. Where
  the forward pass cannot run on the meta device (data-dependent routing, a scan that reads values),
  FLOPs are None and the reason is given.
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from dataclasses import dataclass, field
from typing import Any

from archspec.core.errors import SpecError, clip, one_line

ROUTING_RULE = (
    "active = total - routed + routed * k / E, routed = tensors of the E experts under modules named 'experts', "
    "k = num_experts_per_tok | top_k | moe_top_k | num_selected_experts, "
    "E = num_experts | num_local_experts | n_routed_experts | moe_num_experts"
)
TOP_K_KEYS = ("num_experts_per_tok", "top_k", "moe_top_k", "num_selected_experts")
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")


@dataclass(frozen=True)
class Measured:
    """What building transformers' model of a config measured (no spec exists for it)."""

    name: str
    model_type: str
    architecture: str
    transformers_version: str
    total: int
    components: dict[str, int]  # module group -> parameters, summing to total
    non_embedding: int
    active: int | None
    active_note: str
    estimate: int | None  # 12*L*d^2 + V*d from the config's sizes, where it names them
    layers: int | None
    d_model: int | None
    vocab_size: int | None
    batch: int
    seq_len: int
    forward: int | None  # FlopCounterMode, one forward pass over batch x seq_len
    flops_note: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def source(self) -> str:
        return f"measured: transformers {self.transformers_version} model built on the meta device"

    def params_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "total": self.total,
            "active": self.active,
            "non_embedding": self.non_embedding,
            "estimate": self.estimate,
            "components": dict(self.components),
            "source": self.source,
            "model_type": self.model_type,
            "architecture": self.architecture,
            **({"active_rule": ROUTING_RULE} if self.active is not None and self.active != self.total else {}),
            **({"active_note": self.active_note} if self.active_note else {}),
        }

    def flops_dict(self) -> dict[str, Any]:
        per_token = None if self.forward is None else _exact(self.forward, self.batch * self.seq_len)
        return {
            "name": self.name,
            "batch": self.batch,
            "seq_len": self.seq_len,
            "forward": self.forward,
            "forward_per_token": per_token,
            "training": None if self.forward is None else 3 * self.forward,
            "source": self.source + " (FlopCounterMode, eager attention)",
            "model_type": self.model_type,
            "architecture": self.architecture,
            **({"flops_note": self.flops_note} if self.flops_note else {}),
        }


def _exact(num: int, den: int) -> int | float:
    return num // den if num % den == 0 else num / den


def _import():
    """transformers and torch, quietly (no progress bars, no downloads, warnings off)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    return torch, transformers


def _problem(where: str, what: str, exc: BaseException) -> SpecError:
    return SpecError(f"{where}: {what}: {clip(one_line(f'{type(exc).__name__}: {exc}'), 300)}")


def build(raw: dict[str, Any], where: str):
    """transformers' model of the config on the meta device, with eager attention; one-line errors."""
    torch, transformers = _import()
    model_type = raw.get("model_type")
    archs = raw.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise SpecError(f"{where}: model_type {model_type!r} has no adapter and the file names no class in "
                        "architectures, so transformers' model cannot be built to count it")  # fmt: skip
    arch = archs[0]
    cls = getattr(transformers, arch, None)
    if cls is None or not isinstance(cls, type) or not hasattr(cls, "config_class"):
        raise SpecError(f"{where}: transformers {transformers.__version__} has no class {arch!r} (architectures)")
    try:
        config_cls = transformers.CONFIG_MAPPING[model_type]
    except KeyError:
        raise SpecError(
            f"{where}: transformers {transformers.__version__} does not know model_type {model_type!r}"
        ) from None
    quiet = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(quiet):
        warnings.simplefilter("ignore")
        try:
            config = config_cls.from_dict(dict(raw))
        except Exception as exc:  # noqa: BLE001 - any failure of transformers' config is the file's problem
            raise _problem(where, f"transformers cannot read this {model_type} config", exc) from None
        config._attn_implementation = "eager"
        try:
            with torch.device("meta"):
                model = cls(config).eval()
        except Exception as exc:  # noqa: BLE001
            raise _problem(where, f"transformers cannot build {arch} from this config", exc) from None
    return model, config, arch, transformers.__version__


def _group(path: str, prefix: str) -> str:
    """A parameter's module group: without the base model's prefix, layer indices folded, cut after the
    first module inside a layer; the tensor name dropped."""
    parts = path.split(".")[:-1] or path.split(".")
    if prefix and parts and parts[0] == prefix and len(parts) > 1:
        parts = parts[1:]
    out: list[str] = []
    for i, part in enumerate(parts):
        if part.isdigit():
            out.append("*")
            if i + 1 < len(parts):
                out.append(parts[i + 1])
            break
        out.append(part)
    return ".".join(out)


def _config_int(config, *names: str) -> int | None:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _routed(path: str, shape, e: int | None) -> bool:
    """A routed expert's tensor: under a module named `experts`, not a router or gate, and either one expert
    of a list (`experts.3.`) or a stack of all E experts (leading dimension E)."""
    parts = path.split(".")
    if "experts" not in parts or {"router", "gate"} & set(parts):
        return False
    after = parts[parts.index("experts") + 1 :]
    return bool(after and after[0].isdigit()) or (e is not None and len(shape) > 1 and shape[0] == e)


def _active(model, config, total: int) -> tuple[int | None, str]:
    k = _config_int(config, *TOP_K_KEYS)
    e = _config_int(config, *EXPERT_KEYS)
    under = [(n, p) for n, p in _unique(model) if "experts" in n.split(".")]
    if not under:
        return total, ""
    routed = sum(p.numel() for n, p in under if _routed(n, tuple(p.shape), e))
    if k is None or e is None or k > e or not routed or routed % e:
        return None, (
            "the model has routed experts (modules named 'experts') but its config names no top-k and expert "
            "count this rule reads, so active parameters are not known"
        )
    return total - routed + routed * k // e, ROUTING_RULE


def _unique(model):
    return list(model.named_parameters())  # a tied tensor once, under its first name


def _forward_flops(torch, model, config, batch: int, seq_len: int) -> tuple[int | None, str]:
    from torch.utils.flop_counter import FlopCounterMode

    tokens = torch.zeros(batch, seq_len, dtype=torch.long, device="meta")
    inputs: dict[str, Any] = {"input_ids": tokens}
    if getattr(config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = tokens
    else:
        inputs["attention_mask"] = torch.ones(batch, seq_len, dtype=torch.long, device="meta")
    quiet = io.StringIO()
    try:
        with (warnings.catch_warnings(), contextlib.redirect_stderr(quiet), FlopCounterMode(display=False) as counter,
              torch.no_grad()):  # fmt: skip
            warnings.simplefilter("ignore")
            model(**inputs)
    except Exception as exc:  # noqa: BLE001 - a forward pass that cannot run on meta: no FLOPs, and why
        return None, clip(
            one_line(f"the forward pass cannot run on the meta device ({type(exc).__name__}: {exc})"), 300
        )
    return int(counter.get_total_flops()), ""


def measure(raw: dict[str, Any], name: str, where: str, batch: int = 1, seq_len: int | None = None) -> Measured:
    """Build transformers' model of `raw` on the meta device and measure it (see the module's docstring)."""
    torch, _ = _import()
    model, config, arch, version = build(raw, where)
    params = _unique(model)
    prefix = getattr(model, "base_model_prefix", "") or ""
    components: dict[str, int] = {}
    for pname, p in params:
        key = _group(pname, prefix)
        components[key] = components.get(key, 0) + p.numel()
    total = sum(components.values())
    embedding = sum(
        p.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters(recurse=False)
    )
    active, active_note = _active(model, config, total)
    layers = _config_int(config, "num_hidden_layers", "n_layer", "num_layers")
    d = _config_int(config, "hidden_size", "n_embd", "d_model")
    vocab = _config_int(config, "vocab_size")
    estimate = 12 * layers * d * d + vocab * d if layers and d and vocab else None
    context = _config_int(config, "max_position_embeddings", "n_positions", "seq_length")
    t = seq_len or min(context or 1024, 1024)
    forward, flops_note = _forward_flops(torch, model, config, batch, t)
    return Measured(
        name=name,
        model_type=str(raw.get("model_type")),
        architecture=arch,
        transformers_version=version,
        total=total,
        components=components,
        non_embedding=total - embedding,
        active=active,
        active_note="" if active == total else active_note,
        estimate=estimate,
        layers=layers,
        d_model=d,
        vocab_size=vocab,
        batch=batch,
        seq_len=t,
        forward=forward,
        flops_note=flops_note,
    )
