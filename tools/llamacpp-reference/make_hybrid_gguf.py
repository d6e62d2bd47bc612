#!/usr/bin/env python3
"""Writes a GGUF of a recurrent or hybrid architecture with a published model's dimensions and
no weight data (a sparse file), like make_gguf.py does for the llama layout.

  qwen3next  Qwen3-Next: gated DeltaNet layers with full (gated) attention every
             --attn-interval-th layer, a MoE with one gated shared expert in every layer;
             the linear layers' q/k/v/z projection as one ssm_in (GGUFs converted before
             llama.cpp split it), or with --split-qkvz as attn_qkv and attn_gate (as its
             converter writes them now).
  qwen35     Qwen3.5 (dense, or with --experts the MoE `qwen35moe`): Qwen3-Next's layout with
             separate attn_qkv/attn_gate and ssm_beta/ssm_alpha projections, interleaved MRoPE
             sections, a gated MLP of --ffn (or experts and a gated shared expert); --mtp adds
             the multi-token-prediction block as one more layer (nextn_predict_layers), as
             the converter writes it and llama.cpp skips it unless asked.
  kimilinear Kimi-Linear (`kimi-linear`): Kimi Delta Attention layers (q, k and v projected
             and each through a short convolution of its own, a per-channel decay from two
             low-rank projections, β, an output gate from two more, a norm over one head) and
             latent attention without RoPE in the layers --attn-layers lists (1-indexed, as
             linear_attn_config.full_attn_layers), the latent absorbed (attn_k_b, attn_v_b);
             a gated MLP of --ffn in the first --dense-layers layers, then sigmoid-routed
             experts with a correction bias and --shared-ffn of shared expert.
  kimik3     Kimi-K3 (`kimi-k3`): kimilinear's layers with a compressed query (--q-lora), a
             sigmoid output gate on latent attention (attn_gate), KDA's one full-rank output
             gate (ssm_g) and a decay bounded by --gate-lower-bound, the residual streams
             banked every --res-block layers and mixed before each block (attn_res_score,
             ffn_res_score, output_res_score), SiTU activations, and the routed experts at
             --latent between ffn_routed_down and ffn_routed_up (with ffn_routed_norm); the
             matrices of --matrix-type (the embeddings too), as the converter writes the keys.
  glm5next   GLM-5's next variant (`glm5-next`): KDA layers (kimilinear's, decay bounded by
             --gate-lower-bound), nope-only latent attention with a compressed query in the
             --attn-layers, each with the k-pool DSA indexer (its key, LayerNorm, weights,
             query, pool gate and pool position bias) unless listed in
             --shared-indexer-layers, mHC mixers (f32) before attention and before the
             feed-forward block, a gated MLP in the first --dense-layers, then experts with a
             correction bias and --shared-ffn of shared expert; SwiGLU clamped at 10.
  mamba      Mamba (v1): every layer a selective-scan mixer (in_proj, conv, x_proj, dt_proj, A,
             D, out_proj); Δ rank ⌈hidden/16⌉.
  mamba2     Mamba-2: every layer an SSD mixer (in_proj, conv, A, D, gated norm, out_proj).
  jamba      Jamba: Mamba mixers with Δ/B/C norms, attention in the layers --attn-layers
             lists (no RoPE), experts in the layers --moe-layers lists, a gated MLP in the rest.
  granitehybrid  Granite-4.0-H: Mamba-2 mixers with attention in the layers
             --attn-layers lists, a gated MLP (or --experts with a --shared-ffn expert) after
             every mixer; --granite-scales and --nope as Granite-4.0-H's config sets them.
  falconh1   Falcon-H1: attention and a Mamba-2 mixer side by side in every layer (their
             outputs added), then a gated MLP; --no-ssm-norm drops the mixer's gated norm
             (configs with mamba_rms_norm false).
  nemotronh  Nemotron-H: each layer one block of --pattern (M a Mamba-2 mixer, * attention,
             - a squared-ReLU MLP of up and down projections), one norm before each.
  rwkv6      RWKV-6 (Finch): a time mix (data-dependent token shift through a --mix-rank LoRA,
             decay through a --decay-rank LoRA, r/k/v/g projections, a WKV state of
             --head-size per channel, a group norm) and a channel mix (k, v and r projections).
  rwkv7      RWKV-7 (Goose): a time mix (fused token-shift lerps, decay, in-context learning
             rate, value-residual and gate LoRAs of --decay-rank, --iclr-rank, --vres-rank and
             --gate-rank, r/k/v projections, a group norm) and a channel mix (k and v).

Vectors, the convolution and the SSM parameters are f32, matrices f16, as llama.cpp's
converter writes them.

usage: make_hybrid_gguf.py qwen3next OUT.gguf --hidden 2048 --layers 8 --heads 16 --kv-heads 2
           --head-dim 256 --vocab 151936 --experts 64 --experts-used 10 --expert-ffn 512
           --shared-ffn 512 --ssm-k-heads 16 --ssm-v-heads 32 --ssm-head-dim 128
       make_hybrid_gguf.py mamba2 OUT.gguf --hidden 1024 --layers 48 --vocab 50288
           --ssm-state 128 --ssm-head-dim 64 --ssm-groups 1 [--tied]
"""
import argparse

from gguf import ExpertGatingFuncType, GGMLQuantizationType, GGUFWriter

from sparse_gguf import add_embeddings, add_tensor, add_vocab, finish_sparse

F16, F32 = GGMLQuantizationType.F16, GGMLQuantizationType.F32


def attention_keys(w: GGUFWriter, a, ffn: int, rope_dims: int) -> None:
    """The width, feed-forward and (every layer's) attention keys."""
    w.add_embedding_length(a.hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_key_length(a.head_dim)
    w.add_value_length(a.head_dim)
    w.add_rope_dimension_count(rope_dims)


def gated_attention(t, b: str, a) -> None:
    """Qwen3-Next's and Qwen3.5's attention: a query projection twice as wide (the query and
    its gate), per-head q/k norms."""
    d, hd = a.hidden, a.head_dim
    t(b + "attn_q.weight", (a.heads * hd * 2, d))
    t(b + "attn_k.weight", (a.kv_heads * hd, d))
    t(b + "attn_v.weight", (a.kv_heads * hd, d))
    t(b + "attn_output.weight", (d, a.heads * hd))
    t(b + "attn_q_norm.weight", (hd,), F32)
    t(b + "attn_k_norm.weight", (hd,), F32)


def gated_shared_experts(t, b: str, a) -> None:
    """Routed experts beside one shared expert scaled by a sigmoid gate of its own."""
    d = a.hidden
    t(b + "ffn_gate_inp.weight", (a.experts, d), F32)
    t(b + "ffn_gate_exps.weight", (a.experts, a.expert_ffn, d))
    t(b + "ffn_up_exps.weight", (a.experts, a.expert_ffn, d))
    t(b + "ffn_down_exps.weight", (a.experts, d, a.expert_ffn))
    t(b + "ffn_gate_inp_shexp.weight", (d,), F32)
    t(b + "ffn_gate_shexp.weight", (a.shared_ffn, d))
    t(b + "ffn_up_shexp.weight", (a.shared_ffn, d))
    t(b + "ffn_down_shexp.weight", (d, a.shared_ffn))


def delta_net_keys(w: GGUFWriter, a, arch: str) -> None:
    """The experts' keys (when there are experts) and the gated DeltaNet's, as Qwen3-Next's
    and Qwen3.5's converter writes them."""
    if a.experts:
        w.add_expert_count(a.experts)
        w.add_expert_used_count(a.experts_used)
        w.add_expert_feed_forward_length(a.expert_ffn)
        w.add_expert_shared_feed_forward_length(a.shared_ffn)
    w.add_ssm_conv_kernel(a.conv)
    w.add_ssm_inner_size(a.ssm_v_heads * a.ssm_head_dim)
    w.add_ssm_state_size(a.ssm_head_dim)
    w.add_ssm_time_step_rank(a.ssm_v_heads)
    w.add_ssm_group_count(a.ssm_k_heads)
    w.add_uint32(f"{arch}.full_attention_interval", a.attn_interval)


def qwen3next(w: GGUFWriter, a) -> None:
    d, hd = a.hidden, a.head_dim
    key_dim = a.ssm_k_heads * a.ssm_head_dim
    value_dim = a.ssm_v_heads * a.ssm_head_dim
    conv_dim = 2 * key_dim + value_dim
    attention_keys(w, a, a.shared_ffn, rope_dims=hd // 4)
    w.add_rope_freq_base(10_000_000.0)
    delta_net_keys(w, a, "qwen3next")

    t = lambda name, shape, ty=F16: add_tensor(w, name, shape, ty)
    add_embeddings(w, a.vocab, d, a.tied)
    for i in range(a.layers):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", (d,), F32)
        t(b + "post_attention_norm.weight", (d,), F32)
        if (i + 1) % a.attn_interval == 0:
            gated_attention(t, b, a)
        else:
            if a.split_qkvz:
                t(b + "attn_qkv.weight", (conv_dim, d))
                t(b + "attn_gate.weight", (value_dim, d))
            else:
                t(b + "ssm_in.weight", (2 * key_dim + 2 * value_dim, d))
            t(b + "ssm_conv1d.weight", (conv_dim, a.conv), F32)
            t(b + "ssm_dt.bias", (a.ssm_v_heads,), F32)
            t(b + "ssm_a", (a.ssm_v_heads,), F32)
            t(b + "ssm_ba.weight", (2 * a.ssm_v_heads, d))
            t(b + "ssm_norm.weight", (a.ssm_head_dim,), F32)
            t(b + "ssm_out.weight", (d, value_dim))
        gated_shared_experts(t, b, a)


def qwen35(w: GGUFWriter, a) -> None:
    d, hd = a.hidden, a.head_dim
    key_dim = a.ssm_k_heads * a.ssm_head_dim
    value_dim = a.ssm_v_heads * a.ssm_head_dim
    conv_dim = 2 * key_dim + value_dim
    arch = "qwen35moe" if a.experts else "qwen35"
    attention_keys(w, a, a.shared_ffn if a.experts else a.ffn, rope_dims=hd // 4)
    w.add_rope_freq_base(10_000_000.0)
    w.add_rope_dimension_sections([11, 11, 10, 0])
    delta_net_keys(w, a, arch)
    if a.mtp:
        w.add_nextn_predict_layers(1)

    t = lambda name, shape, ty=F16: add_tensor(w, name, shape, ty)
    add_embeddings(w, a.vocab, d, a.tied)

    attention = lambda b: gated_attention(t, b, a)
    ffn = lambda b: gated_shared_experts(t, b, a) if a.experts else gated_mlp(t, b, a)

    for i in range(a.layers):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", (d,), F32)
        t(b + "post_attention_norm.weight", (d,), F32)
        if (i + 1) % a.attn_interval == 0:
            attention(b)
        else:
            t(b + "attn_qkv.weight", (conv_dim, d))
            t(b + "attn_gate.weight", (value_dim, d))
            t(b + "ssm_conv1d.weight", (conv_dim, a.conv), F32)
            t(b + "ssm_dt.bias", (a.ssm_v_heads,), F32)
            t(b + "ssm_a", (a.ssm_v_heads,), F32)
            t(b + "ssm_beta.weight", (a.ssm_v_heads, d))
            t(b + "ssm_alpha.weight", (a.ssm_v_heads, d))
            t(b + "ssm_norm.weight", (a.ssm_head_dim,), F32)
            t(b + "ssm_out.weight", (d, value_dim))
        ffn(b)
    if a.mtp:
        b = f"blk.{a.layers}."
        t(b + "attn_norm.weight", (d,), F32)
        t(b + "post_attention_norm.weight", (d,), F32)
        attention(b)
        ffn(b)
        t(b + "nextn.eh_proj.weight", (d, 2 * d))
        t(b + "nextn.enorm.weight", (d,), F32)
        t(b + "nextn.hnorm.weight", (d,), F32)
        t(b + "nextn.shared_head_norm.weight", (d,), F32)


def kimilinear(w: GGUFWriter, a) -> None:
    d, heads = a.hidden, a.heads
    kda, mla = a.ssm_head_dim, set(int(x) for x in a.attn_layers.split(",") if x)
    inner = heads * kda
    nope, rope, v, lora = a.qk_nope, a.qk_rope, a.v_head, a.kv_lora
    arch = "kimi-linear"
    w.add_embedding_length(d)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(heads)
    w.add_head_count_kv([1 if i + 1 in mla else 0 for i in range(a.layers)])
    w.add_ssm_conv_kernel(a.conv)
    w.add_kda_head_dim(kda)
    w.add_kv_lora_rank(lora)
    w.add_rope_dimension_count(rope)
    w.add_key_length(lora + rope)
    w.add_key_length_mla(nope + rope)
    w.add_value_length_mla(v)
    w.add_expert_count(a.experts)
    w.add_expert_used_count(a.experts_used)
    w.add_expert_feed_forward_length(a.expert_ffn)
    w.add_expert_shared_count(a.shared_ffn // a.expert_ffn)
    w.add_leading_dense_block_count(a.dense_layers)
    w.add_expert_weights_scale(2.446)
    w.add_expert_gating_func(ExpertGatingFuncType.SIGMOID)

    t = lambda name, shape, ty=F16: add_tensor(w, name, shape, ty)
    add_embeddings(w, a.vocab, d, a.tied)
    for i in range(a.layers):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", (d,), F32)
        t(b + "ffn_norm.weight", (d,), F32)
        if i + 1 in mla:
            t(b + "attn_q.weight", (heads * (nope + rope), d))
            t(b + "attn_kv_a_mqa.weight", (lora + rope, d))
            t(b + "attn_kv_a_norm.weight", (lora,), F32)
            t(b + "attn_k_b.weight", (heads, lora, nope))
            t(b + "attn_v_b.weight", (heads, v, lora))
            t(b + "attn_output.weight", (d, heads * v))
        else:
            for x in "qkv":
                t(b + f"attn_{x}.weight", (inner, d))
                t(b + f"ssm_conv1d_{x}.weight", (1, inner, 1, a.conv), F32)
            t(b + "ssm_f_a.weight", (kda, d))
            t(b + "ssm_f_b.weight", (inner, kda))
            t(b + "ssm_beta.weight", (heads, d))
            t(b + "ssm_a", (1, 1, heads, 1), F32)
            t(b + "ssm_dt.bias", (inner,), F32)
            t(b + "ssm_g_a.weight", (kda, d))
            t(b + "ssm_g_b.weight", (inner, kda))
            t(b + "ssm_norm.weight", (kda,), F32)
            t(b + "attn_output.weight", (d, inner))
        if i < a.dense_layers:
            gated_mlp(t, b, a)
        else:
            t(b + "ffn_gate_inp.weight", (a.experts, d), F32)
            t(b + "ffn_gate_exps.weight", (a.experts, a.expert_ffn, d))
            t(b + "ffn_up_exps.weight", (a.experts, a.expert_ffn, d))
            t(b + "ffn_down_exps.weight", (a.experts, d, a.expert_ffn))
            t(b + "exp_probs_b.bias", (a.experts,), F32)
            t(b + "ffn_gate_shexp.weight", (a.shared_ffn, d))
            t(b + "ffn_up_shexp.weight", (a.shared_ffn, d))
            t(b + "ffn_down_shexp.weight", (d, a.shared_ffn))


def kimik3(w: GGUFWriter, a) -> None:
    d, heads = a.hidden, a.heads
    kda, mla = a.ssm_head_dim, set(int(x) for x in a.attn_layers.split(",") if x)
    inner = heads * kda
    nope, rope, v, lora, qr = a.qk_nope, a.qk_rope, a.v_head, a.kv_lora, a.q_lora
    w.add_embedding_length(d)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(heads)
    # latent attention served as MQA: one KV head in its layers, none in KDA's
    w.add_head_count_kv([1 if i + 1 in mla else 0 for i in range(a.layers)])
    w.add_ssm_conv_kernel(a.conv)
    w.add_kda_head_dim(kda)
    w.add_kda_gate_lower_bound(a.gate_lower_bound)
    w.add_q_lora_rank(qr)
    w.add_kv_lora_rank(lora)
    w.add_rope_dimension_count(rope)
    w.add_key_length(lora + rope)
    w.add_value_length(lora)
    w.add_key_length_mla(nope + rope)
    w.add_value_length_mla(v)
    w.add_expert_count(a.experts)
    w.add_expert_used_count(a.experts_used)
    w.add_expert_feed_forward_length(a.expert_ffn)
    w.add_expert_shared_count(a.shared_ffn // a.expert_ffn)
    w.add_leading_dense_block_count(a.dense_layers)
    w.add_expert_weights_scale(1.0)
    if not a.unnormalised:
        w.add_expert_weights_norm(True)
    w.add_expert_gating_func(ExpertGatingFuncType.SIGMOID)
    w.add_expert_latent_length(a.latent)
    w.add_activation_situ_beta(4.0)
    w.add_activation_situ_linear_beta(25.0)
    w.add_attn_res_block_size(a.res_block)

    m = a.matrix_type
    t = lambda name, shape, ty=m: add_tensor(w, name, shape, ty)
    t("token_embd.weight", (a.vocab, d))
    t("output_norm.weight", (d,), F32)
    t("output.weight", (a.vocab, d))
    t("output_res_score.weight", (d,), F32)
    for i in range(a.layers):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", (d,), F32)
        t(b + "ffn_norm.weight", (d,), F32)
        t(b + "attn_res_score.weight", (d,), F32)
        t(b + "ffn_res_score.weight", (d,), F32)
        if i + 1 in mla:
            t(b + "attn_q_a.weight", (qr, d))
            t(b + "attn_q_a_norm.weight", (qr,), F32)
            t(b + "attn_q_b.weight", (heads * (nope + rope), qr))
            t(b + "attn_kv_a_mqa.weight", (lora + rope, d))
            t(b + "attn_kv_a_norm.weight", (lora,), F32)
            t(b + "attn_k_b.weight", (heads, lora, nope))
            t(b + "attn_v_b.weight", (heads, v, lora))
            t(b + "attn_gate.weight", (heads * v, d))
            t(b + "attn_output.weight", (d, heads * v))
        else:
            for x in "qkv":
                t(b + f"attn_{x}.weight", (inner, d))
                t(b + f"ssm_conv1d_{x}.weight", (1, inner, 1, a.conv), F32)
            t(b + "ssm_f_a.weight", (kda, d))
            t(b + "ssm_f_b.weight", (inner, kda))
            t(b + "ssm_beta.weight", (heads, d))
            t(b + "ssm_a", (heads,), F32)
            t(b + "ssm_dt.bias", (inner,), F32)
            t(b + "ssm_g.weight", (inner, d))
            t(b + "ssm_norm.weight", (kda,), F32)
            t(b + "attn_output.weight", (d, inner))
        if i < a.dense_layers:
            gated_mlp(t, b, a)
        else:
            t(b + "ffn_gate_inp.weight", (a.experts, d), F32)
            t(b + "exp_probs_b.bias", (a.experts,), F32)
            t(b + "ffn_gate_exps.weight", (a.experts, a.expert_ffn, a.latent))
            t(b + "ffn_up_exps.weight", (a.experts, a.expert_ffn, a.latent))
            t(b + "ffn_down_exps.weight", (a.experts, a.latent, a.expert_ffn))
            t(b + "ffn_routed_down.weight", (a.latent, d))
            t(b + "ffn_routed_up.weight", (d, a.latent))
            t(b + "ffn_routed_norm.weight", (a.latent,), F32)
            t(b + "ffn_gate_shexp.weight", (a.shared_ffn, d))
            t(b + "ffn_up_shexp.weight", (a.shared_ffn, d))
            t(b + "ffn_down_shexp.weight", (d, a.shared_ffn))


def glm5next(w: GGUFWriter, a) -> None:
    d, heads = a.hidden, a.heads
    kda, mla = a.ssm_head_dim, set(int(x) for x in a.attn_layers.split(",") if x)
    shared = set(int(x) for x in a.shared_indexer_layers.split(",") if x)
    inner = heads * kda
    nope, v, lora, qr = a.qk_nope, a.v_head, a.kv_lora, a.q_lora
    ih, idim, hc = a.indexer_heads, a.indexer_dim, a.hc_mult
    mix = (2 + hc) * hc
    w.add_embedding_length(d)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(heads)
    # latent attention served as MQA: one KV head in its layers, none in KDA's
    w.add_head_count_kv([1 if i + 1 in mla else 0 for i in range(a.layers)])
    w.add_layer_norm_eps(1e-6)
    w.add_ssm_conv_kernel(a.conv)
    w.add_kda_head_dim(kda)
    w.add_kda_gate_lower_bound(a.gate_lower_bound)
    # nope-only latent attention, as the converter writes its keys
    w.add_q_lora_rank(qr)
    w.add_kv_lora_rank(lora)
    w.add_rope_dimension_count(0)
    w.add_key_length(lora)
    w.add_value_length(lora)
    w.add_key_length_mla(nope)
    w.add_value_length_mla(v)
    w.add_indexer_head_count(ih)
    w.add_indexer_key_length(idim)
    w.add_indexer_top_k(a.indexer_top_k)
    w.add_indexer_kpool(a.kpool)
    w.add_indexer_kpool_select_tail(True)
    w.add_indexer_types([i + 1 not in shared for i in range(a.layers)])
    w.add_hyper_connection_count(hc)
    w.add_hyper_connection_sinkhorn_iterations(20)
    w.add_hyper_connection_epsilon(1e-6)
    w.add_expert_count(a.experts)
    w.add_expert_used_count(a.experts_used)
    w.add_leading_dense_block_count(a.dense_layers)
    w.add_expert_feed_forward_length(a.expert_ffn)
    w.add_expert_shared_count(a.shared_ffn // a.expert_ffn)
    w.add_expert_weights_scale(2.5)
    w.add_expert_weights_norm(True)
    w.add_swiglu_clamp_exp([10.0] * a.layers)
    w.add_swiglu_clamp_shexp([10.0] * a.layers)

    m = a.matrix_type
    t = lambda name, shape, ty=m: add_tensor(w, name, shape, ty)
    t("token_embd.weight", (a.vocab, d))
    t("output_norm.weight", (d,), F32)
    t("output.weight", (a.vocab, d))
    for i in range(a.layers):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", (d,), F32)
        t(b + "ffn_norm.weight", (d,), F32)
        for x in ("attn", "ffn"):
            t(b + f"hc_{x}_fn.weight", (mix, hc * d), F32)
            t(b + f"hc_{x}_base.weight", (mix,), F32)
            t(b + f"hc_{x}_scale.weight", (3,), F32)
        if i + 1 in mla:
            t(b + "attn_q_a.weight", (qr, d))
            t(b + "attn_q_a_norm.weight", (qr,), F32)
            t(b + "attn_q_b.weight", (heads * nope, qr))
            t(b + "attn_kv_a_mqa.weight", (lora, d))
            t(b + "attn_kv_a_norm.weight", (lora,), F32)
            t(b + "attn_k_b.weight", (heads, lora, nope))
            t(b + "attn_v_b.weight", (heads, v, lora))
            t(b + "attn_output.weight", (d, heads * v))
            if i + 1 not in shared:
                t(b + "indexer.k_norm.weight", (idim,), F32)
                t(b + "indexer.k_norm.bias", (idim,), F32)
                t(b + "indexer.proj.weight", (ih, d))
                t(b + "indexer.attn_k.weight", (idim, d))
                t(b + "indexer.attn_q_b.weight", (ih * idim, qr))
                t(b + "indexer_compressor_gate.weight", (idim, d), F32)
                t(b + "indexer_compressor_ape.weight", (a.kpool, idim), F32)
        else:
            for x in "qkv":
                t(b + f"attn_{x}.weight", (inner, d))
                t(b + f"ssm_conv1d_{x}.weight", (1, inner, 1, a.conv), F32)
            t(b + "ssm_f_a.weight", (kda, d))
            t(b + "ssm_f_b.weight", (inner, kda))
            t(b + "ssm_beta.weight", (heads, d))
            t(b + "ssm_a", (heads,), F32)
            t(b + "ssm_dt.bias", (inner,), F32)
            t(b + "ssm_g_a.weight", (kda, d))
            t(b + "ssm_g_b.weight", (inner, kda))
            t(b + "ssm_norm.weight", (kda,), F32)
            t(b + "attn_output.weight", (d, inner))
        if i < a.dense_layers:
            gated_mlp(t, b, a)
        else:
            t(b + "ffn_gate_inp.weight", (a.experts, d), F32)
            t(b + "exp_probs_b.bias", (a.experts,), F32)
            t(b + "ffn_gate_exps.weight", (a.experts, a.expert_ffn, d))
            t(b + "ffn_up_exps.weight", (a.experts, a.expert_ffn, d))
            t(b + "ffn_down_exps.weight", (a.experts, d, a.expert_ffn))
            t(b + "ffn_gate_shexp.weight", (a.shared_ffn, d))
            t(b + "ffn_up_shexp.weight", (a.shared_ffn, d))
            t(b + "ffn_down_shexp.weight", (d, a.shared_ffn))


def mamba(w: GGUFWriter, a) -> None:
    d = a.hidden
    inner = a.expand * d
    dt_rank = (d + 15) // 16
    w.add_embedding_length(d)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_ssm_conv_kernel(a.conv)
    w.add_ssm_inner_size(inner)
    w.add_ssm_state_size(a.ssm_state)
    w.add_ssm_time_step_rank(dt_rank)
    t = lambda name, shape, ty=F16: add_tensor(w, name, shape, ty)
    add_embeddings(w, a.vocab, d, a.tied)
    for i in range(a.layers):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", (d,), F32)
        t(b + "ssm_in.weight", (2 * inner, d))
        t(b + "ssm_conv1d.weight", (inner, a.conv), F32)
        t(b + "ssm_conv1d.bias", (inner,), F32)
        t(b + "ssm_x.weight", (dt_rank + 2 * a.ssm_state, inner))
        t(b + "ssm_dt.weight", (inner, dt_rank))
        t(b + "ssm_dt.bias", (inner,), F32)
        t(b + "ssm_a", (inner, a.ssm_state), F32)
        t(b + "ssm_d", (inner,), F32)
        t(b + "ssm_out.weight", (d, inner))


def mamba2(w: GGUFWriter, a) -> None:
    d = a.hidden
    w.add_embedding_length(d)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    ssm_keys(w, a)
    t = lambda name, shape, ty=F16: add_tensor(w, name, shape, ty)
    add_embeddings(w, a.vocab, d, a.tied)
    for i in range(a.layers):
        t(f"blk.{i}.attn_norm.weight", (d,), F32)
        mamba2_mixer(t, f"blk.{i}.", a)


def ssm_inner(a) -> int:
    """The mixer's inner width: --ssm-inner, else --expand × hidden."""
    return a.ssm_inner or a.expand * a.hidden


def mamba2_mixer(t, b: str, a) -> None:
    d = a.hidden
    inner = ssm_inner(a)
    heads = inner // a.ssm_head_dim
    conv_dim = inner + 2 * a.ssm_groups * a.ssm_state
    t(b + "ssm_in.weight", (2 * inner + 2 * a.ssm_groups * a.ssm_state + heads, d))
    t(b + "ssm_conv1d.weight", (conv_dim, a.conv), F32)
    t(b + "ssm_conv1d.bias", (conv_dim,), F32)
    t(b + "ssm_dt.bias", (heads,), F32)
    t(b + "ssm_a", (heads, 1), F32)
    t(b + "ssm_d", (heads, 1), F32)
    if not getattr(a, "no_ssm_norm", False):
        t(b + "ssm_norm.weight", (a.ssm_groups, inner // a.ssm_groups), F32)
    t(b + "ssm_out.weight", (d, inner))


def ssm_keys(w: GGUFWriter, a) -> None:
    inner = ssm_inner(a)
    w.add_ssm_conv_kernel(a.conv)
    w.add_ssm_inner_size(inner)
    w.add_ssm_state_size(a.ssm_state)
    w.add_ssm_time_step_rank(inner // a.ssm_head_dim)
    w.add_ssm_group_count(a.ssm_groups)


def plain_attention(t, b: str, a) -> None:
    """Q, K, V and output projections without biases (Granite-4.0-H, Jamba)."""
    d, hd = a.hidden, a.head_dim
    t(b + "attn_q.weight", (a.heads * hd, d))
    t(b + "attn_k.weight", (a.kv_heads * hd, d))
    t(b + "attn_v.weight", (a.kv_heads * hd, d))
    t(b + "attn_output.weight", (d, a.heads * hd))


def gated_mlp(t, b: str, a) -> None:
    """A dense gated MLP of width --ffn (its norm is the caller's: names differ)."""
    d = a.hidden
    t(b + "ffn_gate.weight", (a.ffn, d))
    t(b + "ffn_up.weight", (a.ffn, d))
    t(b + "ffn_down.weight", (d, a.ffn))


def hybrid_keys(w: GGUFWriter, a, attn: set) -> None:
    """Width, MLP and heads, with KV heads only in the attention layers (0 marks recurrent)."""
    w.add_embedding_length(a.hidden)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv([a.kv_heads if i in attn else 0 for i in range(a.layers)])


def granitehybrid(w: GGUFWriter, a) -> None:
    d, hd = a.hidden, a.head_dim
    attn = {int(i) for i in a.attn_layers.split(",")}
    hybrid_keys(w, a, attn)
    w.add_key_length(hd)
    w.add_value_length(hd)
    ssm_keys(w, a)
    if a.granite_scales:
        # Granite-4.0-H's published multipliers (config.json: embedding_multiplier 12,
        # residual_multiplier 0.22, logits_scaling 6, attention_multiplier 1/128).
        w.add_float32("granitehybrid.embedding_scale", 12.0)
        w.add_float32("granitehybrid.residual_scale", 0.22)
        w.add_float32("granitehybrid.logit_scale", 6.0)
        w.add_float32("granitehybrid.attention.scale", 0.0078125)
    if a.nope:
        # position_embedding_type "nope": the converter turns RoPE off this way.
        w.add_bool("granitehybrid.rope.scaling.finetuned", False)
    if a.experts:
        w.add_expert_count(a.experts)
        w.add_expert_used_count(a.experts_used)
        w.add_expert_feed_forward_length(a.expert_ffn)
        w.add_expert_shared_feed_forward_length(a.shared_ffn)
    t = lambda name, shape, ty=F16: add_tensor(w, name, shape, ty)
    add_embeddings(w, a.vocab, d, a.tied)
    for i in range(a.layers):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", (d,), F32)
        if i in attn:
            plain_attention(t, b, a)
        else:
            mamba2_mixer(t, b, a)
        t(b + "ffn_norm.weight", (d,), F32)
        if a.experts:
            n, f, sf = a.experts, a.expert_ffn, a.shared_ffn
            t(b + "ffn_gate_inp.weight", (n, d), F32)
            t(b + "ffn_gate_exps.weight", (n, f, d))
            t(b + "ffn_up_exps.weight", (n, f, d))
            t(b + "ffn_down_exps.weight", (n, d, f))
            if sf:
                t(b + "ffn_gate_shexp.weight", (sf, d))
                t(b + "ffn_up_shexp.weight", (sf, d))
                t(b + "ffn_down_shexp.weight", (d, sf))
        else:
            gated_mlp(t, b, a)


def jamba(w: GGUFWriter, a) -> None:
    d, hd = a.hidden, a.head_dim
    inner = a.expand * d
    attn = {int(i) for i in a.attn_layers.split(",")}
    moe = {int(i) for i in a.moe_layers.split(",")}
    hybrid_keys(w, a, attn)
    w.add_expert_count(a.experts)
    w.add_expert_used_count(a.experts_used)
    w.add_ssm_conv_kernel(a.conv)
    w.add_ssm_inner_size(inner)
    w.add_ssm_state_size(a.ssm_state)
    w.add_ssm_time_step_rank(a.dt_rank)
    t = lambda name, shape, ty=F16: add_tensor(w, name, shape, ty)
    add_embeddings(w, a.vocab, d, a.tied)
    for i in range(a.layers):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", (d,), F32)
        if i in attn:
            plain_attention(t, b, a)
        else:
            t(b + "ssm_in.weight", (2 * inner, d))
            t(b + "ssm_conv1d.weight", (inner, a.conv), F32)
            t(b + "ssm_conv1d.bias", (inner,), F32)
            t(b + "ssm_x.weight", (a.dt_rank + 2 * a.ssm_state, inner))
            t(b + "ssm_dt_norm.weight", (a.dt_rank,), F32)
            t(b + "ssm_dt.weight", (inner, a.dt_rank))
            t(b + "ssm_dt.bias", (inner,), F32)
            t(b + "ssm_b_norm.weight", (a.ssm_state,), F32)
            t(b + "ssm_c_norm.weight", (a.ssm_state,), F32)
            t(b + "ssm_a", (inner, a.ssm_state), F32)
            t(b + "ssm_d", (inner,), F32)
            t(b + "ssm_out.weight", (d, inner))
        t(b + "ffn_norm.weight", (d,), F32)
        if i in moe:
            t(b + "ffn_gate_inp.weight", (a.experts, d), F32)
            t(b + "ffn_gate_exps.weight", (a.experts, a.ffn, d))
            t(b + "ffn_up_exps.weight", (a.experts, a.ffn, d))
            t(b + "ffn_down_exps.weight", (a.experts, d, a.ffn))
        else:
            gated_mlp(t, b, a)


def falconh1(w: GGUFWriter, a) -> None:
    d, hd = a.hidden, a.head_dim
    attention_keys(w, a, a.ffn, rope_dims=hd)
    ssm_keys(w, a)
    t = lambda name, shape, ty=a.matrix_type: add_tensor(w, name, shape, ty)
    add_embeddings(w, a.vocab, d, a.tied)
    for i in range(a.layers):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", (d,), F32)
        mamba2_mixer(t, b, a)
        plain_attention(t, b, a)
        # llama.cpp looks this one up without the ".weight" suffix, as its converter writes it.
        t(b + "ffn_norm", (d,), F32)
        gated_mlp(t, b, a)


def nemotronh(w: GGUFWriter, a) -> None:
    d, hd = a.hidden, a.head_dim
    pattern = a.pattern
    if len(pattern) != a.layers or set(pattern) - set("M*-E"):
        raise SystemExit("--pattern: one of M, * - or E per layer")
    if "E" in pattern and "-" in pattern:
        raise SystemExit("--pattern: E (nemotron_h_moe) and - (nemotron_h) do not mix")
    w.add_embedding_length(d)
    w.add_layer_norm_eps(1e-5)
    # Per layer: KV heads only in attention layers, a feed-forward width only in MLP and expert
    # layers (both 0 marks a Mamba layer, llama.cpp's rule).
    ffn = a.expert_ffn if "E" in pattern else a.ffn
    w.add_feed_forward_length([ffn if c in "-E" else 0 for c in pattern])
    if "E" in pattern:
        w.add_expert_count(a.experts)
        w.add_expert_used_count(a.experts_used)
        w.add_expert_feed_forward_length(a.expert_ffn)
        w.add_expert_shared_feed_forward_length(a.shared_ffn)
        w.add_expert_weights_scale(2.5)
        w.add_expert_weights_norm(True)
    w.add_head_count(a.heads)
    w.add_head_count_kv([a.kv_heads if c == "*" else 0 for c in pattern])
    w.add_key_length(hd)
    w.add_value_length(hd)
    ssm_keys(w, a)
    t = lambda name, shape, ty=a.matrix_type: add_tensor(w, name, shape, ty)
    add_embeddings(w, a.vocab, d, a.tied)
    for i, c in enumerate(pattern):
        b = f"blk.{i}."
        t(b + "attn_norm.weight", (d,), F32)
        if c == "M":
            mamba2_mixer(t, b, a)
        elif c == "*":
            plain_attention(t, b, a)
        elif c == "E":
            # Squared-ReLU experts without a gate, a sigmoid router with a correction bias,
            # and one shared expert.
            t(b + "ffn_gate_inp.weight", (a.experts, d), F32)
            t(b + "exp_probs_b.bias", (a.experts,), F32)
            t(b + "ffn_up_exps.weight", (a.experts, a.expert_ffn, d))
            t(b + "ffn_down_exps.weight", (a.experts, d, a.expert_ffn))
            t(b + "ffn_up_shexp.weight", (a.shared_ffn, d))
            t(b + "ffn_down_shexp.weight", (d, a.shared_ffn))
        else:
            t(b + "ffn_up.weight", (a.ffn, d))
            t(b + "ffn_down.weight", (d, a.ffn))


def rwkv_common(w: GGUFWriter, a) -> None:
    """What both RWKV versions share: LayerNorms with biases everywhere, a norm after the
    embedding, a WKV head size, two token shifts per layer (time and channel mix)."""
    d = a.hidden
    w.add_embedding_length(d)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(0)
    w.add_layer_norm_eps(1e-5)
    w.add_wkv_head_size(a.head_size)
    w.add_token_shift_count(2)
    t = lambda name, shape, ty=F16: add_tensor(w, name, shape, ty)
    t("token_embd.weight", (a.vocab, d))
    t("token_embd_norm.weight", (d,), F32)
    t("token_embd_norm.bias", (d,), F32)
    t("output_norm.weight", (d,), F32)
    t("output_norm.bias", (d,), F32)
    t("output.weight", (a.vocab, d))


def rwkv_norms(t, b: str, d: int) -> None:
    """A layer's LayerNorms (weight and bias): before the time mix, before the channel mix, and
    the time mix's group norm."""
    for norm in ("attn_norm", "attn_norm_2", "time_mix_ln"):
        t(b + norm + ".weight", (d,), F32)
        t(b + norm + ".bias", (d,), F32)


def rwkv6(w: GGUFWriter, a) -> None:
    d = a.hidden
    rwkv_common(w, a)
    w.add_rescale_every_n_layers(6)
    w.add_time_mix_extra_dim(a.mix_rank)
    w.add_time_decay_extra_dim(a.decay_rank)
    t = lambda name, shape, ty=F16: add_tensor(w, name, shape, ty)
    for i in range(a.layers):
        b = f"blk.{i}."
        rwkv_norms(t, b, d)
        t(b + "time_mix_w1.weight", (a.mix_rank * 5, d), F32)
        t(b + "time_mix_w2.weight", (5, d, a.mix_rank), F32)
        t(b + "time_mix_lerp_x.weight", (1, 1, d), F32)
        t(b + "time_mix_lerp_fused.weight", (5, 1, 1, d), F32)
        t(b + "time_mix_first.weight", (d // a.head_size, a.head_size), F32)
        t(b + "time_mix_decay.weight", (d,), F32)
        t(b + "time_mix_decay_w1.weight", (a.decay_rank, d), F32)
        t(b + "time_mix_decay_w2.weight", (d, a.decay_rank), F32)
        for m in ("key", "value", "receptance", "gate"):
            t(b + f"time_mix_{m}.weight", (d, d))
        t(b + "time_mix_output.weight", (d, d))
        t(b + "channel_mix_lerp_k.weight", (1, 1, d), F32)
        t(b + "channel_mix_lerp_r.weight", (1, 1, d), F32)
        t(b + "channel_mix_key.weight", (a.ffn, d))
        t(b + "channel_mix_value.weight", (d, a.ffn))
        t(b + "channel_mix_receptance.weight", (d, d))


def rwkv7(w: GGUFWriter, a) -> None:
    d = a.hidden
    rwkv_common(w, a)
    w.add_decay_lora_rank(a.decay_rank)
    w.add_iclr_lora_rank(a.iclr_rank)
    w.add_value_residual_mix_lora_rank(a.vres_rank)
    w.add_gate_lora_rank(a.gate_rank)
    t = lambda name, shape, ty=F16: add_tensor(w, name, shape, ty)
    for i in range(a.layers):
        b = f"blk.{i}."
        rwkv_norms(t, b, d)
        # Layer 0 has no value-residual mix (its value is the one the others mix with); the
        # converter still writes one of the ICLR rank, which llama.cpp loads and never uses.
        vres = a.iclr_rank if i == 0 else a.vres_rank
        for lora, rank in (("w", a.decay_rank), ("a", a.iclr_rank), ("v", vres)):
            t(b + f"time_mix_{lora}0.weight", (d,), F32)
            t(b + f"time_mix_{lora}1.weight", (rank, d))
            t(b + f"time_mix_{lora}2.weight", (d, rank))
        t(b + "time_mix_g1.weight", (a.gate_rank, d))
        t(b + "time_mix_g2.weight", (d, a.gate_rank))
        t(b + "time_mix_lerp_fused.weight", (6, 1, 1, d), F32)
        for v in ("k_k", "k_a", "r_k"):
            t(b + f"time_mix_{v}.weight", (d,), F32)
        for m in ("key", "value", "receptance"):
            t(b + f"time_mix_{m}.weight", (d, d))
        t(b + "time_mix_output.weight", (d, d))
        t(b + "channel_mix_lerp_k.weight", (1, 1, d), F32)
        t(b + "channel_mix_key.weight", (a.ffn, d))
        t(b + "channel_mix_value.weight", (d, a.ffn))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("arch", choices=["qwen3next", "qwen35", "kimilinear", "kimik3", "glm5next", "mamba", "mamba2", "granitehybrid", "jamba",
                                    "nemotronh", "falconh1", "rwkv6", "rwkv7"])
    p.add_argument("--head-size", type=int, default=64, help="rwkv6, rwkv7: the WKV head size")
    p.add_argument("--mix-rank", type=int, default=32, help="rwkv6: time_mix_extra_dim")
    p.add_argument("--decay-rank", type=int, default=64,
                   help="rwkv6: time_decay_extra_dim; rwkv7: decay_lora_rank")
    p.add_argument("--iclr-rank", type=int, default=64, help="rwkv7: iclr_lora_rank")
    p.add_argument("--vres-rank", type=int, default=32,
                   help="rwkv7: value_residual_mix_lora_rank")
    p.add_argument("--gate-rank", type=int, default=128, help="rwkv7: gate_lora_rank")
    p.add_argument("--no-ssm-norm", action="store_true", help="falconh1: no gated norm")
    p.add_argument("--split-qkvz", action="store_true",
                   help="qwen3next: attn_qkv and attn_gate instead of one ssm_in")
    p.add_argument("--mtp", action="store_true",
                   help="qwen35: one multi-token-prediction block after the layers")
    p.add_argument("--pattern", default="",
                   help="nemotronh: M, * or - per layer (E, experts: nemotron_h_moe)")
    p.add_argument("--ssm-inner", type=int, default=0,
                   help="the mixer's inner width when not --expand × hidden (Nemotron-H)")
    p.add_argument("--matrix-type", default="f16", choices=["f16", "q8_0", "q5_0"],
                   help="nemotronh, falconh1, kimik3: the matrices' type (q5_0 keeps a large shape's file small, and the CPU backend leaves it unrepacked)")
    p.add_argument("--moe-layers", default="", help="jamba: layers with experts, e.g. 1,3,5,7")
    p.add_argument("--dt-rank", type=int, default=0)
    p.add_argument("--dense-layers", type=int, default=1, help="kimilinear: leading dense layers")
    p.add_argument("--kv-lora", type=int, default=512, help="kimilinear: kv_lora_rank")
    p.add_argument("--qk-nope", type=int, default=128, help="kimilinear: qk_nope_head_dim")
    p.add_argument("--qk-rope", type=int, default=64, help="kimilinear: qk_rope_head_dim")
    p.add_argument("--v-head", type=int, default=128, help="kimilinear: v_head_dim")
    p.add_argument("--q-lora", type=int, default=1536, help="kimik3: q_lora_rank")
    p.add_argument("--latent", type=int, default=3584, help="kimik3: routed_expert_hidden_size")
    p.add_argument("--res-block", type=int, default=12, help="kimik3: attn_res_block_size")
    p.add_argument("--unnormalised", action="store_true",
                   help="kimik3: no expert_weights_norm (moe_renormalize false)")
    p.add_argument("--shared-indexer-layers", default="",
                   help="glm5next: latent-attention layers (1-indexed) that reuse the previous full indexer's selection")
    p.add_argument("--indexer-heads", type=int, default=32, help="glm5next: index_n_heads")
    p.add_argument("--indexer-dim", type=int, default=128, help="glm5next: index_head_dim")
    p.add_argument("--indexer-top-k", type=int, default=2048, help="glm5next: index_topk")
    p.add_argument("--kpool", type=int, default=16, help="glm5next: index_kpool")
    p.add_argument("--hc-mult", type=int, default=4, help="glm5next: hc_mult (llama.cpp takes only 4)")
    p.add_argument("--gate-lower-bound", type=float, default=-5.0,
                   help="kimik3: linear_attn_config.gate_lower_bound")
    p.add_argument("out")
    p.add_argument("--name", default="shape")
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--heads", type=int, default=0)
    p.add_argument("--kv-heads", type=int, default=0)
    p.add_argument("--head-dim", type=int, default=0)
    p.add_argument("--experts", type=int, default=0)
    p.add_argument("--experts-used", type=int, default=0)
    p.add_argument("--expert-ffn", type=int, default=0)
    p.add_argument("--shared-ffn", type=int, default=0)
    p.add_argument("--attn-interval", type=int, default=4)
    p.add_argument("--attn-layers", default="", help="granitehybrid: attention layers, e.g. 3,7")
    p.add_argument("--granite-scales", action="store_true",
                   help="granitehybrid: Granite-4.0-H's embedding, residual, logit and attention scales")
    p.add_argument("--nope", action="store_true",
                   help="granitehybrid: no RoPE (rope.scaling.finetuned false)")
    p.add_argument("--ffn", type=int, default=0)
    p.add_argument("--conv", type=int, default=4)
    p.add_argument("--expand", type=int, default=2)
    p.add_argument("--ssm-k-heads", type=int, default=0)
    p.add_argument("--ssm-v-heads", type=int, default=0)
    p.add_argument("--ssm-head-dim", type=int, default=0)
    p.add_argument("--ssm-state", type=int, default=0)
    p.add_argument("--ssm-groups", type=int, default=1)
    p.add_argument("--tied", action="store_true")
    a = p.parse_args()
    a.matrix_type = {"f16": F16, "q8_0": GGMLQuantizationType.Q8_0,
                     "q5_0": GGMLQuantizationType.Q5_0}[a.matrix_type]

    names = {"nemotronh": "nemotron_h_moe" if "E" in a.pattern else "nemotron_h",
             "falconh1": "falcon-h1", "kimilinear": "kimi-linear", "kimik3": "kimi-k3", "glm5next": "glm5-next", "qwen35": "qwen35moe" if a.experts else "qwen35"}
    w = GGUFWriter(a.out, names.get(a.arch, a.arch))
    w.add_name(a.name)
    w.add_context_length(1 << 18)
    w.add_block_count(a.layers + (1 if a.mtp else 0))
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(a.vocab)
    w.add_file_type(1)
    add_vocab(w, a.vocab)
    {"qwen3next": qwen3next, "qwen35": qwen35, "kimilinear": kimilinear, "kimik3": kimik3, "glm5next": glm5next, "mamba": mamba, "mamba2": mamba2, "granitehybrid": granitehybrid,
     "jamba": jamba, "nemotronh": nemotronh, "falconh1": falconh1, "rwkv6": rwkv6,
     "rwkv7": rwkv7}[a.arch](w, a)
    finish_sparse(w, a.out)


if __name__ == "__main__":
    main()
