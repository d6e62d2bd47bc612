//! The quantization layouts against each method's own tensors.

use super::*;
use serde_json::json;

fn tiny() -> ModelArch {
    // 2 layers, hidden 256, 4 heads of 64 (2 KV heads), gated MLP of 512, untied.
    super::super::arch::llama_like("tiny", 256, 512, 2, 4, 2, 1000)
}

/// The tensors a checkpoint holds, written out one by one (shape products × element bytes)
/// as the format defines them, for one `inputs × outputs` layer.
fn gptq_tensors(i: u128, o: u128, g: u128) -> u128 {
    let qweight = (i * 4 / 32) * o * 4;
    let qzeros = i.div_ceil(g) * (o * 4 / 32) * 4;
    let scales = i.div_ceil(g) * o * 2;
    let g_idx = i * 4;
    qweight + qzeros + scales + g_idx
}

#[test]
fn gptq_checkpoint_is_its_tensors() {
    let arch = tiny();
    let q = json!({"quant_method": "gptq", "bits": 4, "group_size": 128});
    let scheme = scheme(&q).unwrap().unwrap();
    let per_layer = 2 * gptq_tensors(256, 256, 128) // q, o
        + 2 * gptq_tensors(256, 128, 128) // k, v
        + 2 * gptq_tensors(256, 512, 128) // gate, up
        + gptq_tensors(512, 256, 128); // down
                                       // Embeddings, lm_head (never quantized by default) and norms stay bf16.
    let rest = (2 * 1000 * 256 + 5 * 256) * 2;
    assert_eq!(checkpoint_bytes(&arch, scheme, &[]), 2 * per_layer + rest);
}

#[test]
fn ignored_modules_stay_unquantized() {
    let arch = tiny();
    let s = Scheme::Awq {
        bits: 4,
        group: 128,
    };
    let all = checkpoint_bytes(&arch, s, &[]);
    // One layer's attention kept in bf16: its four projections at 2 bytes a weight.
    let kept = checkpoint_bytes(&arch, s, &["model.layers.0.self_attn".into()]);
    let attention = 2 * 256 * 256 + 2 * 256 * 128;
    let quantized = 2 * linear_bytes(s, 256, 256, 2) + 2 * linear_bytes(s, 256, 128, 2);
    assert_eq!(kept, all - quantized + attention * 2);
    // compressed-tensors' regular expressions name module suffixes.
    assert!(names("re:.*mlp.gate$", "model.layers.3.mlp.gate"));
    assert!(!names("re:.*mlp.gate$", "model.layers.3.mlp.gate_proj"));
    assert!(names("lm_head", "lm_head"));
    assert!(!names("gate", "model.layers.0.mlp.gate_proj"));
}

#[test]
fn fp8_block_scales_cover_partial_blocks() {
    // DeepSeek-V3's kv_a_proj_with_mqa: 7168 → 576, 128 × 128 blocks: 5 × 56 scales.
    let s = scheme(&json!({"quant_method": "fp8", "weight_block_size": [128, 128]}))
        .unwrap()
        .unwrap();
    assert_eq!(linear_bytes(s, 7168, 576, 2), 7168 * 576 + 5 * 56 * 4);
    let bad = scheme(&json!({"quant_method": "fp8", "weight_block_size": [128]}));
    assert_eq!(
        bad.unwrap_err(),
        (
            "quantization_config.weight_block_size".to_string(),
            "is not two positive integers".to_string()
        )
    );
}

#[test]
fn compressed_tensors_w4a16_asymmetric() {
    let q = json!({"quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4,
        "strategy": "group", "group_size": 128, "symmetric": false}}},
        "ignore": ["lm_head"]});
    let s = scheme(&q).unwrap().unwrap();
    // weight_packed [256, 512·4/32] int32, weight_scale [256, 4] bf16, weight_shape [2]
    // int64, weight_zero_point [256·4/32, 4] int32.
    assert_eq!(
        linear_bytes(s, 512, 256, 2),
        256 * 64 * 4 + 256 * 4 * 2 + 16 + 32 * 4 * 4
    );
    assert!(scheme(&json!({"quant_method": "hqq"})).unwrap().is_none());
}

#[test]
fn fp4_checkpoints_are_their_vllm_tensors() {
    // ModelOpt NVFP4 (flat, or nested as hf_quant_config.json writes it): weight u8
    // [256, 512/2], weight_scale fp8 [256, 512/16], weight_scale_2 and input_scale f32.
    let flat = json!({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16});
    let nested = json!({"quant_method": "modelopt",
        "quantization": {"quant_algo": "nvfp4", "exclude_modules": ["lm_head"]}});
    for q in [&flat, &nested] {
        let s = scheme(q).unwrap().unwrap();
        assert_eq!(linear_bytes(s, 512, 256, 2), 256 * 256 + 256 * 32 + 8);
    }
    assert_eq!(kept(&nested), ["lm_head"]);
    let fp8 = json!({"quant_method": "modelopt", "quant_algo": "FP8"});
    assert!(scheme(&fp8).unwrap().is_none());
    // compressed-tensors NVFP4: weight_packed, weight_scale, weight_global_scale, and
    // input_global_scale only where activations are quantized; MXFP4: e8m0 scales a 32.
    let ct = |format: &str, activations: Value| {
        json!({"quant_method": "compressed-tensors", "format": format,
            "config_groups": {"group_0": {"targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
            "group_size": 16}, "input_activations": activations}}})
    };
    let w4a4 = scheme(&ct("nvfp4-pack-quantized", json!({"num_bits": 4})))
        .unwrap()
        .unwrap();
    assert_eq!(linear_bytes(w4a4, 512, 256, 2), 256 * 256 + 256 * 32 + 8);
    let w4a16 = scheme(&ct("nvfp4-pack-quantized", Value::Null))
        .unwrap()
        .unwrap();
    assert_eq!(linear_bytes(w4a16, 512, 256, 2), 256 * 256 + 256 * 32 + 4);
    let mut mx = ct("mxfp4-pack-quantized", Value::Null);
    mx["config_groups"]["group_0"]["weights"]["group_size"] = json!(32);
    let mx = scheme(&mx).unwrap().unwrap();
    assert_eq!(linear_bytes(mx, 512, 256, 2), 256 * 256 + 256 * 16);
}

#[test]
fn wildcard_exclusions_keep_what_they_name() {
    assert!(names(
        "model.layers.*.self_attn*",
        "model.layers.3.self_attn.q_proj"
    ));
    assert!(names(
        "model.layers.*.self_attn",
        "model.layers.3.self_attn.q_proj"
    ));
    assert!(names("*mlp.gate", "model.layers.3.mlp.gate"));
    assert!(!names(
        "model.layers.*.self_attn*",
        "model.layers.3.mlp.gate_proj"
    ));
    assert!(!names("model.layers.1*.mlp", "model.layers.2.mlp.up_proj"));
    assert!(names("model.layers.1*.mlp", "model.layers.12.mlp.up_proj"));
}

proptest::proptest! {
    // Any pattern and name: no panic (slicing at char boundaries), a star matches
    // everything, a name matches itself, and a star standing for any part of a name
    // matches it.
    #[test]
    fn wildcards_match_what_they_stand_for(name in "\\PC{0,24}", cut in 0usize..24) {
        let _ = wildcard(&name, &name.chars().rev().collect::<String>());
        proptest::prop_assert!(wildcard("*", &name));
        proptest::prop_assert!(wildcard(&name.replace('*', ""), &name.replace('*', "")));
        let chars: Vec<char> = name.chars().filter(|&c| c != '*').collect();
        let at = cut.min(chars.len());
        let head: String = chars[..at].iter().collect();
        let whole: String = chars.iter().collect();
        let pattern = head + "*";
        proptest::prop_assert!(wildcard(&pattern, &whole));
    }
}

#[test]
fn every_architecture_has_its_linears() {
    // The linear layers hold every parameter but embeddings, norms, biases and SSM vectors.
    let arch = tiny();
    let linear: u64 = linears(&arch)
        .iter()
        .map(|l| l.inputs * l.outputs * l.count)
        .sum();
    assert_eq!(arch.params().total - linear, 1000 * 256 + 5 * 256);
    let next = crate::model::find_model("qwen3-next").unwrap().arch;
    let linear: u64 = linears(&next)
        .iter()
        .map(|l| l.inputs * l.outputs * l.count)
        .sum();
    // Left over: input embedding, norms, q/k norms, DeltaNet conv, A, Δ bias and norm,
    // the shared-expert gate vector.
    let m = next.ssm.unwrap();
    let leftover = 151_936 * 2048
        + 48 * 2 * 2048
        + 2048
        + 12 * 2 * 256
        + 36 * (8192 * 4 + 2 * 32 + 128)
        + 48 * 2048;
    assert_eq!(m.conv_channels(), 8192);
    assert_eq!(next.params().total - linear, leftover);
    // RWKV, as arch_from_gguf reads it: left over are the input embedding, the norms
    // (LayerNorms: weight and bias) and the per-channel vectors of each layer: RWKV-7's
    // w0/a0/v0, six interpolations, k_k/k_a/r_k and the channel mix's interpolation (13);
    // RWKV-6's six time-mix and two channel-mix interpolations, time_first and the decay
    // (10).
    for (kind, ranks, vectors) in [
        (SsmKind::Rwkv7, [32, 32, 16, 64], 13),
        (SsmKind::Rwkv6, [32, 64, 0, 0], 10),
    ] {
        let mut rwkv = super::super::arch::llama_like("rwkv", 256, 1024, 2, 0, 0, 1000);
        rwkv.head_dim = 0;
        rwkv.mlp = Mlp::Plain;
        rwkv.norm = super::super::arch::Norm::Layer;
        rwkv.embedding_norm = true;
        rwkv.ssm = Some(super::super::arch::Ssm {
            kind,
            conv_kernel: 3,
            inner: 256,
            state: 64,
            dt_rank: 4,
            groups: 0,
            conv_bias: false,
            norm: true,
            ranks,
        });
        let linear: u64 = linears(&rwkv)
            .iter()
            .map(|l| l.inputs * l.outputs * l.count)
            .sum();
        let norms = 2 * 256 * (2 + 2 * 3);
        assert_eq!(
            rwkv.params().total - linear,
            1000 * 256 + norms + 2 * vectors * 256,
            "{kind:?}"
        );
    }
}

// compressed-tensors' `re:` expressions with one group of alternatives (Kimi-K3's ignore list):
// each alternative matches, and nothing else does.
#[test]
fn re_patterns_with_alternatives_name_each_alternative() {
    let p = "re:.*mlp\\.(gate|up|gate_up|down)_proj.*";
    for name in [
        "model.layers.0.mlp.gate_proj",
        "model.layers.0.mlp.down_proj",
    ] {
        assert!(names(p, name), "{name}");
    }
    assert!(!names(p, "model.layers.1.block_sparse_moe.experts.w1"));
    assert!(names("re:.*self_attn.*", "model.layers.3.self_attn.g_proj"));
    assert!(names(
        "re:.*shared_experts.*",
        "model.layers.1.block_sparse_moe.shared_experts.up_proj"
    ));
}
