#!/usr/bin/env python3
"""Writes a Mamba (v1) GGUF with a published model's dimensions and no weight data (a sparse
file), like make_gguf.py does for the llama layout.

usage: make_mamba_gguf.py OUT.gguf --d-model D --layers L --vocab V [--d-state 16]
                          [--d-conv 4] [--expand 2] [--tied]
"""
import argparse
import math

from gguf import GGMLQuantizationType, GGUFWriter

from sparse_gguf import add_tensor, add_vocab, finish_sparse


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--name", default="mamba-shape")
    p.add_argument("--d-model", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--d-state", type=int, default=16)
    p.add_argument("--d-conv", type=int, default=4)
    p.add_argument("--expand", type=int, default=2)
    p.add_argument("--tied", action="store_true")
    a = p.parse_args()
    d, di = a.d_model, a.expand * a.d_model
    dt_rank = math.ceil(d / 16)

    w = GGUFWriter(a.out, "mamba")
    w.add_name(a.name)
    w.add_context_length(1 << 20)
    w.add_embedding_length(d)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_block_count(a.layers)
    w.add_ssm_conv_kernel(a.d_conv)
    w.add_ssm_inner_size(di)
    w.add_ssm_state_size(a.d_state)
    w.add_ssm_time_step_rank(dt_rank)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(a.vocab)
    w.add_file_type(1)
    add_vocab(w, a.vocab)

    f16, f32 = GGMLQuantizationType.F16, GGMLQuantizationType.F32

    def tensor(name: str, shape: tuple, t=f16) -> None:
        add_tensor(w, name, shape, t)

    tensor("token_embd.weight", (a.vocab, d))
    tensor("output_norm.weight", (d,), f32)
    if not a.tied:
        tensor("output.weight", (a.vocab, d))
    for i in range(a.layers):
        tensor(f"blk.{i}.attn_norm.weight", (d,), f32)
        tensor(f"blk.{i}.ssm_in.weight", (2 * di, d))
        tensor(f"blk.{i}.ssm_conv1d.weight", (di, a.d_conv), f32)
        tensor(f"blk.{i}.ssm_conv1d.bias", (di,), f32)
        tensor(f"blk.{i}.ssm_x.weight", (dt_rank + 2 * a.d_state, di))
        tensor(f"blk.{i}.ssm_dt.weight", (di, dt_rank))
        tensor(f"blk.{i}.ssm_dt.bias", (di,), f32)
        tensor(f"blk.{i}.ssm_a", (di, a.d_state), f32)
        tensor(f"blk.{i}.ssm_d", (di,), f32)
        tensor(f"blk.{i}.ssm_out.weight", (d, di))

    finish_sparse(w, a.out)


if __name__ == "__main__":
    main()
