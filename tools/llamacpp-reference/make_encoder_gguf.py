#!/usr/bin/env python3
"""Writes a GGUF of an encoder llama-server serves for embeddings or reranking, with a
published model's dimensions and no weight data (a sparse file), like make_gguf.py.

  bert        BERT (BGE, MiniLM, E5, bge-reranker as XLM-RoBERTa): learned positions, token
              types, biased LayerNorms after attention and after the MLP, biased q/k/v and
              output, a biased GELU MLP.
  nomic-bert  nomic-embed-text: RoPE instead of learned positions, one fused q/k/v, a SwiGLU MLP
              without biases.
  jina-bert-v2 jina-embeddings-v2 / jina-reranker-v1: ALiBi (no positions), biased q/k/v and
              output, a GEGLU MLP whose down projection has a bias: the gate apart
              (--ffn-kind gate, current conversions) or inside ffn_up (--ffn-kind fused, older
              ones), or a plain GELU one (--ffn-kind plain); --qk-norm adds LayerNorms on Q and
              K, --norm-2 a second attention norm. A rank head is jina's single-output cls.

--pooling is the model's own pooling type (none, mean, cls, last, rank); rank adds a
classification head (--cls-out outputs, with a dense layer before it unless --no-cls-dense).
Vectors are f32, matrices f16.

usage: make_encoder_gguf.py bert OUT.gguf --hidden 768 --layers 12 --heads 12 --ffn 3072
           --vocab 30522 --positions 512 --pooling cls
"""
import argparse

from gguf import GGMLQuantizationType, GGUFWriter, PoolingType

from sparse_gguf import add_tensor, add_vocab, finish_sparse

F16, F32 = GGMLQuantizationType.F16, GGMLQuantizationType.F32

POOLING = {"none": PoolingType.NONE, "mean": PoolingType.MEAN, "cls": PoolingType.CLS,
           "last": PoolingType.LAST, "rank": PoolingType.RANK}


def jina_layer(t, b: str, a) -> None:
    d, f = a.hidden, a.ffn
    for n in ("q", "k", "v", "output"):
        t(b + f"attn_{n}.weight", (d, d))
        t(b + f"attn_{n}.bias", (d,), F32)
    names = ["attn_output_norm", "layer_output_norm"]
    names += ["attn_q_norm", "attn_k_norm"] if a.qk_norm else []
    names += ["attn_norm_2"] if a.norm_2 else []
    for n in names:
        t(b + f"{n}.weight", (d,), F32)
        t(b + f"{n}.bias", (d,), F32)
    t(b + "ffn_up.weight", (2 * f if a.ffn_kind == "fused" else f, d))
    if a.ffn_kind == "gate":
        t(b + "ffn_gate.weight", (f, d))
    t(b + "ffn_down.weight", (d, f))
    t(b + "ffn_down.bias", (d,), F32)


def layer(t, b: str, a) -> None:
    d, f = a.hidden, a.ffn
    if a.arch == "jina-bert-v2":
        jina_layer(t, b, a)
        return
    if a.arch == "nomic-bert":
        t(b + "attn_qkv.weight", (3 * d, d))
    else:
        for n in ("q", "k", "v"):
            t(b + f"attn_{n}.weight", (d, d))
            t(b + f"attn_{n}.bias", (d,), F32)
    t(b + "attn_output.weight", (d, d))
    if a.arch == "bert":
        t(b + "attn_output.bias", (d,), F32)
    t(b + "attn_output_norm.weight", (d,), F32)
    t(b + "attn_output_norm.bias", (d,), F32)
    t(b + "ffn_up.weight", (f, d))
    t(b + "ffn_down.weight", (d, f))
    if a.arch == "bert":
        t(b + "ffn_up.bias", (f,), F32)
        t(b + "ffn_down.bias", (d,), F32)
    else:
        t(b + "ffn_gate.weight", (f, d))
    t(b + "layer_output_norm.weight", (d,), F32)
    t(b + "layer_output_norm.bias", (d,), F32)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("arch", choices=["bert", "nomic-bert", "jina-bert-v2"])
    p.add_argument("--ffn-kind", choices=["gate", "fused", "plain"], default="gate",
                   help="jina-bert-v2's MLP")
    p.add_argument("--qk-norm", action="store_true", help="jina-bert-v2: LayerNorms on Q and K")
    p.add_argument("--norm-2", action="store_true", help="jina-bert-v2: attn_norm_2")
    p.add_argument("out")
    p.add_argument("--name", default="shape")
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--ffn", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--positions", type=int, default=512, help="context_length")
    p.add_argument("--token-types", type=int, default=2)
    p.add_argument("--pooling", choices=sorted(POOLING), default="cls")
    p.add_argument("--cls-out", type=int, default=1, help="rank: the classifier's outputs")
    p.add_argument("--no-cls-dense", action="store_true", help="rank: no dense layer before it")
    a = p.parse_args()
    d = a.hidden

    w = GGUFWriter(a.out, a.arch)
    w.add_name(a.name)
    w.add_context_length(a.positions)
    w.add_block_count(a.layers)
    w.add_embedding_length(d)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(a.heads)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    w.add_pooling_type(POOLING[a.pooling])
    if a.arch == "nomic-bert":
        w.add_rope_freq_base(1000.0)
    w.add_file_type(1)
    add_vocab(w, a.vocab)
    w.add_token_type_count(a.token_types)

    def t(name, shape, ty=F16):
        add_tensor(w, name, shape, ty)

    t("token_embd.weight", (a.vocab, d))
    t("token_types.weight", (a.token_types, d), F32)
    if a.arch == "bert":
        t("position_embd.weight", (a.positions, d))
    t("token_embd_norm.weight", (d,), F32)
    t("token_embd_norm.bias", (d,), F32)
    for i in range(a.layers):
        layer(t, f"blk.{i}.", a)
    if a.pooling == "rank" and a.arch == "jina-bert-v2":
        t("cls.weight", (1, d))
        t("cls.bias", (1,), F32)
    elif a.pooling == "rank":
        if not a.no_cls_dense:
            t("cls.weight", (d, d))
            t("cls.bias", (d,), F32)
        t("cls.output.weight", (a.cls_out, d))
        t("cls.output.bias", (a.cls_out,), F32)
    finish_sparse(w, a.out)


if __name__ == "__main__":
    main()
