#!/usr/bin/env python3
"""Writes a multimodal projector GGUF (llama.cpp's `mmproj`, architecture `clip`) with a
published vision tower's shape and no weight data, as make_gguf.py does for language models.

The tensors and keys are those llama.cpp b11312's converter writes (conversion/gemma.py's
Gemma3VisionModel for `gemma3`: the patch and position embeddings in f32 as its
`.embeddings.` rule forces, matrices in f16, norms and biases in f32, the input projection in
f16) and its loader reads (tools/mtmd/clip.cpp, clip-impl.h's TN_* names).

usage: make_mmproj_gguf.py gemma3 OUT.gguf --image 896 --patch 14 --hidden 1152 --ffn 4304
                           --layers 27 --heads 16 --text-hidden 2560
"""
import argparse

from gguf import GGMLQuantizationType, GGUFWriter

from sparse_gguf import add_tensor, finish_sparse

F16 = GGMLQuantizationType.F16
F32 = GGMLQuantizationType.F32


def siglip_tower(w: GGUFWriter, a: argparse.Namespace) -> None:
    """SigLIP's patch embedding (a biased convolution), learned positions, pre-norm layers of
    biased q/k/v/out projections and a biased GELU MLP, and the post-layernorm."""
    h, f = a.hidden, a.ffn
    side = a.image // a.patch
    add_tensor(w, "v.patch_embd.weight", (h, 3, a.patch, a.patch), F32)
    add_tensor(w, "v.patch_embd.bias", (h,), F32)
    add_tensor(w, "v.position_embd.weight", (side * side, h), F32)
    for i in range(a.layers):
        for n in ("attn_q", "attn_k", "attn_v", "attn_out"):
            add_tensor(w, f"v.blk.{i}.{n}.weight", (h, h), F16)
            add_tensor(w, f"v.blk.{i}.{n}.bias", (h,), F32)
        for n in ("ln1", "ln2"):
            add_tensor(w, f"v.blk.{i}.{n}.weight", (h,), F32)
            add_tensor(w, f"v.blk.{i}.{n}.bias", (h,), F32)
        add_tensor(w, f"v.blk.{i}.ffn_up.weight", (f, h), F16)
        add_tensor(w, f"v.blk.{i}.ffn_up.bias", (f,), F32)
        add_tensor(w, f"v.blk.{i}.ffn_down.weight", (h, f), F16)
        add_tensor(w, f"v.blk.{i}.ffn_down.bias", (h,), F32)
    add_tensor(w, "v.post_ln.weight", (h,), F32)
    add_tensor(w, "v.post_ln.bias", (h,), F32)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("projector", choices=["gemma3"])
    p.add_argument("out")
    p.add_argument("--name", default="mmproj-shape")
    p.add_argument("--image", type=int, required=True)
    p.add_argument("--patch", type=int, required=True)
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--ffn", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--text-hidden", type=int, required=True)
    p.add_argument("--merge", type=int, default=4,
                   help="Gemma 3's pooling kernel; written only when not llama.cpp's default 4")
    a = p.parse_args()

    w = GGUFWriter(a.out, "clip")
    w.add_name(a.name)
    w.add_file_type(1)
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.projector_type", a.projector)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.image_size", a.image)
    w.add_uint32("clip.vision.patch_size", a.patch)
    w.add_uint32("clip.vision.embedding_length", a.hidden)
    w.add_uint32("clip.vision.feed_forward_length", a.ffn)
    w.add_uint32("clip.vision.projection_dim", a.text_hidden)
    w.add_uint32("clip.vision.block_count", a.layers)
    w.add_uint32("clip.vision.attention.head_count", a.heads)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    if a.merge != 4:
        w.add_uint32("clip.vision.projector.scale_factor", a.merge)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    siglip_tower(w, a)
    # Gemma 3's projector: an RMS norm, then the projection to the text model's width.
    add_tensor(w, "mm.soft_emb_norm.weight", (a.hidden,), F32)
    add_tensor(w, "mm.input_projection.weight", (a.hidden, a.text_hidden), F16)
    finish_sparse(w, a.out)


if __name__ == "__main__":
    main()
