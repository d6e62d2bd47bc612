#!/usr/bin/env python3
"""Writes a LoRA adapter GGUF for a llama-architecture model, as llama.cpp's
convert_lora_to_gguf.py lays one out, with no weight data (a sparse file; llama.cpp reads the
adapter's zeros).

Each adapted matrix W (ne = [in, out]) gets `<W>.lora_a` (ne = [in, rank]) and `<W>.lora_b`
(ne = [rank, out]); llama.cpp pairs them by name and loads both into the buffer type of W.

usage: make_lora_gguf.py OUT.gguf --hidden H --ffn F --layers L --heads N --kv-heads K
                        --rank R [--head-dim D] [--targets q,k,v,o,gate,up,down] [--type f16|f32]
                        [--alpha A] [--head] [--vocab V]
"""
import argparse

from gguf import GGMLQuantizationType, GGUFWriter

from sparse_gguf import add_tensor, finish_sparse

MATRICES = {
    "q": ("attn_q", "hidden", "q_out"),
    "k": ("attn_k", "hidden", "kv_out"),
    "v": ("attn_v", "hidden", "kv_out"),
    "o": ("attn_output", "q_out", "hidden"),
    "gate": ("ffn_gate", "hidden", "ffn"),
    "up": ("ffn_up", "hidden", "ffn"),
    "down": ("ffn_down", "ffn", "hidden"),
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--ffn", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--kv-heads", type=int, required=True)
    p.add_argument("--head-dim", type=int, default=0)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--alpha", type=float, default=16.0)
    p.add_argument("--targets", default="q,k,v,o")
    p.add_argument("--type", default="f16", choices=["f16", "f32"])
    p.add_argument("--head", action="store_true", help="adapt the output head too")
    p.add_argument("--vocab", type=int, default=0)
    a = p.parse_args()

    head_dim = a.head_dim or a.hidden // a.heads
    dims = {"hidden": a.hidden, "ffn": a.ffn, "q_out": a.heads * head_dim,
            "kv_out": a.kv_heads * head_dim}
    qtype = {"f16": GGMLQuantizationType.F16, "f32": GGMLQuantizationType.F32}[a.type]

    w = GGUFWriter(a.out, "llama")
    w.add_type("adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", a.alpha)
    for il in range(a.layers):
        for t in a.targets.split(","):
            name, n_in, n_out = MATRICES[t]
            base = f"blk.{il}.{name}.weight"
            # gguf-py takes shapes outermost first: ne reversed.
            add_tensor(w, f"{base}.lora_a", (a.rank, dims[n_in]), qtype)
            add_tensor(w, f"{base}.lora_b", (dims[n_out], a.rank), qtype)
    if a.head:
        add_tensor(w, "output.weight.lora_a", (a.rank, a.hidden), qtype)
        add_tensor(w, "output.weight.lora_b", (a.vocab, a.rank), qtype)
    finish_sparse(w, a.out)


if __name__ == "__main__":
    main()
