"""Exact FLOPs of a forward pass, by component and by operation, from the spec alone.

Conventions (docs/architecture.md):

- 2 FLOPs per multiply-accumulate; ``macs`` is half of ``forward``. fvcore counts one MAC as one
  "flop": compare fvcore's figures with ``macs``.
- Matmul-class work only: every linear layer (bias adds are not matmuls), Q·Kᵀ, scores·V and the
  output head. This is what torch's FlopCounterMode measures on the reference model on the meta
  device; the tests hold the two equal.
- Attention counts the full score matrix by default, as kernels and counters do;
  ``causal_half=True`` counts only the T(T+1)/2 query-key pairs a causal mask keeps.
- Backward = 2 × forward (gradients for inputs and for weights); training = forward + backward.
- Work that is not a matmul (norms, softmax, activations, residual and bias adds, positions) is a
  separate, labelled estimate (``non_matmul``), never folded into the exact figure.
- An encoder-decoder reads S source tokens per T target tokens; "per token" means per target
  token. A pooler (BertModel) is counted where the spec has one: one d_model x d_model product
  per sequence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

from archspec.core.checks import check_args
from archspec.core.compiled import per_structure
from archspec.core.errors import SpecError
from archspec.core.limits import float_or_int
from archspec.core.records import Exact, record, rendered
from archspec.core.tracing import as_float, fraction
from archspec.count.params import ParamCount, count_params
from archspec.describe.blocks import AttentionShape, describe, described
from archspec.describe.entries import NON_MATMUL_CATEGORIES, Lengths, Work
from archspec.spec.model import ModelSpec

PF_DAY = 10**15 * 24 * 3600  # one petaFLOP/s sustained for a day: 8.64e19 FLOPs


# ---------------------------------------------------------------- primitives (archspec.describe.entries)

# fvcore's third bin: work neither counted nor estimated, named so that nothing vanishes as a silent zero.
NOT_MODELLED = (
    "embedding and position lookups (gathers, no arithmetic)",
    "the loss over the vocabulary (log-softmax and gather)",
    "the optimizer step (a few FLOPs per parameter per step)",
    "the pooler's tanh",
    "dropout",
)


def exact_number(x: Fraction) -> int | float:
    """An int when the fraction is whole, else the nearest float."""
    return int(x) if x.denominator == 1 else float_or_int(x)


@dataclass(frozen=True)
class FlopCount:
    """Exact forward matmul FLOPs for one workload, by component and operation. Its JSON record is its
    fields and the figures to_dict derives; causal_half shows as attention_scores."""

    name: str
    batch: int
    seq_len: int
    src_len: int | None = field(metadata=rendered(omit_none=True))
    forward: int
    components: dict[str, int]
    operations: dict[str, int]
    non_matmul: dict[str, int] = field(metadata=rendered("non_matmul_estimate"))
    causal_half: bool = field(default=False, metadata=rendered(hidden=True))
    params: int = field(default=0, metadata=rendered(hidden=True))
    active_params: int = field(default=0, metadata=rendered(hidden=True))  # parameters one token uses
    approximations: dict[str, dict] = field(default_factory=dict)
    # '{stack}.{kind}' -> {"layers": how many, "forward_per_layer": exact matmul FLOPs of one such layer}
    kinds: dict[str, dict[str, int]] = field(default_factory=dict)

    unit: ClassVar[str] = "FLOPs (2 per multiply-accumulate); macs = FLOPs / 2, fvcore's 'flop'"
    not_modelled: ClassVar[tuple[str, ...]] = NOT_MODELLED

    @property
    def tokens(self) -> int:
        """Tokens the pass produces: batch × (target) sequence length."""
        return self.batch * self.seq_len

    @property
    def macs(self) -> int:
        return self.forward // 2

    @property
    def backward(self) -> int:
        return 2 * self.forward

    @property
    def training(self) -> int:
        return self.forward + self.backward

    @property
    def forward_per_token(self) -> Fraction:
        return Exact(self.forward, self.tokens)

    @property
    def training_per_token(self) -> Fraction:
        return Exact(self.training, self.tokens)

    @property
    def non_matmul_estimate_total(self) -> int:
        return sum(self.non_matmul.values())

    @property
    def attention_scores(self) -> str:
        """Which query-key pairs attention counts."""
        return "causal half" if self.causal_half else "full matrix"

    def training_for(self, tokens: int) -> int:
        """Exact training FLOPs for `tokens` (target) tokens at this sequence length, rounded to an int."""
        return round(self.training_per_token * tokens)

    def to_dict(self) -> dict:
        return record(self, derived=(
            ("forward_per_token", "forward", exact_number), ("backward", "forward"), ("training", "forward"),
            ("training_per_token", "forward", exact_number), ("macs", "forward"), ("unit", "forward"),
            ("attention_scores", "forward"),
            ("non_matmul_estimate_total", "non_matmul"), ("not_modelled", "non_matmul"),
        ))  # fmt: skip

    def _repr_html_(self) -> str:  # a table in Jupyter
        from archspec.render.notebook import result_html

        return result_html(self)


def workload_lengths(spec: ModelSpec, batch: int, seq_len: int | None, src_len: int | None) -> Lengths:
    """The workload: B sequences of T target (or only) tokens, max_positions by default, and for an
    encoder-decoder S source tokens, T by default. Bad lengths are a ValueError naming the numbers."""
    T = spec.max_positions if seq_len is None else seq_len
    if batch < 1 or T < 1:
        raise SpecError(f"batch and seq_len must be positive, got batch={batch}, seq_len={T}")
    if src_len is not None and spec.kind != "encoder-decoder":
        stack = "it has no encoder" if spec.kind == "decoder-only" else "its encoder reads the seq_len tokens"
        raise SpecError(f"{spec.name} is {spec.kind}, {stack}; src_len applies to encoder-decoder models only")
    S = (T if src_len is None else src_len) if spec.kind == "encoder-decoder" else None
    if S is not None and S < 1:
        raise SpecError(f"src_len must be positive, got {S}")
    if spec.position.kind == "learned":
        for what, n in (("seq_len", T), ("src_len", S)):
            if n is not None and n > spec.max_positions:
                raise SpecError(
                    f"{what}={n} is longer than the learned position table (max_positions={spec.max_positions})"
                )
    return Lengths(batch, T, S)


@per_structure
@described
def count_flops(
    spec: ModelSpec, batch: int = 1, seq_len: int | None = None, src_len: int | None = None, causal_half: bool = False
) -> FlopCount:
    """Exact forward matmul FLOPs of `spec` on `batch` sequences of `seq_len` tokens: a sum over the
    model's description (archspec.describe.blocks), with the non-matmul estimate from the same entries.

    seq_len defaults to max_positions; for an encoder-decoder it is the target length and
    src_len (default: seq_len) the source length.
    """
    check_args("count_flops", spec=spec, batch=batch, seq_len=seq_len, src_len=src_len, causal_half=causal_half)
    lengths = workload_lengths(spec, batch, seq_len, src_len)
    if causal_half and not spec.decoder_layers:
        raise SpecError(f"{spec.name} is encoder-only; causal_half halves a decoder's self-attention scores")
    B = lengths.batch
    ops: dict[str, int] = {}
    components = {"attention": 0, "cross_attention": 0, "mixer": 0, "mlp": 0, "router": 0, "experts": 0,
                  "shared_experts": 0, "pooler": 0, "head": 0}  # fmt: skip
    non_matmul = dict.fromkeys(NON_MATMUL_CATEGORIES, 0)
    kinds: dict[str, dict[str, int]] = {}
    for part in describe(spec):
        n = part.repeat
        work = Work(lengths, part.stack, causal_half)
        layer = kinds.setdefault(f"{part.stack.name}.{part.kind}", {"layers": n, "forward_per_layer": 0}) if (
            part.layered) else None  # fmt: skip
        for e in part.entries:
            for category, value in e.non_matmul(work).items():
                non_matmul[category] += n * value
            for name, flops in e.matmul(work).items():
                key = f"{part.component}.{name}" if name else part.component
                ops[key] = ops.get(key, 0) + n * flops
                components[part.component] = components.get(part.component, 0) + n * flops
                if layer is not None:
                    layer["forward_per_layer"] += flops
    forward = sum(components.values())
    pc = count_params(spec)
    T = lengths.target
    return FlopCount(
        name=spec.name,
        batch=B,
        seq_len=T,
        src_len=lengths.source,
        forward=forward,
        components=components,
        operations=ops,
        non_matmul=non_matmul,
        causal_half=causal_half,
        params=pc.total,
        active_params=pc.active,
        approximations=approximations(spec, B, T, forward, pc),
        kinds=kinds,
    )


# ---------------------------------------------------------------- published approximations


def approximations(spec: ModelSpec, B: int, T: int, forward: int, pc: ParamCount) -> dict[str, dict]:
    """Published shortcuts for a workload of B sequences of T tokens, each beside the exact figure it
    approximates (`forward`: the exact forward FLOPs; `pc`: the model's parameter count).

    Each formula takes the parameters its authors meant: 6ND all of them (as the GPT-3 paper counts;
    a mixture of experts adds 6ND_active, the parameters one token uses, first),
    Kaplan the non-embedding N, PaLM the parameters that take part in matmuls (no input lookup
    tables; the output projection once, tied or not)."""
    tokens = B * T
    N, N_ne, N_mm = pc.total, pc.non_embedding, pc.matmul
    L, d, nh, dk, V = spec.n_layers, spec.d_model, spec.n_heads, spec.d_head, spec.vocab_size
    d_attn = AttentionShape.of(spec).q
    exact_train = 3 * forward
    exact_recompute = 4 * forward  # forward, backward (2x) and a full recomputation of the forward
    megatron = fraction(96 * B * T * L * d * d) * (1 + fraction(T, 6 * d) + fraction(V, 16 * L * d))
    moe = pc.active < N  # a mixture of experts: 6ND is usually taken with the parameters a token uses
    rows = {}
    if moe:
        rows["6ND_active"] = (
            "6 * N_active * tokens (N_active = the parameters one token uses: a mixture of experts' top-k routed "
            "experts, as mixture-of-experts papers count compute; 6ND counts all of them)",
            6 * pc.active * tokens,
            exact_train,
        )
    rows |= {
        "6ND": (
            "6 * N * tokens (N = all parameters; Kaplan et al. 2020, GPT-3 Table D.1)",
            6 * N * tokens,
            exact_train,
        ),
        "kaplan": (
            "3 * (2 * N_nonembedding + 2 * n_layer * n_ctx * d_attn) * tokens (Kaplan et al. 2020, Table 1)",
            3 * (2 * N_ne + 2 * L * T * d_attn) * tokens,
            exact_train,
        ),
        "palm": (
            "(6 * N + 12 * L * H * Q * T) * tokens, N = parameters in matmuls (Chowdhery et al. 2022, Appendix B)",
            (6 * N_mm + 12 * L * nh * dk * T) * tokens,
            exact_train,
        ),  # fmt: skip
        "megatron": (
            "96 * B * s * l * h^2 * (1 + s/6h + V/16lh) (Narayanan et al. 2021, eq. 3; includes full "
            "activation recomputation, so it is compared with 4 x forward)",
            round(megatron),
            exact_recompute,
        ),
    }
    approx = {}
    for key, (formula, value, reference) in rows.items():
        approx[key] = {
            "formula": formula,
            "value": value,
            "exact": reference,
            "deviation": as_float(fraction(value - reference, reference)),
        }
    return approx


# ---------------------------------------------------------------- training cost


@dataclass(frozen=True)
class TrainingCost:
    """Total training compute for D tokens and the wall time it implies on some accelerators."""

    tokens: int
    training_total: int  # exact: training FLOPs per token x D
    training_total_6nd: int  # 6 N D, as the GPT-3 paper counts
    params: int
    active_params: int | None = None  # a mixture of experts: the parameters one token uses
    seconds: float | None = None
    gpus: int | None = None
    peak_flops: float | None = None
    mfu: float | None = None
    accelerator: str | None = None
    price_per_hour: Fraction | None = None  # what one device costs an hour: the user's figure (archspec.plan.cost)

    @property
    def device_hours(self) -> float | int | None:
        """Training FLOPs / (peak FLOP/s x mfu) / 3600: the devices' hours, whatever their number."""
        if self.seconds is None:
            return None
        return float_or_int(Fraction(self.training_total) / (Fraction(self.peak_flops) * Fraction(self.mfu)) / 3600)

    @property
    def cost(self) -> float | int | None:
        """device-hours x price_per_hour (archspec.plan.cost.run_cost); None without a price."""
        if self.price_per_hour is None or self.seconds is None:
            return None
        from archspec.plan.cost import run_cost

        return run_cost(self.price_per_hour, self.training_total, self.peak_flops, self.mfu)

    @property
    def pf_days(self) -> float:
        """6·N·D in PF-days, as the GPT-3 paper (Table D.1) counts."""
        return float_or_int(Fraction(self.training_total_6nd, PF_DAY))

    @property
    def training_total_6nd_active(self) -> int | None:
        """6·N_active·D for a mixture of experts (None for a dense model, where it is 6ND)."""
        return None if self.active_params is None else 6 * self.active_params * self.tokens

    @property
    def pf_days_exact(self) -> float:
        """The exact training FLOPs in PF-days."""
        return float_or_int(Fraction(self.training_total, PF_DAY))

    @property
    def chinchilla_tokens(self) -> int:
        """Hoffmann et al. 2022: about 20 training tokens per parameter is compute-optimal."""
        return 20 * self.params


def training_cost(
    flops: FlopCount,
    tokens: int,
    gpus: int | None = None,
    peak_flops: float | None = None,
    mfu: float | None = None,
    accelerator: str | None = None,
    price_per_hour: float | None = None,
) -> TrainingCost:
    """Exact and 6ND training compute for `tokens`; with gpus, peak and mfu, the wall time; with
    `price_per_hour` too (what one device costs an hour, in your currency), what the run costs."""
    from archspec.plan.cost import exact_price

    check_args("training_cost", flops=flops, tokens=tokens, gpus=gpus, peak_flops=peak_flops, mfu=mfu)
    if tokens < 1:
        raise SpecError(f"tokens must be positive, got {tokens}")
    if mfu is not None and not 0 < mfu <= 1:
        raise SpecError(f"mfu must be in (0, 1], got {mfu}")
    if gpus is not None and gpus < 1:
        raise SpecError(f"gpus must be positive, got {gpus}")
    price = exact_price(price_per_hour)
    total = flops.training_for(tokens)
    seconds = None
    if gpus and peak_flops and mfu:
        seconds = float_or_int(Fraction(total) / (gpus * Fraction(peak_flops) * Fraction(mfu)))
    elif price is not None:
        raise SpecError("price_per_hour prices the training time: give gpus, peak_flops and mfu too")
    return TrainingCost(
        tokens=tokens,
        training_total=total,
        training_total_6nd=6 * flops.params * tokens,
        params=flops.params,
        active_params=flops.active_params if 0 < flops.active_params < flops.params else None,
        seconds=seconds,
        gpus=gpus,
        peak_flops=peak_flops,
        mfu=mfu,
        accelerator=accelerator,
        price_per_hour=price,
    )
