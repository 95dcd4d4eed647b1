"""Memory measured on the reference model: saved activations, weights by dtype, the KV cache.

Activations are what autograd saves for backward in one training forward pass, the loss included:

- every tensor an operation saves (``torch.autograd.graph.saved_tensors_hooks``) is counted by the
  untyped storage it lives in, each storage once: a view saved by several operations, or a view of a
  larger tensor (a query sliced out of the fused QKV output), counts the whole storage once, under
  the first module that saved it;
- storages of parameters and buffers (and views of them, e.g. the transposed weight a linear layer
  saves) are weights, not activations, and are excluded;
- the loss is cross-entropy on the logits taken in fp32 (``logits.float()``, as torchtitan and
  transformers do), so its log-softmax is fp32 whatever the model's dtype (without an output head,
  the sum of the last hidden states, which keeps nothing);
- a saved tensor belongs to the innermost running module that carries a ``component`` tag
  (``attention``, ``mlp``, ``norm`` ...); tensors a block saves outside any tagged child (its inputs,
  under full recomputation) belong to ``layer``; those saved outside the model to ``loss``; anything
  else to ``other`` (none today: a test holds it empty).

Recomputation uses ``torch.utils.checkpoint`` (non-reentrant): a checkpointed region saves its
inputs through an autograd function that our hooks see, and nothing else.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass, field

import torch
from torch import nn

from archspec.core.errors import SpecError
from archspec.core.records import record, rendered
from archspec.reference.build import build, resolve_dtype
from archspec.reference.measure import example_inputs
from archspec.reference.model import Block, Transformer, cache_bytes
from archspec.spec.model import ModelSpec

LOSS = "loss"
LAYER = "layer"
OTHER = "other"


@dataclass(frozen=True)
class SavedStorage:
    """One storage autograd holds for backward: where it was first saved, and how big it is."""

    component: str  # component of the module that first saved it (or 'layer' / 'loss')
    path: str  # that module's path in the model ('' for the loss)
    shape: tuple[int, ...]  # shape of the first tensor saved from it
    dtype: str  # e.g. 'float32'
    nbytes: int  # bytes of the whole storage
    saved_by: tuple[str, ...] = ()  # autograd nodes that hold it, e.g. ('NativeLayerNormBackward0',)


@dataclass(frozen=True)
class ActivationReport:
    name: str
    batch: int
    seq_len: int
    src_len: int | None
    dtype: str
    attention: str
    recompute: str
    total_bytes: int = field(metadata=rendered("activations_bytes"))
    by_component: dict[str, int] = field(metadata=rendered("components"))
    by_path: dict[str, int] = field(metadata=rendered("paths"))
    storages: tuple[SavedStorage, ...] = field(repr=False, metadata=rendered(hidden=True))

    def to_dict(self) -> dict:
        return record(self)


def _storage_key(t: torch.Tensor) -> tuple[str, int]:
    s = t.untyped_storage()
    return (str(t.device), s.data_ptr())


class SavedTensorTracker:
    """Context manager: records every storage autograd saves while it is active, by module.

    Use around a forward pass (and the loss) of `model`; the module hooks are removed on exit.
    """

    def __init__(self, model: nn.Module):
        self.model = model
        self.excluded = {_storage_key(t) for t in [*model.parameters(), *model.buffers()] if t.device.type != "meta"}
        self.paths = {module: path for path, module in model.named_modules()}
        self.stack: list[nn.Module] = []
        self.first: dict[tuple[str, int], tuple[str, str, torch.Tensor]] = {}
        self._handles: list = []
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in self.excluded and key not in self.first:
            self.first[key] = (*self._owner(), t)
        return t

    def _owner(self) -> tuple[str, str]:
        for module in reversed(self.stack):
            comp = getattr(module, "component", None)
            if comp is not None:
                return comp, self.paths[module]
            if isinstance(module, Block):
                return LAYER, self.paths[module]
        return (OTHER, self.paths[self.stack[-1]]) if self.stack else (LOSS, "")

    def __enter__(self) -> SavedTensorTracker:
        for module in self.paths:
            self._handles.append(module.register_forward_pre_hook(lambda m, args: self.stack.append(m)))
            self._handles.append(module.register_forward_hook(lambda m, args, out: self._pop(m)))
        self._hooks.__enter__()
        return self

    def _pop(self, module: nn.Module) -> None:
        popped = self.stack.pop()
        assert popped is module, "module hooks out of order"

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def storages(self, loss: torch.Tensor | None = None) -> list[SavedStorage]:
        """The saved storages, in the order they were first saved; with `loss`, each names the
        autograd nodes holding it (read from the graph, before backward frees it). Do not pass `loss`
        when part of the graph is checkpointed: reading a node's saved tensors there recomputes it."""
        holders = _holders(loss) if loss is not None else {}
        out = []
        for key, (comp, path, t) in self.first.items():
            out.append(
                SavedStorage(
                    component=comp,
                    path=path,
                    shape=tuple(t.shape),
                    dtype=str(t.dtype).removeprefix("torch."),
                    nbytes=t.untyped_storage().nbytes(),
                    saved_by=tuple(sorted(holders.get(key, ()))),
                )
            )
        return out


def _holders(loss: torch.Tensor) -> dict[tuple[str, int], set[str]]:
    """Storage -> names of the autograd nodes that saved a tensor in it (walks the graph of `loss`)."""
    out: dict[tuple[str, int], set[str]] = defaultdict(set)
    seen, todo = set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        name = type(node).__name__
        saved = [getattr(node, a) for a in dir(node) if a.startswith("_saved_")]
        with contextlib.suppress(AttributeError, RuntimeError):  # only custom functions have saved_tensors
            saved.extend(node.saved_tensors)
        for v in saved:
            for t in v if isinstance(v, (tuple, list)) else (v,):
                if isinstance(t, torch.Tensor):
                    out[_storage_key(t)].add(name)
        todo.extend(fn for fn, _ in node.next_functions)
    return out


def training_loss(model: Transformer, inputs: tuple, targets: torch.Tensor) -> torch.Tensor:
    """One training forward pass: cross-entropy of the logits (taken in fp32) against `targets` (B, T)
    (ELECTRA's discriminator: a binary cross-entropy of its one logit per token against the targets' parity).
    A model without an output head (head = "none") is trained here on the sum of its last hidden
    states in fp32, a loss that keeps nothing for backward."""
    out = model(*inputs)  # (B, T, V) logits, or (B, T, d) hidden states
    if model.head is None:
        return out.float().sum()
    if model.spec.head.kind == "discriminator":  # ELECTRA: was each token replaced? (B, T) logits, 0/1 labels
        return torch.nn.functional.binary_cross_entropy_with_logits(out.float(), (targets % 2).float())
    return torch.nn.functional.cross_entropy(out.flatten(0, 1).float(), targets.flatten())


def random_batch(spec: ModelSpec, batch: int, seq_len: int, src_len: int | None, device, seed: int = 0):
    """Token ids (inputs, targets) drawn under `seed`: targets a tensor of their own."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    inputs = tuple(
        torch.randint(0, spec.vocab_size, x.shape, generator=gen).to(device)
        for x in example_inputs(spec, batch, seq_len, src_len, device="cpu")
    )
    targets = torch.randint(0, spec.vocab_size, (batch, seq_len), generator=gen).to(device)
    return inputs, targets


def check_workload(spec: ModelSpec, batch: int, seq_len: int, src_len: int | None) -> None:
    for name, value in (("batch", batch), ("seq_len", seq_len), ("src_len", src_len)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise SpecError(f"{name} must be a positive integer, got {value!r}")
    longest = max(seq_len, src_len or 0)
    if spec.position.kind == "learned" and longest > spec.max_positions:
        raise SpecError(
            f"{spec.name}: a sequence of {longest} tokens is longer than its learned position table "
            f"(max_positions={spec.max_positions})"
        )


def measure_activations(
    spec: ModelSpec,
    batch: int = 2,
    seq_len: int = 128,
    dtype="fp32",
    attention: str = "flash",
    recompute: str = "none",
    src_len: int | None = None,
    device="cpu",
    model: Transformer | None = None,
) -> ActivationReport:
    """Bytes autograd saves for backward in one training forward pass of the reference model of `spec`
    (loss included, weights excluded, each storage once), by component and by module path.

    Real tensors: the model is built on `device` in `dtype` (pass `model` to reuse one built from
    `spec`). `src_len` is the encoder's length for an encoder-decoder (default `seq_len`).
    """
    dt = resolve_dtype(dtype)
    check_workload(spec, batch, seq_len, src_len)
    if torch.device(device).type == "meta" or (model is not None and next(model.parameters()).is_meta):
        raise SpecError("saved activations are measured on real tensors (cpu or cuda): meta tensors share no storages")
    if model is None:
        model = build(spec, device=device, dtype=dt)
    elif next(model.parameters()).dtype != dt:
        raise SpecError(f"the model given is in {next(model.parameters()).dtype}, not the {dt} asked for")
    model.set_execution(attention, recompute)
    inputs, targets = random_batch(spec, batch, seq_len, src_len, device)
    with SavedTensorTracker(model) as tracker:
        loss = training_loss(model, inputs, targets)
    storages = tracker.storages(loss if recompute == "none" else None)
    del loss
    by_component: dict[str, int] = defaultdict(int)
    by_path: dict[str, int] = defaultdict(int)
    for s in storages:
        by_component[s.component] += s.nbytes
        by_path[s.path] += s.nbytes
    return ActivationReport(
        name=spec.name,
        batch=batch,
        seq_len=seq_len,
        src_len=(src_len if src_len is not None else seq_len) if spec.kind == "encoder-decoder" else None,
        dtype=str(dt).removeprefix("torch."),
        attention=attention,
        recompute=recompute,
        total_bytes=sum(s.nbytes for s in storages),
        by_component=dict(by_component),
        by_path=dict(by_path),
        storages=tuple(storages),
    )


def measure_weights(model: nn.Module) -> dict[str, int]:
    """Bytes of the unique parameters by dtype, e.g. {'float32': 497_759_232}."""
    out: dict[str, int] = defaultdict(int)
    for p in model.parameters():  # tied tensors once
        out[str(p.dtype).removeprefix("torch.")] += p.numel() * p.element_size()
    return dict(out)


@torch.no_grad()
def measure_kv_cache(
    spec: ModelSpec,
    batch: int = 2,
    seq_len: int = 128,
    dtype="fp32",
    src_len: int | None = None,
    device="cpu",
    model: Transformer | None = None,
) -> int:
    """Bytes of the keys and values a decoder caches after a prompt of `seq_len` tokens (and, for an
    encoder-decoder, the cross-attention keys and values over `src_len` source tokens). Works on
    the meta device too (sizes only)."""
    check_workload(spec, batch, seq_len, src_len)
    if spec.decoder_layers == 0:
        return 0
    if model is None:
        model = build(spec, device=device, dtype=resolve_dtype(dtype))
    inputs, _ = random_batch(spec, batch, seq_len, src_len, device)
    cache = model.new_cache()
    model(*inputs, cache=cache)
    return cache_bytes(cache)
