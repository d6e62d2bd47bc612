//! llama-quantize's recorded choices against the port, shape by shape and mix by mix.

use super::*;
use crate::model::arch::{llama_like, Moe};
use serde_json::Value;

macro_rules! fixture {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!(
                "../../../tests/fixtures/llamacpp-quantize/",
                $name,
                ".json"
            )),
        )
    };
}

/// llama-quantize's choices, recorded by `--dry-run` over sparse f16 GGUFs of these shapes
/// (tests/fixtures/llamacpp-quantize/README.md).
const FIXTURES: &[(&str, &str)] = &[
    fixture!("llama-3.1-8b"),
    fixture!("llama-3.1-70b"),
    fixture!("llama-3.2-1b"),
    fixture!("qwen2.5-0.5b"),
    fixture!("qwen3-0.6b"),
    fixture!("qwen3-30b-a3b"),
    fixture!("mixtral-8x7b"),
    fixture!("qwen1.5-moe-a2.7b"),
    fixture!("qwen2.5-72b"),
    fixture!("gemma-2b"),
    fixture!("gemma-2-2b"),
    fixture!("gemma-3-1b"),
];

/// The architecture a fixture's shape describes.
fn arch_of(shape: &Value) -> ModelArch {
    let n = |k: &str| shape[k].as_u64().unwrap();
    let flag = |k: &str| shape[k].as_bool().unwrap();
    let mut a = llama_like(
        "fixture",
        n("hidden"),
        n("ffn"),
        n("layers"),
        n("heads"),
        n("kv_heads"),
        n("vocab"),
    );
    a.family = shape["family"].as_str().unwrap().into();
    a.head_dim = n("head_dim");
    a.tie_word_embeddings = flag("tied");
    a.norms_per_layer = if flag("post_norms") { 4 } else { 2 };
    a.attention = Attention::Standard {
        qkv_bias: flag("qkv_bias"),
        o_bias: false,
        qk_norm: flag("qk_norm"),
    };
    if n("experts") > 0 {
        a.moe = Some(Moe {
            experts: n("experts"),
            experts_per_token: n("experts_used"),
            expert_intermediate: n("expert_ffn"),
            shared_intermediate: n("shared_ffn"),
            first_dense_layers: 0,
            layer_freq: 1,
            router_bias: false,
            shared_gate: n("shared_ffn") > 0,
            scaled_weights: false,
            groups: (0, 0),
        });
    }
    a
}

/// Each tensor's type llama-quantize chose at `mix` (lowercase ggml names) and dims, by name.
fn recorded(doc: &Value, mix: &Value) -> BTreeMap<String, (String, Vec<u64>)> {
    let tensors = doc["tensors"].as_object().unwrap();
    tensors
        .iter()
        .map(|(name, dims)| {
            let ty = doc["kept"][name.as_str()]
                .as_str()
                .or_else(|| mix["types"][name.as_str()].as_str())
                .or_else(|| mix["default"].as_str())
                .unwrap();
            let dims = dims.as_array().unwrap().iter();
            let dims = dims.map(|d| d.as_u64().unwrap()).collect();
            (name.clone(), (ty.to_ascii_lowercase(), dims))
        })
        .collect()
}

fn synthesized(file: &GgufFile) -> BTreeMap<String, (String, Vec<u64>)> {
    let ty = |t: &GgufTensor| t.ggml_type.name.to_ascii_lowercase();
    file.tensors
        .iter()
        .map(|t| (t.name.clone(), (ty(t), t.dims.clone())))
        .collect()
}

#[test]
fn every_recorded_mix_is_llama_quantize_s_choice_tensor_by_tensor() {
    for (model, text) in FIXTURES {
        let doc: Value = serde_json::from_str(text).unwrap();
        let arch = arch_of(&doc["shape"]);
        for (name, mix) in doc["mixes"].as_object().unwrap() {
            let m = QuantMix::named(name).unwrap();
            let file = quantized_file(&arch, m).unwrap();
            let (want, got) = (recorded(&doc, mix), synthesized(&file));
            assert_eq!(
                want.keys().collect::<Vec<_>>(),
                got.keys().collect::<Vec<_>>(),
                "{model} {name}: tensor names"
            );
            let wrong: Vec<_> = want
                .iter()
                .filter(|(n, t)| got[n.as_str()] != **t)
                .map(|(n, t)| format!("{n}: llama-quantize {t:?}, gpumem {:?}", got[n]))
                .collect();
            assert!(wrong.is_empty(), "{model} {name}:\n{}", wrong.join("\n"));
            assert_eq!(
                file.tensor_bytes(),
                mix["tensor_bytes"].as_u64().unwrap(),
                "{model} {name}: bytes"
            );
        }
    }
}

/// The file llama-quantize wrote (not a dry run) for Llama-3.1-8B at Q4_K_M holds the bytes
/// the synthesized one does, and the catalog's Llama-3.1-8B synthesizes it.
#[test]
fn llama_3_1_8b_q4_k_m_is_the_written_file() {
    let doc: Value = serde_json::from_str(FIXTURES[0].1).unwrap();
    let written = &doc["written"]["Q4_K_M"];
    let arch = crate::model::find_model("llama-3.1-8b").unwrap().arch;
    let file = quantized_file(&arch, M::Q4_K_M).unwrap();
    assert_eq!(
        file.tensor_bytes(),
        written["tensor_bytes"].as_u64().unwrap()
    );
    assert_eq!(
        file.tensors.len() as u64,
        written["tensors"].as_u64().unwrap()
    );
    // Its layers are not alike: layer 0 keeps attn_v and ffn_down in Q6_K, layer 4 in Q4_K.
    let w = crate::model::LayerWeights::of(&file, 32, 32);
    assert!(w.layers[0] > w.layers[4], "{:?}", w.layers);
}

/// The catalog's models synthesize the files recorded for their shapes.
#[test]
fn catalog_models_synthesize_the_recorded_files() {
    let mut checked = 0;
    for (model, text) in FIXTURES {
        let Some(entry) = crate::model::find_model(model) else {
            continue;
        };
        let doc: Value = serde_json::from_str(text).unwrap();
        for (name, mix) in doc["mixes"].as_object().unwrap() {
            let file = quantized_file(&entry.arch, QuantMix::named(name).unwrap()).unwrap();
            assert_eq!(recorded(&doc, mix), synthesized(&file), "{model} {name}");
        }
        checked += 1;
    }
    assert_eq!(
        checked,
        FIXTURES.len() - 1,
        "qwen1.5-moe-a2.7b alone is not in the catalog"
    );
}

#[test]
fn precisions_name_the_file_types_once() {
    let p = |n: &str| crate::model::weight_precision(n).unwrap();
    assert_eq!(QuantMix::of(&p("Q4_K_M")), Some(M::Q4_K_M));
    assert_eq!(QuantMix::of(&p("iq2_s")), Some(M::IQ2_S));
    assert_eq!(QuantMix::of(&p("q6_k")), Some(M::Q6_K));
    for plain in ["bf16", "f16", "int4", "q4_k", "q5_k", "q3_k"] {
        assert_eq!(QuantMix::of(&p(plain)), None, "{plain}");
    }
    // Every --dtype a row names is a precision, and no file type is listed twice.
    for (i, r) in MIXES.iter().enumerate() {
        if let Some(d) = r.dtype {
            assert_eq!(QuantMix::of(&p(d)), Some(r.mix));
        }
        assert!(MIXES[..i]
            .iter()
            .all(|o| o.mix != r.mix && o.name != r.name));
        assert_eq!(QuantMix::named(r.name), Some(r.mix));
    }
}

#[test]
fn architectures_not_listed_keep_the_average() {
    let mut phi = llama_like("phi", 3072, 8192, 32, 32, 32, 32064);
    phi.family = "phi3".into();
    phi.fused_projections = true;
    assert!(quantized_file(&phi, M::Q4_K_M).is_none());
    let mut falcon = llama_like("falcon", 4544, 18176, 32, 71, 1, 65024);
    falcon.family = "falcon".into();
    assert!(quantized_file(&falcon, M::Q4_K_M).is_none());
}
