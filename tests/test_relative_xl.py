"""Transformer-XL's relative positional attention (position = "transformer_xl"; Dai et al. 2019, section 3.3),
as Gopher and Chinchilla use it (Rae et al. 2021, section 3).

transformers no longer ships Transfo-XL (5.x: models.deprecated holds nothing of it), so the reference model's
attention is held to an implementation written here from the paper's equations and its code's layout
(RelPartialLearnableMultiHeadAttn): per head

    A_ij = (q_i + u) . k_j + (q_i + v) . W_r R_(i - j),   softmax over j <= i of A / sqrt(d_head),

with R the sinusoids [sin | cos] of the distances klen - 1, ..., 0, and the relative shift done as the paper's
code does it (a zero column padded on the left, the matrix re-read one row longer, the first row dropped), not
by the reference model's gather. The count, FLOPs, activations and cache are held by verify and the
activation and decoding tests (tests/test_activations_kinds.py, tests/test_features.py)."""

import math

import pytest

torch = pytest.importorskip("torch")

from archspec import ModelSpec, count_params  # noqa: E402
from archspec.reference import build, verify  # noqa: E402

BASE = dict(vocab_size=53, d_model=32, n_heads=4, d_head=8, max_positions=24, decoder_layers=2,
            position="transformer_xl", norm="rmsnorm")  # fmt: skip


def rel_shift(x: torch.Tensor) -> torch.Tensor:
    """Transformer-XL's _rel_shift of x (qlen, klen, ...): row i moves left by qlen - 1 - i."""
    pad = torch.zeros((x.shape[0], 1, *x.shape[2:]), dtype=x.dtype)
    padded = torch.cat((pad, x), dim=1).view(x.shape[1] + 1, x.shape[0], *x.shape[2:])
    return padded[1:].view_as(x)


def paper_attention(h, w_qkv, b_qkv, w_r, u, v, w_o, b_o, heads: int, d_head: int) -> torch.Tensor:
    """One layer's relative attention over one sequence h (T, d), no memory, from the paper's equations."""
    T, d = h.shape
    qkv = h @ w_qkv.T + (b_qkv if b_qkv is not None else 0)
    q, k, val = (t.reshape(T, heads, d_head) for t in qkv.split(heads * d_head, dim=-1))
    distances = torch.arange(T - 1, -1, -1.0)
    inv_freq = 1 / (10000 ** (torch.arange(0.0, d, 2.0) / d))
    angles = torch.outer(distances, inv_freq)
    R = torch.cat((angles.sin(), angles.cos()), dim=-1)  # (T, d)
    r = (R @ w_r.T).reshape(T, heads, d_head)
    ac = torch.einsum("ind,jnd->ijn", q + u, k)  # (a) + (c): content, global content bias
    bd = rel_shift(torch.einsum("ind,jnd->ijn", q + v, r))  # (b) + (d): position, global position bias
    scores = (ac + bd) / math.sqrt(d_head)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    probs = scores.masked_fill(future[:, :, None], float("-inf")).softmax(dim=1)
    out = torch.einsum("ijn,jnd->ind", probs, val).reshape(T, heads * d_head)
    return out @ w_o.T + (b_o if b_o is not None else 0)


@pytest.mark.parametrize("changes", [{}, {"position": {"kind": "transformer_xl", "per_layer": False}, "bias": False}],
                         ids=["per-layer-biases", "shared-biases-no-bias"])  # fmt: skip
@pytest.mark.parametrize("layer", [0, 1])
def test_relative_attention_equals_the_papers_equations(changes, layer):
    spec = ModelSpec(name="xl", **{**BASE, **changes})
    model = build(spec, seed=0).eval()
    with torch.no_grad():  # weights off their initial values: u and v of every size, biases nonzero
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    att = model.decoder.layers[layer].attention
    seen = {}
    att.register_forward_hook(lambda m, args, out: seen.update(h=args[0], out=out))
    model(torch.randint(0, 53, (2, 11)))
    own = att.u is not None
    u = att.u if own else model.decoder.position.u
    v = att.v if own else model.decoder.position.v
    with torch.no_grad():
        for b in range(2):
            expected = paper_attention(seen["h"][b], att.qkv.weight, att.qkv.bias, att.r_proj.weight, u, v,
                                       att.out.weight, att.out.bias, spec.n_heads, spec.d_head)  # fmt: skip
            torch.testing.assert_close(seen["out"][b], expected, rtol=1e-5, atol=1e-5)


def test_relative_terms_count_w_r_per_layer_and_u_v_where_they_live():
    """W_r (d_model x n_heads·d_head, no bias) in every layer; u and v (n_heads x d_head each) in every layer,
    or once for the stack."""
    plain = count_params(ModelSpec(name="plain", **{**BASE, "position": "none"}))
    per_layer = count_params(ModelSpec(name="xl", **BASE))
    shared = count_params(ModelSpec(name="xl", **{**BASE, "position": {"kind": "transformer_xl", "per_layer": False}}))
    L, d, q = 2, 32, 4 * 8
    assert per_layer.total - plain.total == L * (d * q + 2 * q)
    assert shared.total - plain.total == L * d * q + 2 * q
    assert shared.components["position"] == 2 * q and per_layer.components["position"] == 0


@pytest.mark.parametrize("changes", [{}, {"position": {"kind": "transformer_xl", "per_layer": False},
                                          "n_kv_heads": 2, "d_head": 6}], ids=["per-layer", "shared-gqa"])  # fmt: skip
def test_relative_attention_verifies_tensor_by_tensor_and_in_flops(changes):
    report = verify(ModelSpec(name="xl", **{**BASE, **changes}), batch=2, seq_len=7)
    assert report.ok, report.mismatches()


def test_a_layer_kind_cannot_drop_the_stacks_relative_positions():
    with pytest.raises(ValueError, match="the model's 'transformer_xl' positions serve every layer alike"):
        ModelSpec(name="xl", **BASE, kinds={"nope": {"position": "none"}}, layers={"pattern": ["nope"]})
