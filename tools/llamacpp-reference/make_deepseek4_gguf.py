#!/usr/bin/env python3
"""Writes a DeepSeek-V4 GGUF (llama.cpp's `deepseek4` architecture) with a published model's
dimensions and no weight data (a sparse file), as conversion/deepseek.py (DeepseekV4Model)
names its keys and tensors: latent-query attention over one shared 512-wide K=V head with
learned sinks, a grouped low-rank output (attn_output_a/b), hyper-connections (hc_mult
residual streams mixed by hc_attn_*/hc_ffn_* before and after each block, output_hc_* before the
output), per-layer KV compression (`--ratios`: 0 none, 4 CSA with its lightning indexer, 128
HCA), hash-routed experts (ffn_gate_tid2eid, I32) in the first `--hash-layers` layers and
sqrt-softplus routed ones with a correction bias after, and one shared expert.

Matrices are `--matrix-type` (q5_0 by default: the CPU backend does not repack it, and it keeps
a 6-layer V4-Flash shape to about 2 GiB of sparse file), vectors and the hyper-connection
mixers f32, as the checkpoint stores them.

usage: make_deepseek4_gguf.py OUT.gguf --hidden 4096 --layers 6 --heads 64 --head-dim 512
           --vocab 129280 --q-lora 1024 --o-lora 1024 --o-groups 8 --experts 8
           --experts-used 6 --expert-ffn 2048 --ratios 0,0,4,128,4,128 --hash-layers 3
"""
import argparse

from gguf import GGMLQuantizationType, GGUFWriter

from sparse_gguf import add_tensor, add_vocab, finish_sparse

F32, I32 = GGMLQuantizationType.F32, GGMLQuantizationType.I32


def keys(w: GGUFWriter, a, ratios: list) -> None:
    k = "deepseek4"
    w.add_context_length(1 << 20)
    w.add_block_count(a.layers)
    w.add_embedding_length(a.hidden)
    w.add_feed_forward_length(a.expert_ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(1)
    w.add_key_length(a.head_dim)
    w.add_value_length(a.head_dim)
    w.add_rope_dimension_count(a.rope_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(a.vocab)
    w.add_file_type(1)
    w.add_q_lora_rank(a.q_lora)
    w.add_sliding_window(a.window)
    w.add_expert_count(a.experts)
    w.add_expert_used_count(a.experts_used)
    w.add_expert_feed_forward_length(a.expert_ffn)
    w.add_expert_shared_count(1)
    w.add_expert_weights_scale(1.5)
    w.add_expert_weights_norm(True)
    # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS, which its loader requires.
    w.add_uint32(f"{k}.expert_gating_func", 4)
    w.add_swiglu_clamp_exp([10.0] * a.layers)
    w.add_swiglu_clamp_shexp([10.0] * a.layers)
    w.add_indexer_head_count(a.indexer_heads)
    w.add_indexer_key_length(a.indexer_dim)
    w.add_indexer_top_k(a.indexer_top_k)
    w.add_attention_output_group_count(a.o_groups)
    w.add_attention_output_lora_rank(a.o_lora)
    w.add_attention_compress_ratios(ratios)
    w.add_attention_compress_rope_freq_base(160000.0)
    w.add_hyper_connection_count(a.hc)
    w.add_hyper_connection_sinkhorn_iterations(20)
    w.add_hyper_connection_epsilon(1e-6)
    w.add_hash_layer_count(a.hash_layers)
    w.add_embedding_length_out(a.hidden * a.hc)


def layer(t, a, i: int, ratio: int, mat) -> None:
    b, d, hd, hc = f"blk.{i}.", a.hidden, a.head_dim, a.hc
    mix = (2 + hc) * hc
    t(b + "attn_norm.weight", (d,), F32)
    t(b + "attn_sinks.weight", (a.heads,), F32)
    t(b + "attn_q_a.weight", (a.q_lora, d), mat)
    t(b + "attn_q_a_norm.weight", (a.q_lora,), F32)
    t(b + "attn_q_b.weight", (a.heads * hd, a.q_lora), mat)
    t(b + "attn_kv.weight", (hd, d), mat)
    t(b + "attn_kv_a_norm.weight", (hd,), F32)
    # As the file holds it: (o_lora_rank * o_groups) rows of one group's heads.
    t(b + "attn_output_a.weight", (a.o_lora * a.o_groups, a.heads * hd // a.o_groups), mat)
    t(b + "attn_output_b.weight", (d, a.o_groups * a.o_lora), mat)
    for s in ("attn", "ffn"):
        t(b + f"hc_{s}_fn.weight", (mix, hc * d), F32)
        t(b + f"hc_{s}_base.weight", (mix,), F32)
        t(b + f"hc_{s}_scale.weight", (3,), F32)
    if ratio:
        c = 2 if ratio == 4 else 1
        t(b + "attn_compressor_kv.weight", (c * hd, d), mat)
        t(b + "attn_compressor_gate.weight", (c * hd, d), mat)
        t(b + "attn_compressor_ape.weight", (ratio, c * hd), F32)
        t(b + "attn_compressor_norm.weight", (hd,), F32)
        if ratio == 4:
            di = a.indexer_dim
            t(b + "indexer.proj.weight", (a.indexer_heads, d), mat)
            t(b + "indexer.attn_q_b.weight", (a.indexer_heads * di, a.q_lora), mat)
            t(b + "indexer_compressor_kv.weight", (2 * di, d), mat)
            t(b + "indexer_compressor_gate.weight", (2 * di, d), mat)
            t(b + "indexer_compressor_ape.weight", (ratio, 2 * di), F32)
            t(b + "indexer_compressor_norm.weight", (di,), F32)
    t(b + "ffn_gate_inp.weight", (a.experts, d), F32)
    if i < a.hash_layers:
        t(b + "ffn_gate_tid2eid.weight", (a.vocab, a.experts_used), I32)
    else:
        t(b + "exp_probs_b.bias", (a.experts,), F32)
    t(b + "ffn_norm.weight", (d,), F32)
    e, f = a.experts, a.expert_ffn
    t(b + "ffn_gate_exps.weight", (e, f, d), mat)
    t(b + "ffn_up_exps.weight", (e, f, d), mat)
    t(b + "ffn_down_exps.weight", (e, d, f), mat)
    t(b + "ffn_gate_shexp.weight", (f, d), mat)
    t(b + "ffn_up_shexp.weight", (f, d), mat)
    t(b + "ffn_down_shexp.weight", (d, f), mat)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--name", default="DeepSeek-V4-shape")
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--head-dim", type=int, default=512)
    p.add_argument("--rope-dim", type=int, default=64)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--q-lora", type=int, default=1024)
    p.add_argument("--o-lora", type=int, default=1024)
    p.add_argument("--o-groups", type=int, default=8)
    p.add_argument("--window", type=int, default=128)
    p.add_argument("--experts", type=int, required=True)
    p.add_argument("--experts-used", type=int, required=True)
    p.add_argument("--expert-ffn", type=int, required=True)
    p.add_argument("--ratios", required=True, help="compress_ratios, one a layer: 0, 4 or 128")
    p.add_argument("--hash-layers", type=int, default=3)
    p.add_argument("--hc", type=int, default=4, help="hc_mult")
    p.add_argument("--indexer-heads", type=int, default=64)
    p.add_argument("--indexer-dim", type=int, default=128)
    p.add_argument("--indexer-top-k", type=int, default=512)
    p.add_argument("--matrix-type", default="q5_0")
    a = p.parse_args()
    ratios = [int(r) for r in a.ratios.split(",")]
    assert len(ratios) == a.layers
    mat = GGMLQuantizationType[a.matrix_type.upper()]

    w = GGUFWriter(a.out, "deepseek4")
    w.add_name(a.name)
    keys(w, a, ratios)
    add_vocab(w, a.vocab)
    t = lambda name, shape, ty: add_tensor(w, name, shape, ty)
    d = a.hidden
    t("token_embd.weight", (a.vocab, d), mat)
    t("output_norm.weight", (d,), F32)
    t("output.weight", (a.vocab, d), mat)
    t("output_hc_fn.weight", (a.hc, a.hc * d), F32)
    t("output_hc_base.weight", (a.hc,), F32)
    t("output_hc_scale.weight", (1,), F32)
    for i in range(a.layers):
        layer(t, a, i, ratios[i], mat)
    finish_sparse(w, a.out)


if __name__ == "__main__":
    main()
