#!/usr/bin/env python3
"""Writes a llama-architecture GGUF with a real model's published shape and no weight data.

The header (metadata, a minimal SentencePiece-style vocabulary llama.cpp accepts, and every
tensor's name, shape and type) is real; the tensor data region is a hole in a sparse file, so a
70B-shaped model costs a few MiB of disk. llama.cpp loads it (the weights read as zeros), which
is all a memory measurement needs.

usage: make_gguf.py OUT.gguf --hidden H --ffn F --layers L --heads N --kv-heads K --vocab V
                   [--head-dim D] [--ctx C] [--type f16|f32|q8_0] [--tied]
"""
import argparse

from gguf import GGMLQuantizationType, GGUFWriter

from sparse_gguf import add_tensor, add_vocab, finish_sparse


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--name", default="shape")
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--ffn", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--kv-heads", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--head-dim", type=int, default=0)
    p.add_argument("--ctx", type=int, default=131072)
    p.add_argument("--type", default="f16", choices=["f16", "f32", "q8_0"])
    p.add_argument("--tied", action="store_true")
    a = p.parse_args()

    head_dim = a.head_dim or a.hidden // a.heads
    qtype = {"f16": GGMLQuantizationType.F16, "f32": GGMLQuantizationType.F32,
             "q8_0": GGMLQuantizationType.Q8_0}[a.type]

    w = GGUFWriter(a.out, "llama")
    w.add_name(a.name)
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.hidden)
    w.add_feed_forward_length(a.ffn)
    w.add_block_count(a.layers)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(500000.0)
    w.add_vocab_size(a.vocab)
    w.add_file_type(1 if a.type == "f16" else 0 if a.type == "f32" else 7)
    add_vocab(w, a.vocab)

    def tensor(name: str, shape: tuple, t=qtype) -> None:
        add_tensor(w, name, shape, t)

    h, f, kvd, qd = a.hidden, a.ffn, a.kv_heads * head_dim, a.heads * head_dim
    f32 = GGMLQuantizationType.F32
    tensor("token_embd.weight", (a.vocab, h))
    tensor("output_norm.weight", (h,), f32)
    if not a.tied:
        tensor("output.weight", (a.vocab, h))
    for i in range(a.layers):
        tensor(f"blk.{i}.attn_norm.weight", (h,), f32)
        tensor(f"blk.{i}.attn_q.weight", (qd, h))
        tensor(f"blk.{i}.attn_k.weight", (kvd, h))
        tensor(f"blk.{i}.attn_v.weight", (kvd, h))
        tensor(f"blk.{i}.attn_output.weight", (h, qd))
        tensor(f"blk.{i}.ffn_norm.weight", (h,), f32)
        tensor(f"blk.{i}.ffn_gate.weight", (f, h))
        tensor(f"blk.{i}.ffn_up.weight", (f, h))
        tensor(f"blk.{i}.ffn_down.weight", (h, f))

    finish_sparse(w, a.out)


if __name__ == "__main__":
    main()
