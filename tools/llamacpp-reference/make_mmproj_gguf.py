#!/usr/bin/env python3
"""Writes a multimodal projector GGUF (llama.cpp's `mmproj`, architecture `clip`) with a
published vision tower's shape and no weight data, as make_gguf.py does for language models.

The tensors and keys are those llama.cpp b11312's converter writes (conversion/gemma.py's
Gemma3VisionModel for `gemma3`: the patch and position embeddings in f32 as its
`.embeddings.` rule forces, matrices in f16, norms and biases in f32, the input projection in
f16; conversion/qwenvl.py's Qwen2VLVisionModel for `qwen25vl`: the 3-D patch convolution split
in two 2-D kernels in f16 as MmprojModel.tensor_force_quant writes them, q/k/v split from the
fused qkv, RMS norms without bias, a biased SwiGLU MLP, the merger's RMS norm as `v.post_ln`
and its two biased layers as `mm.0` and `mm.2`; conversion/qwen3vl.py's Qwen3VLVisionModel for
`qwen3vl`: the patch kernels' bias, learned positions in f32, the fused qkv, LayerNorms, a biased
GELU MLP, the merger's LayerNorm as `v.post_ln`, and each deepstack merger as `v.deepstack.N`;
conversion/gemma.py's Gemma4VisionAudioModel for `gemma4v`, its vision part alone) and its
loader reads (tools/mtmd/clip.cpp, clip-impl.h's TN_* names).

usage: make_mmproj_gguf.py gemma3 OUT.gguf --image 896 --patch 14 --hidden 1152 --ffn 4304
                           --layers 27 --heads 16 --text-hidden 2560
       make_mmproj_gguf.py qwen25vl OUT.gguf --image 560 --patch 14 --hidden 1280 --ffn 3420
                           --layers 32 --heads 16 --text-hidden 3584 --wa-pattern 8
       make_mmproj_gguf.py gemma4v OUT.gguf --image 224 --patch 16 --hidden 768 --ffn 3072
                           --layers 16 --heads 12 --text-hidden 2304 --positions 10240
       make_mmproj_gguf.py qwen2vl OUT.gguf --image 560 --patch 14 --hidden 1280 --ffn 5120
                           --layers 32 --heads 16 --text-hidden 3584
       make_mmproj_gguf.py qwen3vl OUT.gguf --image 768 --patch 16 --hidden 1152 --ffn 4304
                           --layers 27 --heads 16 --text-hidden 3584 --deepstack 8,16,24
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


def qwen25vl_tower(w: GGUFWriter, a: argparse.Namespace, qwen2: bool = False) -> None:
    """Qwen2.5-VL's tower: two patch kernels (the temporal pair), pre-norm layers of RMS norms,
    biased q/k/v/out projections and a biased SwiGLU MLP, then the merger: an RMS norm
    (`merger.ln_q`, llama.cpp's post_ln), and two biased layers over 2 x 2 merged patches.
    Qwen2-VL's (`qwen2`): LayerNorms with biases and a biased MLP without a gate."""
    h, f = a.hidden, a.ffn
    add_tensor(w, "v.patch_embd.weight", (h, 3, a.patch, a.patch), F16)
    add_tensor(w, "v.patch_embd.weight.1", (h, 3, a.patch, a.patch), F16)
    for i in range(a.layers):
        for n in ("attn_q", "attn_k", "attn_v", "attn_out"):
            add_tensor(w, f"v.blk.{i}.{n}.weight", (h, h), F16)
            add_tensor(w, f"v.blk.{i}.{n}.bias", (h,), F32)
        for n in ("ln1", "ln2"):
            add_tensor(w, f"v.blk.{i}.{n}.weight", (h,), F32)
            if qwen2:
                add_tensor(w, f"v.blk.{i}.{n}.bias", (h,), F32)
        for n in ("ffn_up",) if qwen2 else ("ffn_gate", "ffn_up"):
            add_tensor(w, f"v.blk.{i}.{n}.weight", (f, h), F16)
            add_tensor(w, f"v.blk.{i}.{n}.bias", (f,), F32)
        add_tensor(w, f"v.blk.{i}.ffn_down.weight", (h, f), F16)
        add_tensor(w, f"v.blk.{i}.ffn_down.bias", (h,), F32)
    add_tensor(w, "v.post_ln.weight", (h,), F32)
    if qwen2:
        add_tensor(w, "v.post_ln.bias", (h,), F32)
    merged = h * 4
    add_tensor(w, "mm.0.weight", (merged, merged), F16)
    add_tensor(w, "mm.0.bias", (merged,), F32)
    add_tensor(w, "mm.2.weight", (a.text_hidden, merged), F16)
    add_tensor(w, "mm.2.bias", (a.text_hidden,), F32)


def qwen3vl_tower(w: GGUFWriter, a: argparse.Namespace) -> None:
    """Qwen3-VL's tower: two biased patch kernels, learned positions for `--image`, pre-norm
    layers of LayerNorms, a fused biased qkv, a biased output and GELU MLP; the merger (a
    LayerNorm over the tower's width, two biased layers over 2 x 2 merged patches) and, after
    each `--deepstack` layer, a merger of its own (a LayerNorm over the merged width)."""
    h, f = a.hidden, a.ffn
    side = a.image // a.patch
    add_tensor(w, "v.patch_embd.weight", (h, 3, a.patch, a.patch), F16)
    add_tensor(w, "v.patch_embd.weight.1", (h, 3, a.patch, a.patch), F16)
    add_tensor(w, "v.patch_embd.bias", (h,), F32)
    add_tensor(w, "v.position_embd.weight", (side * side, h), F32)
    for i in range(a.layers):
        add_tensor(w, f"v.blk.{i}.attn_qkv.weight", (3 * h, h), F16)
        add_tensor(w, f"v.blk.{i}.attn_qkv.bias", (3 * h,), F32)
        add_tensor(w, f"v.blk.{i}.attn_out.weight", (h, h), F16)
        add_tensor(w, f"v.blk.{i}.attn_out.bias", (h,), F32)
        for n in ("ln1", "ln2"):
            add_tensor(w, f"v.blk.{i}.{n}.weight", (h,), F32)
            add_tensor(w, f"v.blk.{i}.{n}.bias", (h,), F32)
        add_tensor(w, f"v.blk.{i}.ffn_up.weight", (f, h), F16)
        add_tensor(w, f"v.blk.{i}.ffn_up.bias", (f,), F32)
        add_tensor(w, f"v.blk.{i}.ffn_down.weight", (h, f), F16)
        add_tensor(w, f"v.blk.{i}.ffn_down.bias", (h,), F32)
    merged = h * 4
    for i in a.deepstack:
        add_tensor(w, f"v.deepstack.{i}.norm.weight", (merged,), F32)
        add_tensor(w, f"v.deepstack.{i}.norm.bias", (merged,), F32)
        add_tensor(w, f"v.deepstack.{i}.fc1.weight", (merged, merged), F16)
        add_tensor(w, f"v.deepstack.{i}.fc1.bias", (merged,), F32)
        add_tensor(w, f"v.deepstack.{i}.fc2.weight", (a.text_hidden, merged), F16)
        add_tensor(w, f"v.deepstack.{i}.fc2.bias", (a.text_hidden,), F32)
    add_tensor(w, "v.post_ln.weight", (h,), F32)
    add_tensor(w, "v.post_ln.bias", (h,), F32)
    add_tensor(w, "mm.0.weight", (merged, merged), F16)
    add_tensor(w, "mm.0.bias", (merged,), F32)
    add_tensor(w, "mm.2.weight", (a.text_hidden, merged), F16)
    add_tensor(w, "mm.2.bias", (a.text_hidden,), F32)


def gemma4v_tower(w: GGUFWriter, a: argparse.Namespace) -> None:
    """Gemma 4's vision tower (conversion/gemma.py's Gemma4VisionAudioModel, without clipped
    linears or standardization, as Gemma4VisionConfig defaults them): the patch kernel without
    bias, the x and y position tables in f32, RMS-normed layers with per-head q/k norms, norms
    after attention and after the gated MLP, a scalar a layer; then the input projection."""
    h, f, d = a.hidden, a.ffn, a.hidden // a.heads
    add_tensor(w, "v.patch_embd.weight", (h, 3, a.patch, a.patch), F16)
    add_tensor(w, "v.position_embd.weight", (2, a.positions, h), F32)
    for i in range(a.layers):
        for n in ("attn_q", "attn_k", "attn_v", "attn_out"):
            add_tensor(w, f"v.blk.{i}.{n}.weight", (h, h), F16)
        for n in ("attn_q_norm", "attn_k_norm"):
            add_tensor(w, f"v.blk.{i}.{n}.weight", (d,), F32)
        for n in ("ln1", "ln2", "attn_post_norm", "ffn_post_norm"):
            add_tensor(w, f"v.blk.{i}.{n}.weight", (h,), F32)
        for n in ("ffn_gate", "ffn_up"):
            add_tensor(w, f"v.blk.{i}.{n}.weight", (f, h), F16)
        add_tensor(w, f"v.blk.{i}.ffn_down.weight", (h, f), F16)
        add_tensor(w, f"v.blk.{i}.out_scale.weight", (1,), F32)
    add_tensor(w, "mm.input_projection.weight", (a.text_hidden, h), F16)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("projector", choices=["gemma3", "gemma4v", "qwen2vl", "qwen25vl", "qwen3vl"])
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
    p.add_argument("--wa-pattern", type=int, default=8,
                   help="Qwen2.5-VL: every n-th layer attends fully (fullatt_block_indexes[0] + 1)")
    p.add_argument("--deepstack", type=lambda v: [int(i) for i in v.split(",") if i], default=[],
                   help="Qwen3-VL: the layers whose output a deepstack merger reads")
    p.add_argument("--positions", type=int, default=10240,
                   help="Gemma 4: rows of each position table (position_embedding_size)")
    a = p.parse_args()
    qwen = a.projector == "qwen25vl"
    qwen3 = a.projector == "qwen3vl"
    qwen2 = a.projector == "qwen2vl"

    w = GGUFWriter(a.out, "clip")
    w.add_name(a.name)
    w.add_file_type(1)
    w.add_bool("clip.has_vision_encoder", True)
    if a.projector == "gemma4v":
        # The converter names the vision projector per modality (a Gemma 4 file may hold audio).
        w.add_string("clip.vision.projector_type", "gemma4v")
        w.add_bool("clip.has_audio_encoder", False)
        w.add_uint32("clip.vision.image_size", 224)  # "unused, but set to avoid error"
        w.add_uint32("clip.vision.patch_size", a.patch)
        w.add_uint32("clip.vision.embedding_length", a.hidden)
        w.add_uint32("clip.vision.feed_forward_length", a.ffn)
        w.add_uint32("clip.vision.projection_dim", a.text_hidden)
        w.add_uint32("clip.vision.block_count", a.layers)
        w.add_uint32("clip.vision.attention.head_count", a.heads)
        w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
        w.add_array("clip.vision.image_mean", [0.0, 0.0, 0.0])
        w.add_array("clip.vision.image_std", [1.0, 1.0, 1.0])
        gemma4v_tower(w, a)
        finish_sparse(w, a.out)
        return
    kind = {"qwen2vl": "qwen2vl_merger", "qwen25vl": "qwen2.5vl_merger",
            "qwen3vl": "qwen3vl_merger"}.get(a.projector, a.projector)
    w.add_string("clip.projector_type", kind)
    if not qwen2:  # Qwen2-VL's converter writes neither: clip takes its quick GELU then
        w.add_bool("clip.use_silu" if qwen else "clip.use_gelu", True)
    w.add_uint32("clip.vision.image_size", a.image)
    w.add_uint32("clip.vision.patch_size", a.patch)
    w.add_uint32("clip.vision.embedding_length", a.hidden)
    # Qwen2-VL's converter renames the vision config's hidden_size (the text model's width) to
    # intermediate_size; the MLP's real width is in its tensors.
    w.add_uint32("clip.vision.feed_forward_length", a.text_hidden if qwen2 else a.ffn)
    w.add_uint32("clip.vision.projection_dim", a.text_hidden)
    w.add_uint32("clip.vision.block_count", a.layers)
    w.add_uint32("clip.vision.attention.head_count", a.heads)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    if qwen3:
        w.add_uint32("clip.vision.spatial_merge_size", 2)
        w.add_array("clip.vision.is_deepstack_layers", [i in a.deepstack for i in range(a.layers)])
        w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
        w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
        qwen3vl_tower(w, a)
        finish_sparse(w, a.out)
        return
    if qwen or qwen2:
        if qwen:
            w.add_uint32("clip.vision.n_wa_pattern", a.wa_pattern)
        w.add_array("clip.vision.image_mean", [0.48145466, 0.4578275, 0.40821073])
        w.add_array("clip.vision.image_std", [0.26862954, 0.26130258, 0.27577711])
        qwen25vl_tower(w, a, qwen2)
        finish_sparse(w, a.out)
        return
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
