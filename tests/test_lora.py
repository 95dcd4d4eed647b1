"""LoRA and QLoRA plans: archspec's adapter count against peft's on transformers' own models (random
weights from a config, nothing downloaded), and the fine-tune's memory against its parts."""

import pytest

import archspec
from archspec import ModelSpec
from archspec.memory import estimate_memory, lora_params, stored_weights_bytes, training_bytes_per_param

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# a small Llama: grouped-query attention (d_head 16, 2 key/value heads), SwiGLU, untied head
LLAMA = dict(vocab_size=96, hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64)  # fmt: skip
LLAMA_SPEC = ModelSpec(name="tiny-llama", vocab_size=96, d_model=64, decoder_layers=3, n_heads=4, n_kv_heads=2,
                       d_ff=160, max_positions=64, position="rotary", norm="rmsnorm", activation="swiglu", bias=False,
                       tie_embeddings=False)  # fmt: skip
# peft's module names for archspec's projections
LLAMA_MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
                 "down": "down_proj"}  # fmt: skip


def peft_trainable(model, rank: int, modules: list[str]) -> int:
    peft = pytest.importorskip("peft")  # here, not at collection: importing it takes seconds
    config = peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=modules, lora_dropout=0.0, bias="none")
    return peft.get_peft_model(model, config).get_nb_trainable_parameters()[0]


@pytest.mark.parametrize("rank", [1, 8])
@pytest.mark.parametrize(
    "targets", ["all", "attention", "mlp", "q,v", "o,down", "k"], ids=lambda t: t.replace(",", "+")
)
def test_llama_adapters_equal_peft(targets, rank):
    from archspec.memory import lora_targets_of

    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**LLAMA))
    modules = [LLAMA_MODULES[t] for t in lora_targets_of(targets)]
    assert lora_params(LLAMA_SPEC, rank, targets)[0] == peft_trainable(model, rank, modules)


def test_gpt2_adapters_equal_peft_on_its_unfused_projections():
    # GPT-2's c_proj is both the attention output and the MLP down projection; c_fc the MLP up projection.
    # (Its c_attn fuses q, k and v: peft's LoRA on it, r(d + 3d), is not archspec's q,k,v count, r(3d + 3d).)
    spec = archspec.preset("gpt2").replace(vocab_size=100, d_model=48, n_heads=4, decoder_layers=2, max_positions=32)
    config = transformers.GPT2Config(vocab_size=100, n_embd=48, n_head=4, n_layer=2, n_positions=32)
    model = transformers.GPT2LMHeadModel(config)
    assert lora_params(spec, 4, "o,up,down")[0] == peft_trainable(model, 4, ["c_proj", "c_fc"])
    assert lora_params(spec, 4, "q,k,v")[0] == 2 * 4 * (3 * 48 + 3 * 48)  # three maps of d -> d, per layer
    assert peft_trainable(transformers.GPT2LMHeadModel(config), 4, ["c_attn"]) == 2 * 4 * (48 + 3 * 48)


def test_lora_memory_is_a_frozen_base_and_trained_adapters():
    spec = archspec.preset("llama-2-7b")
    m = estimate_memory(spec, seq_len=512, lora_rank=16, lora_targets="attention")
    n = lora_params(spec, 16, "attention")[0]
    assert n == 32 * 16 * 4 * (4096 + 4096)  # Llama 2 7B: four 4096 x 4096 maps per layer
    w, g, o = training_bytes_per_param("bf16")
    assert m.trainable_params == n
    assert m.weights_bytes == stored_weights_bytes(spec, "bf16") + n * w  # base in bf16 + adapters
    assert (m.gradients_bytes, m.optimizer_bytes) == (n * g, n * o)  # for the adapters alone


def test_qlora_base_is_nf4_with_double_quantisation():
    spec = archspec.preset("llama-2-7b")
    m = estimate_memory(spec, seq_len=512, lora_rank=64, weights="nf4")
    # nf4 per 64 weights: 32 bytes of nibbles, an 8-bit absmax; per 256 blocks one fp32 (QLoRA, section 3)
    L, d, f, V = 32, 4096, 11008, 32000
    matrices = L * (4 * d * d + 3 * d * f)
    blocks = matrices // 64
    nf4 = blocks * (32 + 1) + blocks // 256 * 4
    rest = (2 * V * d + (2 * L + 1) * d) * 2  # embeddings, head and norms in bf16
    assert m.lora["base_bytes"] == nf4 + rest


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--lora", "0"], "must be greater than 0"),
        (["--lora", "8", "--lora-targets", "qkv"], "unknown LoRA target 'qkv'"),
        (["--lora-targets", "q"], "--lora-targets needs --lora RANK"),
        (["--weights", "q2_k"], "unknown --weights format 'q2_k'"),
        (["--experts", "mxfp4"], "gpt2 has no routed experts"),
        (["--kv-dtype", "q4_k_m"], "invalid choice: 'q4_k_m'"),
        (["--micro-batch", "0"], "must be greater than 0"),
        (["--micro-batch", "4", "--batch", "8"], "give one of them"),
        (["--micro-batch", "4", "--global-batch", "6"], "global_batch=6 is not a multiple of micro_batch=4"),
        (["--global-batch", "1.5"], "a positive whole number"),
        (["--max-micro-batch"], "--max-micro-batch needs --gpu"),
        (["--offload", "gradients"], "invalid choice: 'gradients'"),
    ],
)
def test_bad_fine_tuning_options_are_refused_by_name(run_cli, argv, message):
    code, _, err = run_cli("memory", "gpt2", *argv)
    assert code == 2 and message in err and "Traceback" not in err and err.count("\n") == 1


def test_latent_attention_lora_is_refused():
    from archspec.core.errors import SpecError

    with pytest.raises(SpecError, match="latent attention is not modelled"):
        lora_params(archspec.preset("deepseek-v3"), 8, "q")
    assert lora_params(archspec.preset("deepseek-v3"), 8, "mlp")[0] > 0


def test_memory_cli_reports_the_fine_tune(run_json):
    (m,) = run_json("memory", "llama-2-7b", "--lora", "16", "--weights", "nf4", "--micro-batch", "2",
                    "--global-batch", "32", "--gpu", "a100", "--max-micro-batch", "--offload", "optimizer")  # fmt: skip
    assert m["trainable_params"] == lora_params(archspec.preset("llama-2-7b"), 16)[0]
    assert (m["weights"], m["micro_batch"], m["accumulation_steps"], m["offload"]) == ("nf4", 2, 16, "optimizer")
    assert m["host_bytes"] == m["optimizer_bytes"] > 0
    assert m["inference_weights_bytes"] == stored_weights_bytes(archspec.preset("llama-2-7b"), "nf4")
    assert m["max_micro_batch"] >= 2
