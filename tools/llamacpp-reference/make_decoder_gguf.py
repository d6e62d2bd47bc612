#!/usr/bin/env python3
"""Writes a GGUF of a transformer decoder beyond the plain llama layout, with a published
model's dimensions and no weight data (a sparse file), like make_gguf.py.

  gemma2    Gemma 2: four norms per layer, sliding window on even layers, attention and final
            logit soft-capping (50 and 30).
  gemma3    Gemma 3: q/k norms, four norms per layer, 5 sliding-window layers to 1 global.
  qwen3     Qwen3 (dense): q/k norms, a gated MLP.
  qwen3moe  Qwen3-MoE: q/k norms, every layer a mixture of experts without a shared one.
  mixtral   Mixtral: the llama architecture with every layer a mixture of experts.
  cohere2   Command R7B / Command A: one LayerNorm per layer before attention and the MLP side
            by side, 3 sliding-window layers to 1 global, tied embeddings.
  phi3      Phi-3 / Phi-4-mini: fused q/k/v and gate/up projections (llama.cpp ignores the
            window the file gives).
  gpt-oss   gpt-oss: biased attention with a learned sink per head, sliding window on even
            layers, MXFP4 experts with biases and a biased router.
  llama4    Llama 4: chunked attention (llama.cpp's fixed 8192-token chunks) in three of every
            four layers, MoE layers every --moe-step-th with one shared expert, dense ones
            between.
  glm4moe   GLM-4.5: biased q/k/v, the first --dense-layers layers dense, then experts with a
            routing bias and --shared-experts shared ones.
  deepseek2 DeepSeek-V2: multi-head latent attention (q compressed to --q-lora), the first
            --dense-layers layers dense, then experts with --shared-experts shared ones. With
            --legacy-mla the GGUF has the unsplit attn_kv_b of older conversions (llama.cpp then
            caches full K and V per head instead of the latent).
  gemma     Gemma (1): the llama layout with GeGLU, tied embeddings and the embeddings scaled.
  qwen2moe  Qwen1.5-MoE / Qwen2-MoE: biased q/k/v, every layer experts beside one shared expert
            (--shared-ffn wide) whose output a sigmoid gate scales.
  starcoder2 StarCoder2: LayerNorms with biases, biased attention, a plain GELU MLP with biases.
  falcon    Falcon: one LayerNorm with bias before attention and the MLP side by side, fused
            q/k/v (multi-query: --kv-heads 1), a plain GELU MLP; --norm-2 adds the second norm
            of Falcon-40B's layout.
  gptneox   GPT-NeoX / Pythia: biased LayerNorms, fused and biased q/k/v, a biased GELU MLP
            beside attention (--serial-residual: after it), RoPE on --rotary of each head.
  minimax-m2 MiniMax-M2: q and k RMS-normed over their whole width (not per head), RoPE on
            --rope-dim of each head, every layer experts (--expert-ffn wide, which is also the
            feed-forward length, as the converter writes it) chosen by sigmoid scores plus a
            correction bias, no shared expert.
  minimax-m3 MiniMax-M3: q and k RMS-normed per head, RoPE on --rope-dim, a gated MLP of --ffn
            in the first --dense-layers, then experts of --expert-ffn routed as M2's with
            --shared-experts beside them, and MiniMax Sparse Attention's indexer (--indexer-heads
            of --indexer-dim, --indexer-top-k blocks of --indexer-block tokens, --indexer-local).
  gemma4    Gemma 4 (dense, 31B's layout): sliding layers of --head-dim and --kv-heads, full
            layers (F in --layer-types, S sliding) of --global-head-dim and --global-kv-heads
            whose V is K's projection (no attn_v), q/k norms, four norms per layer, rope_freqs
            on the first full layer, a scalar on each layer's output, final logit
            soft-capping 30, tied embeddings, no per-layer embeddings. With --experts,
            26B-A4B's kind: every layer experts beside the MLP, the router's input scale, three
            more norms and a scale per expert. E2B/E4B's kind: --per-layer-input (per-layer
            embeddings: their token table, the model's projection and norm, each layer's gate,
            projection and norm), --kv-shared (the last layers without K/V of their own, reusing
            an earlier layer's cache), --double-wide (those layers' MLP twice --ffn, written as
            per-layer widths) and --full-v-proj (full layers with attn_v).
  gemma4-assistant  Gemma 4's assistant (draft): gemma4's layers of --layer-types with no K, V or
            K norm (every layer reads the target's cache), a model width of --hidden beside the
            target's --backbone (embedding_length_out), nextn.pre_projection from the target's
            embedding and hidden state side by side (2 x --backbone) to --hidden and
            nextn.post_projection back to --backbone, every layer counted as nextn
            (nextn_predict_layers = block_count), as conversion/gemma.py's
            Gemma4AssistantModel writes it.

Vectors are f32, matrices f16 (gpt-oss's experts MXFP4, as published).

usage: make_decoder_gguf.py gemma3 OUT.gguf --hidden 2560 --layers 12 --heads 8 --kv-heads 4
           --head-dim 256 --ffn 10240 --vocab 262208 --window 1024
       make_decoder_gguf.py qwen3moe OUT.gguf --hidden 2048 --layers 8 --heads 32 --kv-heads 4
           --head-dim 128 --vocab 151936 --experts 128 --experts-used 8 --expert-ffn 768
       make_decoder_gguf.py gpt-oss OUT.gguf --hidden 2880 --layers 4 --heads 64 --kv-heads 8
           --head-dim 64 --vocab 201088 --experts 32 --experts-used 4 --expert-ffn 2880
           --window 128
"""
import argparse

from gguf import GGMLQuantizationType, GGUFWriter

from sparse_gguf import add_embeddings, add_tensor, add_vocab, finish_sparse

F16, F32, MXFP4 = GGMLQuantizationType.F16, GGMLQuantizationType.F32, GGMLQuantizationType.MXFP4


def attention(t, b: str, a, biases: bool, qk_norm: bool) -> None:
    d, hd = a.hidden, a.head_dim
    t(b + "attn_q.weight", (a.heads * hd, d))
    t(b + "attn_k.weight", (a.kv_heads * hd, d))
    t(b + "attn_v.weight", (a.kv_heads * hd, d))
    t(b + "attn_output.weight", (d, a.heads * hd))
    if biases:
        t(b + "attn_q.bias", (a.heads * hd,), F32)
        t(b + "attn_k.bias", (a.kv_heads * hd,), F32)
        t(b + "attn_v.bias", (a.kv_heads * hd,), F32)
        t(b + "attn_output.bias", (d,), F32)
    if qk_norm:
        t(b + "attn_q_norm.weight", (hd,), F32)
        t(b + "attn_k_norm.weight", (hd,), F32)


def experts(t, b: str, a, ty, biases: bool) -> None:
    d, f, n = a.hidden, a.expert_ffn, a.experts
    t(b + "ffn_gate_inp.weight", (n, d), F32)
    if a.fuse_gate_up_exps and not biases:
        # convert_hf_to_gguf.py --fuse-gate-up-exps: gate rows first, then up.
        t(b + "ffn_gate_up_exps.weight", (n, 2 * f, d), ty)
    else:
        t(b + "ffn_gate_exps.weight", (n, f, d), ty)
        t(b + "ffn_up_exps.weight", (n, f, d), ty)
    t(b + "ffn_down_exps.weight", (n, d, f), ty)
    if biases:
        t(b + "ffn_gate_inp.bias", (n,), F32)
        t(b + "ffn_gate_exps.bias", (n, f), F32)
        t(b + "ffn_up_exps.bias", (n, f), F32)
        t(b + "ffn_down_exps.bias", (n, d), F32)


def gated_mlp(t, b: str, a) -> None:
    d = a.hidden
    t(b + "ffn_gate.weight", (a.ffn, d))
    t(b + "ffn_up.weight", (a.ffn, d))
    t(b + "ffn_down.weight", (d, a.ffn))


def leading_dense_then_moe(t, b: str, a, i: int, routing_bias: bool) -> None:
    """The first --dense-layers layers a gated MLP, the rest experts with shared ones."""
    d = a.hidden
    if i < a.dense_layers:
        gated_mlp(t, b, a)
        return
    experts(t, b, a, F16, biases=False)
    if routing_bias:
        t(b + "exp_probs_b.bias", (a.experts,), F32)
    shared = a.shared_experts * a.expert_ffn
    t(b + "ffn_gate_shexp.weight", (shared, d))
    t(b + "ffn_up_shexp.weight", (shared, d))
    t(b + "ffn_down_shexp.weight", (d, shared))


def deepseek2_keys(w: GGUFWriter, a) -> None:
    k = a.arch
    w.add_uint32(f"{k}.attention.kv_lora_rank", a.kv_lora)
    # llama.cpp reads q_lora_rank except for the 26- and 27-layer Lite models.
    w.add_uint32(f"{k}.attention.q_lora_rank", a.q_lora)
    w.add_uint32(f"{k}.rope.dimension_count", a.rope_dim)
    w.add_uint32(f"{k}.leading_dense_block_count", a.dense_layers)
    w.add_uint32(f"{k}.expert_shared_count", a.shared_experts)
    w.add_float32(f"{k}.expert_weights_scale", 2.5 if a.routing_bias else 1.0)
    if a.expert_groups:
        # Group-limited routing (DeepSeek-V2/V3's n_group, topk_group), as converters write it.
        w.add_uint32(f"{k}.expert_group_count", a.expert_groups)
        w.add_uint32(f"{k}.expert_group_used_count", a.groups_used)
    if a.routing_bias:
        # DeepSeek-V3's router: sigmoid scores with a correction bias, normalised top-k.
        w.add_uint32(f"{k}.expert_gating_func", 2)
        w.add_bool(f"{k}.expert_weights_norm", True)
    if not a.legacy_mla:
        # Newer conversions: the cache holds the latent (key = latent + rope, value = latent);
        # the per-head sizes move to the _mla keys.
        w.add_uint32(f"{k}.attention.key_length_mla", a.head_dim)
        w.add_uint32(f"{k}.attention.value_length_mla", a.v_dim)
    if k in ("deepseek32", "glm-dsa"):
        # DeepSeek-V3.2's (and GLM-5's) sparse attention: the lightning indexer's heads, key
        # width, top-k.
        w.add_uint32(f"{k}.attention.indexer.head_count", a.indexer_heads)
        w.add_uint32(f"{k}.attention.indexer.key_length", a.indexer_dim)
        w.add_uint32(f"{k}.attention.indexer.top_k", a.indexer_top_k)
    if a.indexer_types:
        # GLM-5.2's indexer_types, as conversion/glm.py writes them: true for a "full" layer,
        # false for a "shared" one reusing the previous full layer's top-k.
        assert len(a.indexer_types) == a.layers, "--indexer-types needs one letter a layer"
        w.add_indexer_types([c == "F" for c in a.indexer_types])


def deepseek2_layer(t, b: str, a, i: int) -> None:
    d, nope = a.hidden, a.head_dim - a.rope_dim
    if a.q_lora:
        t(b + "attn_q_a.weight", (a.q_lora, d))
        t(b + "attn_q_a_norm.weight", (a.q_lora,), F32)
        t(b + "attn_q_b.weight", (a.heads * a.head_dim, a.q_lora))
    else:
        t(b + "attn_q.weight", (a.heads * a.head_dim, d))
    t(b + "attn_kv_a_mqa.weight", (a.kv_lora + a.rope_dim, d))
    t(b + "attn_kv_a_norm.weight", (a.kv_lora,), F32)
    if a.legacy_mla:
        t(b + "attn_kv_b.weight", (a.heads * (nope + a.v_dim), a.kv_lora))
    else:
        t(b + "attn_k_b.weight", (a.heads, a.kv_lora, nope))
        t(b + "attn_v_b.weight", (a.heads, a.v_dim, a.kv_lora))
    t(b + "attn_output.weight", (d, a.heads * a.v_dim))
    t(b + "ffn_norm.weight", (d,), F32)
    # A GLM-5.2 "shared" layer has no indexer of its own (llama.cpp loads its tensors as not
    # required and never reads them; assumed absent from the checkpoint).
    shared = a.indexer_types and a.indexer_types[i] == "S"
    if a.arch in ("deepseek32", "glm-dsa") and not shared:
        di = a.indexer_dim
        t(b + "indexer.k_norm.weight", (di,), F32)
        t(b + "indexer.k_norm.bias", (di,), F32)
        t(b + "indexer.proj.weight", (a.indexer_heads, d))
        t(b + "indexer.attn_k.weight", (di, d))
        t(b + "indexer.attn_q_b.weight", (a.indexer_heads * di, a.q_lora))
    leading_dense_then_moe(t, b, a, i, routing_bias=a.routing_bias)


def llama4_layer(t, b: str, a, i: int) -> None:
    d = a.hidden
    attention(t, b, a, biases=False, qk_norm=False)
    t(b + "ffn_norm.weight", (d,), F32)
    if (i + 1) % a.moe_step == 0:
        experts(t, b, a, F16, biases=False)
        t(b + "ffn_gate_shexp.weight", (a.expert_ffn, d))
        t(b + "ffn_up_shexp.weight", (a.expert_ffn, d))
        t(b + "ffn_down_shexp.weight", (d, a.expert_ffn))
    else:
        gated_mlp(t, b, a)


def glm4moe_layer(t, b: str, a, i: int) -> None:
    d, hd = a.hidden, a.head_dim
    t(b + "attn_q.weight", (a.heads * hd, d))
    t(b + "attn_k.weight", (a.kv_heads * hd, d))
    t(b + "attn_v.weight", (a.kv_heads * hd, d))
    t(b + "attn_q.bias", (a.heads * hd,), F32)
    t(b + "attn_k.bias", (a.kv_heads * hd,), F32)
    t(b + "attn_v.bias", (a.kv_heads * hd,), F32)
    t(b + "attn_output.weight", (d, a.heads * hd))
    t(b + "post_attention_norm.weight", (d,), F32)
    leading_dense_then_moe(t, b, a, i, routing_bias=True)


def minimax_m3_keys(w: GGUFWriter, a) -> None:
    """What conversion/minimax.py's MiniMaxM3Model writes: M2's sigmoid router and partial
    RoPE, the shared experts, routed scaling and normalised weights, the leading dense layers
    (moe_layer_freq's leading zeros) and MSA's indexer (sparse_attention_config)."""
    k = "minimax-m3"
    w.add_uint32(f"{k}.expert_gating_func", 2)
    w.add_rope_dimension_count(a.rope_dim)
    w.add_uint32(f"{k}.expert_shared_count", a.shared_experts)
    w.add_float32(f"{k}.expert_weights_scale", a.weights_scale)
    w.add_bool(f"{k}.expert_weights_norm", True)
    w.add_uint32(f"{k}.leading_dense_block_count", a.dense_layers)
    w.add_uint32(f"{k}.attention.indexer.head_count", a.indexer_heads)
    w.add_uint32(f"{k}.attention.indexer.key_length", a.indexer_dim)
    w.add_uint32(f"{k}.attention.indexer.top_k", a.indexer_top_k)
    w.add_uint32(f"{k}.attention.indexer.block_size", a.indexer_block)
    w.add_uint32(f"{k}.attention.indexer.local_blocks", a.indexer_local)


def minimax_m3_layer(t, b: str, a, i: int) -> None:
    """A MiniMax-M3 layer: per-head q/k norms, a gated MLP of --ffn in the leading dense
    layers, then sigmoid-routed experts with a correction bias, shared experts and MSA's
    indexer (f32, as the converter forces it)."""
    attention(t, b, a, biases=False, qk_norm=True)
    t(b + "ffn_norm.weight", (a.hidden,), F32)
    leading_dense_then_moe(t, b, a, i, routing_bias=True)
    if i >= a.dense_layers:
        di = a.indexer_dim
        t(b + "indexer.q_proj.weight", (a.indexer_heads * di, a.hidden), F32)
        t(b + "indexer.k_proj.weight", (di, a.hidden), F32)
        t(b + "indexer.q_norm.weight", (di,), F32)
        t(b + "indexer.k_norm.weight", (di,), F32)


def gemma4_keys(w: GGUFWriter, a) -> None:
    """What convert_hf_to_gguf.py's Gemma4Model writes: per-layer KV heads and the sliding
    pattern as arrays, both layer types' head sizes and RoPE widths."""
    full = [c == "F" for c in a.layer_types]
    assert len(full) == a.layers, "--layer-types needs one letter a layer"
    w.add_head_count_kv([a.global_kv_heads if f else a.kv_heads for f in full])
    w.add_sliding_window_pattern([not f for f in full])
    w.add_key_length_swa(a.head_dim)
    w.add_uint32(f"{w.arch}.attention.value_length_swa", a.head_dim)
    w.add_rope_dimension_count(a.global_head_dim)
    w.add_uint32(f"{w.arch}.rope.dimension_count_swa", a.head_dim)
    w.add_float32(f"{w.arch}.rope.freq_base_swa", 10000.0)
    w.add_uint32(f"{w.arch}.attention.shared_kv_layers", a.kv_shared)
    w.add_uint32(f"{w.arch}.embedding_length_per_layer_input", a.per_layer_input)
    w.add_float32(f"{w.arch}.final_logit_softcapping", 30.0)
    # use_double_wide_mlp: the converter writes the widths per layer, the KV-sharing layers'
    # twice the others'.
    first_shared = a.layers - a.kv_shared
    if a.double_wide:
        w.add_feed_forward_length([a.ffn if i < first_shared else 2 * a.ffn
                                   for i in range(a.layers)])
    else:
        w.add_feed_forward_length(a.ffn or a.expert_ffn)


def gemma4_per_layer_inputs(t, a) -> None:
    """E2B/E4B's per-layer embeddings: a token table of --per-layer-input values per layer (every
    layer's side by side), the model's projection to them and its norm."""
    n = a.per_layer_input * a.layers
    t("per_layer_token_embd.weight", (a.vocab, n))
    t("per_layer_model_proj.weight", (n, a.hidden))
    t("per_layer_proj_norm.weight", (a.per_layer_input,), F32)


def gemma4_layer(t, b: str, a, i: int) -> None:
    """A Gemma 4 layer: a full one's V is its K projection (attention_k_eq_v, unless
    --full-v-proj), so it has no attn_v; the first full layer holds rope_freqs (llama.cpp
    duplicates it for the others). A layer among the last --kv-shared reads an earlier layer's
    cache: no attn_k, attn_v or attn_k_norm, and (--double-wide) an MLP twice as wide."""
    d = a.hidden
    full = a.layer_types[i] == "F"
    shared = i >= a.layers - a.kv_shared
    hd, kv = (a.global_head_dim, a.global_kv_heads) if full else (a.head_dim, a.kv_heads)
    t(b + "attn_q.weight", (a.heads * hd, d))
    if not shared:
        t(b + "attn_k.weight", (kv * hd, d))
        if not full or a.full_v_proj:
            t(b + "attn_v.weight", (kv * hd, d))
    t(b + "attn_output.weight", (d, a.heads * hd))
    t(b + "attn_q_norm.weight", (hd,), F32)
    if not shared:
        t(b + "attn_k_norm.weight", (hd,), F32)
    t(b + "post_attention_norm.weight", (d,), F32)
    if full and a.layer_types.index("F") == i:
        t("rope_freqs.weight", (hd // 2,), F32)
    t(b + "ffn_norm.weight", (d,), F32)
    f = 2 * a.ffn if shared and a.double_wide else a.ffn
    t(b + "ffn_gate.weight", (f, d))
    t(b + "ffn_up.weight", (f, d))
    t(b + "ffn_down.weight", (d, f))
    t(b + "post_ffw_norm.weight", (d,), F32)
    if a.per_layer_input:
        # The layer's per-layer input: a gate from the width down to it, a projection back up,
        # and a norm after it.
        t(b + "inp_gate.weight", (a.per_layer_input, d))
        t(b + "proj.weight", (d, a.per_layer_input))
        t(b + "post_norm.weight", (d,), F32)
    if a.experts:
        # 26B-A4B: experts beside the dense MLP, each with norms of its own, a router over a
        # scaled norm of the layer's input and a scale per expert on its output.
        t(b + "ffn_gate_inp.weight", (a.experts, d), F32)
        t(b + "ffn_gate_inp.scale", (d,), F32)
        for n in ("pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2"):
            t(b + n + ".weight", (d,), F32)
        f = a.expert_ffn
        if a.fuse_gate_up_exps:
            t(b + "ffn_gate_up_exps.weight", (a.experts, 2 * f, d))
        else:
            t(b + "ffn_gate_exps.weight", (a.experts, f, d))
            t(b + "ffn_up_exps.weight", (a.experts, f, d))
        t(b + "ffn_down_exps.weight", (a.experts, d, f))
        t(b + "ffn_down_exps.scale", (a.experts,), F32)
    # The layer's output scalar (HF's layer_scalar), which the converter writes.
    t(b + "layer_output_scale.weight", (1,), F32)


def biased_gelu_mlp(t, b: str, a) -> None:
    """StarCoder2's and GPT-NeoX's feed-forward block: a LayerNorm and both projections biased."""
    d = a.hidden
    t(b + "ffn_norm.weight", (d,), F32)
    t(b + "ffn_norm.bias", (d,), F32)
    t(b + "ffn_up.weight", (a.ffn, d))
    t(b + "ffn_up.bias", (a.ffn,), F32)
    t(b + "ffn_down.weight", (d, a.ffn))
    t(b + "ffn_down.bias", (d,), F32)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("arch", choices=["gemma2", "gemma3", "qwen3", "qwen3moe", "mixtral", "cohere2",
                                    "phi3", "gpt-oss", "deepseek2", "deepseek32", "glm-dsa", "llama4", "glm4moe", "gemma",
                                    "qwen2moe", "starcoder2", "falcon", "gptneox",
                                    "minimax-m2", "minimax-m3", "gemma4",
                                    "gemma4-assistant"])
    p.add_argument("--shared-ffn", type=int, default=0, help="qwen2moe: the shared expert's width")
    p.add_argument("--norm-2", action="store_true", help="falcon: attn_norm_2 (Falcon-40B)")
    p.add_argument("--serial-residual", action="store_true",
                   help="gptneox: use_parallel_residual false")
    p.add_argument("--moe-step", type=int, default=1)
    p.add_argument("--fuse-gate-up-exps", action="store_true",
                   help="deepseek2: the experts' gate and up as one ffn_gate_up_exps")
    p.add_argument("out")
    p.add_argument("--name", default="shape")
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--kv-heads", type=int, required=True)
    p.add_argument("--head-dim", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--ffn", type=int, default=0)
    p.add_argument("--experts", type=int, default=0)
    p.add_argument("--experts-used", type=int, default=0)
    p.add_argument("--expert-ffn", type=int, default=0)
    p.add_argument("--window", type=int, default=0)
    p.add_argument("--kv-lora", type=int, default=512)
    p.add_argument("--q-lora", type=int, default=0)
    p.add_argument("--rope-dim", type=int, default=64)
    p.add_argument("--v-dim", type=int, default=128)
    p.add_argument("--dense-layers", type=int, default=1)
    p.add_argument("--shared-experts", type=int, default=2)
    p.add_argument("--legacy-mla", action="store_true")
    p.add_argument("--indexer-heads", type=int, default=64,
                   help="deepseek32: the lightning indexer's heads (index_n_heads)")
    p.add_argument("--indexer-dim", type=int, default=128,
                   help="deepseek32: its key width (index_head_dim)")
    p.add_argument("--indexer-top-k", type=int, default=2048,
                   help="deepseek32: the keys each query attends (index_topk); minimax-m3: the "
                   "blocks (sparse_topk_blocks)")
    p.add_argument("--indexer-types", default="",
                   help="glm-dsa: F (full indexer) or S (shared: the previous full layer's "
                   "top-k, no indexer tensors) per layer (GLM-5.2's indexer_types)")
    p.add_argument("--indexer-block", type=int, default=128,
                   help="minimax-m3: tokens a block (sparse_block_size)")
    p.add_argument("--indexer-local", type=int, default=1,
                   help="minimax-m3: local blocks always attended (sparse_local_block)")
    p.add_argument("--routing-bias", action="store_true",
                   help="deepseek2: DeepSeek-V3's sigmoid router with a correction bias")
    p.add_argument("--expert-groups", type=int, default=0,
                   help="deepseek2: expert groups (n_group; DeepSeek-V3: 8)")
    p.add_argument("--groups-used", type=int, default=0,
                   help="deepseek2: groups a token uses (topk_group; DeepSeek-V3: 4)")
    p.add_argument("--weights-scale", type=float, default=1.0,
                   help="glm4moe: routed_scaling_factor (GLM-4.5: 2.5, GLM-4.5-Air: 1.0)")
    p.add_argument("--tied", action="store_true", help="phi3: tied embeddings (Phi-4-mini)")
    p.add_argument("--rotary", type=float, default=1.0, help="phi3, gptneox: partial rotary factor")
    p.add_argument("--layer-types", default="", help="gemma4: S (sliding) or F (full) per layer")
    p.add_argument("--global-head-dim", type=int, default=512, help="gemma4: full layers' head")
    p.add_argument("--global-kv-heads", type=int, default=4, help="gemma4: full layers' KV heads")
    p.add_argument("--per-layer-input", type=int, default=0,
                   help="gemma4: per-layer embeddings' width (E2B/E4B: 256)")
    p.add_argument("--kv-shared", type=int, default=0,
                   help="gemma4: the last N layers reuse an earlier layer's KV cache")
    p.add_argument("--backbone", type=int, default=0,
                   help="gemma4-assistant: the target's hidden size (backbone_hidden_size)")
    p.add_argument("--double-wide", action="store_true",
                   help="gemma4: the KV-sharing layers' MLP twice --ffn (E2B)")
    p.add_argument("--full-v-proj", action="store_true",
                   help="gemma4: full layers with their own attn_v (E2B/E4B: no attention_k_eq_v)")
    a = p.parse_args()
    d = a.hidden
    if a.arch == "gemma4-assistant":
        # Every layer reads the target's cache (the converter writes num_kv_shared_layers, which
        # transformers sets to num_hidden_layers); the layers are gemma4's otherwise.
        assert a.backbone and a.backbone != d, "--backbone: the target's hidden size"
        a.kv_shared = a.layers

    w = GGUFWriter(a.out, "llama" if a.arch == "mixtral" else a.arch)
    w.add_name(a.name)
    w.add_context_length(1 << 17)
    w.add_block_count(a.layers)
    w.add_embedding_length(d)
    g4 = a.arch in ("gemma4", "gemma4-assistant")
    if not g4:
        w.add_feed_forward_length(a.ffn or a.expert_ffn)
    w.add_head_count(a.heads)
    if g4:
        gemma4_keys(w, a)
    else:
        w.add_head_count_kv(a.kv_heads)
    if a.arch in ("deepseek2", "deepseek32", "glm-dsa") and not a.legacy_mla:
        w.add_key_length(a.kv_lora + a.rope_dim)
        w.add_value_length(a.kv_lora)
    elif g4:
        w.add_key_length(a.global_head_dim)
        w.add_value_length(a.global_head_dim)
    else:
        w.add_key_length(a.head_dim)
        w.add_value_length(a.v_dim if a.arch in ("deepseek2", "deepseek32", "glm-dsa") else a.head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1_000_000.0)
    w.add_vocab_size(a.vocab)
    w.add_file_type(1)
    if a.window:
        w.add_sliding_window(a.window)
    if a.experts:
        w.add_expert_count(a.experts)
        w.add_expert_used_count(a.experts_used)
        w.add_expert_feed_forward_length(a.expert_ffn)
    if a.arch in ("deepseek2", "deepseek32", "glm-dsa"):
        deepseek2_keys(w, a)
    if a.arch == "llama4":
        w.add_uint32("llama4.interleave_moe_layer_step", a.moe_step)
    if a.arch == "cohere2":
        w.add_float32("cohere2.logit_scale", 0.25)
        w.add_layer_norm_eps(1e-5)
    if a.arch in ("starcoder2", "falcon", "gptneox"):
        w.add_layer_norm_eps(1e-5)
    if a.arch == "gptneox":
        w.add_bool("gptneox.use_parallel_residual", not a.serial_residual)
    if a.arch == "qwen2moe":
        w.add_expert_shared_feed_forward_length(a.shared_ffn)
    if a.arch in ("phi3", "gptneox"):
        w.add_rope_dimension_count(int(a.head_dim * a.rotary))
    if a.arch == "gemma2":
        w.add_float32("gemma2.attn_logit_softcapping", 50.0)
        w.add_float32("gemma2.final_logit_softcapping", 30.0)
    if a.arch == "glm4moe":
        w.add_uint32("glm4moe.leading_dense_block_count", a.dense_layers)
        w.add_uint32("glm4moe.expert_shared_count", a.shared_experts)
        w.add_float32("glm4moe.expert_weights_scale", a.weights_scale)
        w.add_bool("glm4moe.expert_weights_norm", True)
        w.add_uint32("glm4moe.expert_gating_func", 2)
        w.add_uint32("glm4moe.rope.dimension_count", a.head_dim // 2)
    if a.arch == "minimax-m2":
        # The converter writes the router's scoring_func (sigmoid) as expert_gating_func, which
        # llama.cpp's graph needs, and rotary_dim as the RoPE dimension count.
        w.add_uint32("minimax-m2.expert_gating_func", 2)
        w.add_rope_dimension_count(a.rope_dim)
    if a.arch == "minimax-m3":
        minimax_m3_keys(w, a)
    if a.arch == "gemma4-assistant":
        w.add_uint32(f"{w.arch}.embedding_length_out", a.backbone)
        w.add_uint32(f"{w.arch}.nextn_predict_layers", a.layers)
    # llama.cpp's Phi-3 loader looks its end-of-turn tokens up by name.
    add_vocab(w, a.vocab, ("<|endoftext|>", "<|end|>") if a.arch == "phi3" else ())

    t = lambda name, shape, ty=F16: add_tensor(w, name, shape, ty)
    add_embeddings(w, a.vocab, d, tied=a.arch in ("gemma", "gemma2", "gemma3", "gemma4", "gemma4-assistant",
                                                      "cohere2") or a.tied)
    if a.arch == "gemma4-assistant":
        # The target's embedding and hidden state side by side, down to the assistant's width;
        # its hidden state back up to the target's.
        t("nextn.pre_projection.weight", (d, 2 * a.backbone))
        t("nextn.post_projection.weight", (a.backbone, d))
    if a.arch == "gemma4" and a.per_layer_input:
        gemma4_per_layer_inputs(t, a)
    if a.arch in ("starcoder2", "falcon", "gptneox"):
        t("output_norm.bias", (d,), F32)
    for i in range(a.layers):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", (d,), F32)
        if a.arch in ("starcoder2", "falcon", "gptneox"):
            t(b + "attn_norm.bias", (d,), F32)
        if a.arch == "gemma":
            attention(t, b, a, biases=False, qk_norm=False)
            t(b + "ffn_norm.weight", (d,), F32)
            gated_mlp(t, b, a)
        elif a.arch == "qwen2moe":
            qd, kvd = a.heads * a.head_dim, a.kv_heads * a.head_dim
            attention(t, b, a, biases=False, qk_norm=False)
            t(b + "attn_q.bias", (qd,), F32)
            t(b + "attn_k.bias", (kvd,), F32)
            t(b + "attn_v.bias", (kvd,), F32)
            t(b + "ffn_norm.weight", (d,), F32)
            experts(t, b, a, F16, biases=False)
            t(b + "ffn_gate_inp_shexp.weight", (d,), F32)
            t(b + "ffn_gate_shexp.weight", (a.shared_ffn, d))
            t(b + "ffn_up_shexp.weight", (a.shared_ffn, d))
            t(b + "ffn_down_shexp.weight", (d, a.shared_ffn))
        elif a.arch == "starcoder2":
            attention(t, b, a, biases=True, qk_norm=False)
            biased_gelu_mlp(t, b, a)
        elif a.arch == "falcon":
            if a.norm_2:
                t(b + "attn_norm_2.weight", (d,), F32)
                t(b + "attn_norm_2.bias", (d,), F32)
            t(b + "attn_qkv.weight", (d + 2 * a.kv_heads * a.head_dim, d))
            t(b + "attn_output.weight", (d, d))
            t(b + "ffn_up.weight", (a.ffn, d))
            t(b + "ffn_down.weight", (d, a.ffn))
        elif a.arch == "gptneox":
            qkv = d + 2 * a.kv_heads * a.head_dim
            t(b + "attn_qkv.weight", (qkv, d))
            t(b + "attn_qkv.bias", (qkv,), F32)
            t(b + "attn_output.weight", (d, d))
            t(b + "attn_output.bias", (d,), F32)
            biased_gelu_mlp(t, b, a)
        elif a.arch in ("gemma2", "gemma3"):
            attention(t, b, a, biases=False, qk_norm=a.arch == "gemma3")
            t(b + "post_attention_norm.weight", (d,), F32)
            t(b + "ffn_norm.weight", (d,), F32)
            gated_mlp(t, b, a)
            t(b + "post_ffw_norm.weight", (d,), F32)
        elif g4:
            gemma4_layer(t, b, a, i)
        elif a.arch in ("deepseek2", "deepseek32", "glm-dsa"):
            deepseek2_layer(t, b, a, i)
        elif a.arch == "llama4":
            llama4_layer(t, b, a, i)
        elif a.arch == "glm4moe":
            glm4moe_layer(t, b, a, i)
        elif a.arch == "qwen3":
            attention(t, b, a, biases=False, qk_norm=True)
            t(b + "ffn_norm.weight", (d,), F32)
            gated_mlp(t, b, a)
        elif a.arch == "mixtral":
            attention(t, b, a, biases=False, qk_norm=False)
            t(b + "ffn_norm.weight", (d,), F32)
            experts(t, b, a, F16, biases=False)
        elif a.arch == "cohere2":
            attention(t, b, a, biases=False, qk_norm=False)
            gated_mlp(t, b, a)
        elif a.arch == "phi3":
            qd, kvd = a.heads * a.head_dim, a.kv_heads * a.head_dim
            t(b + "attn_qkv.weight", (qd + 2 * kvd, d))
            t(b + "attn_output.weight", (d, qd))
            t(b + "ffn_norm.weight", (d,), F32)
            t(b + "ffn_up.weight", (2 * a.ffn, d))
            t(b + "ffn_down.weight", (d, a.ffn))
        elif a.arch == "qwen3moe":
            attention(t, b, a, biases=False, qk_norm=True)
            t(b + "ffn_norm.weight", (d,), F32)
            experts(t, b, a, F16, biases=False)
        elif a.arch == "minimax-m2":
            attention(t, b, a, biases=False, qk_norm=False)
            # One norm over the whole query, one over the whole key.
            t(b + "attn_q_norm.weight", (a.heads * a.head_dim,), F32)
            t(b + "attn_k_norm.weight", (a.kv_heads * a.head_dim,), F32)
            t(b + "ffn_norm.weight", (d,), F32)
            experts(t, b, a, F16, biases=False)
            t(b + "exp_probs_b.bias", (a.experts,), F32)
        elif a.arch == "minimax-m3":
            minimax_m3_layer(t, b, a, i)
        else:
            attention(t, b, a, biases=True, qk_norm=False)
            t(b + "attn_sinks.weight", (a.heads,), F32)
            t(b + "post_attention_norm.weight", (d,), F32)
            experts(t, b, a, MXFP4, biases=True)
    finish_sparse(w, a.out)


if __name__ == "__main__":
    main()
