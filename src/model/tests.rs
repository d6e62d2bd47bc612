//! Published parameter counts and KV sizes, reproduced exactly.

use super::*;

fn params(name: &str) -> ParamCount {
    find_model(name).unwrap().arch.params()
}

fn kv_per_token_f16(name: &str) -> u64 {
    let arch = find_model(name).unwrap().arch;
    arch.kv_elements_per_token_layer() * arch.num_layers * 2
}

#[test]
fn published_parameter_counts() {
    // Each figure is the model card's / safetensors index's total parameter count.
    for (name, expected) in [
        ("mistral-7b", 7_241_732_096u64),
        ("llama-2-7b", 6_738_415_616),
        ("llama-2-13b", 13_015_864_320),
        ("llama-2-70b", 68_976_648_192),
        ("llama-3-8b", 8_030_261_248),
        ("llama-3.1-70b", 70_553_706_496),
        ("llama-3.2-1b", 1_235_814_400),
        ("llama-3.2-3b", 3_212_749_824),
        ("mixtral-8x7b", 46_702_792_704),
        ("qwen2.5-7b", 7_615_616_512),
        ("qwen2.5-0.5b", 494_032_768),
        ("qwen3-8b", 8_190_735_360),
        ("gemma-2b", 2_506_172_416),
        ("gemma-7b", 8_537_680_896),
        ("gemma-2-2b", 2_614_341_888),
        ("gemma-2-9b", 9_241_705_984),
        ("phi-3-mini", 3_821_079_552),
        ("deepseek-v2-lite", 15_706_484_224),
        ("deepseek-v3", 671_026_419_200),
        ("falcon-7b", 6_921_720_704),
        ("gpt-neox-20b", 20_554_567_680),
        ("tinyllama-1.1b", 1_100_048_384),
    ] {
        assert_eq!(params(name).total, expected, "{name}");
    }
}

#[test]
fn moe_active_parameters() {
    assert_eq!(params("mixtral-8x7b").active, 12_879_925_248);
    assert!(params("deepseek-v3").active < 40_000_000_000);
    assert!(params("qwen3-30b-a3b").active < 3_500_000_000);
}

#[test]
fn published_kv_bytes_per_token() {
    assert_eq!(kv_per_token_f16("mistral-7b"), 131_072);
    assert_eq!(kv_per_token_f16("llama-2-7b"), 524_288);
    assert_eq!(kv_per_token_f16("llama-3-8b"), 131_072);
    assert_eq!(kv_per_token_f16("llama-2-70b"), 327_680);
    // MLA caches one 576-element latent per layer.
    assert_eq!(kv_per_token_f16("deepseek-v2-lite"), 576 * 27 * 2);
}

#[test]
fn sliding_windows_cap_the_cache() {
    let gemma = find_model("gemma-2-9b").unwrap().arch;
    // 21 of 42 layers slide at 4096; at 8192 tokens they hold half as much.
    let full = gemma.kv_elements_per_token_layer() as u128 * 42 * 8192;
    assert_eq!(gemma.kv_elements(8192), full - full / 4);
    // Mistral's window is not applied: llama.cpp caches every token of the context.
    let mistral = find_model("mistral-7b").unwrap().arch;
    assert_eq!(mistral.kv_elements(32_768), mistral.kv_elements(4096) * 8);
}

#[test]
fn catalog_is_large_and_names_resolve() {
    let all = catalog();
    assert!(all.len() >= 30);
    let mut names: Vec<&str> = all
        .iter()
        .flat_map(|m| std::iter::once(m.name).chain(m.aliases.iter().copied()))
        .collect();
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "duplicate names or aliases");
    assert_eq!(find_model("Mistral-7B-v0.1").unwrap().name, "mistral-7b");
    assert_eq!(find_model("llama_3_8b").unwrap().name, "llama-3-8b");
    assert!(find_model("gpt-5").is_none());
}

#[test]
fn seed_api_kv_cache_matches() {
    assert_eq!(estimate_kv_cache_memory(32, 8, 128, 1, 2), 131_072);
}

#[test]
fn every_catalog_shape_passes_the_plausibility_gate() {
    for m in catalog() {
        assert_eq!(m.arch.check_plausible(), Ok(()), "{}", m.name);
    }
}

#[test]
fn config_backed_catalog_models_match_their_publishers() {
    let oss = find_model("gpt-oss-20b").unwrap();
    assert_eq!(oss.arch.params().total, 20_914_757_184);
    assert_eq!(oss.arch.params().active, 3_608_307_264);
    assert_eq!(oss.checkpoint_weights.unwrap().bytes, 13_761_264_768);
    let maverick = find_model("llama-4-maverick").unwrap();
    assert_eq!(maverick.arch.params().total, 400_711_848_960);
    assert_eq!(maverick.arch.params().active, 17_184_691_200);
    assert!(maverick.checkpoint_weights.is_none());
}

#[test]
fn hybrid_and_state_space_models_count_only_their_attention_layers_in_the_kv_cache() {
    // Qwen3-Next-80B-A3B: 36 gated-DeltaNet and 12 attention layers, 512 experts. The
    // checkpoint's 81.3 B also holds one multi-token-prediction layer (about 1.65 B), which
    // neither transformers nor llama.cpp's main graph loads.
    let next = find_model("qwen3-next").unwrap().arch;
    assert_eq!(next.attention_layer_count(), 12);
    assert_eq!(next.recurrent_layer_count(), 36);
    assert_eq!(next.params().total, 79_674_391_296);
    // 10 of 512 experts per token (the "A3B"), plus the shared expert, router and embeddings.
    assert_eq!(next.params().active, 3_874_929_408);
    // K and V of 2 heads × 256 in 12 layers, not 48.
    assert_eq!(
        next.kv_elements_per_token_layer() * next.attention_layer_count() * 2,
        24_576
    );
    let state = next.ssm.unwrap().state_elements_per_layer() * 36 * 4;
    assert_eq!(state, (3 * 8192 + 128 * 4096) * 36 * 4);
    // Kimi-K2 through DeepSeek-V3's formula (which gives V3's published 671,026,419,200):
    // 384 experts, 64 heads; the Hub rounds it to 1.03 T, 32 B active.
    let kimi = find_model("kimi-k2").unwrap().arch;
    assert_eq!(kimi.params().total, 1_026_408_232_448);
    assert_eq!(kimi.params().active, 32_861_500_928);
    // Mamba-Codestral-7B: 64 Mamba-2 layers, no KV cache at all.
    // The same count as the llama.cpp-loaded GGUF of its shape
    // (tests/fixtures/llamacpp/nemotron-nano-9b-v2-shape.json); the model card says 8.89B.
    let nemotron = find_model("nemotron-nano-9b-v2").unwrap().arch;
    assert_eq!(nemotron.params().total, 8_888_227_328);
    assert_eq!(
        (
            nemotron.recurrent_layer_count(),
            nemotron.attention_layer_count(),
            nemotron.ffn_layer_count()
        ),
        (27, 4, 25)
    );
    let codestral = find_model("mamba-codestral").unwrap().arch;
    assert_eq!(codestral.params().total, 7_285_403_648);
    assert_eq!(codestral.attention_layer_count(), 0);
}

// Kimi-K3 (moonshotai/Kimi-K3's config.json, the vision tower left out): the text tensors as
// llama.cpp's converter writes them (each residual score one vector, A one value a head);
// the checkpoint's own text tensors hold 1,342,624 more (the scores' norm and projection
// apart: 2 × 187 × 7168 and 7168 × 2; A_log at 128 in 69 layers: 69 × 32), 0.00005 %.
// Its MXFP4 experts (compressed-tensors, 32-value groups with a one-byte scale) and bf16
// rest: 1,452.81 GiB, the listing's 1,453.66 GiB of tensors less the vision tower and
// projector (0.83 GiB) within 0.002 %.
/// deepseek-ai/DeepSeek-V4-Flash's config.json: llama.cpp's `deepseek4` tensors, summed by
/// hand from its loader (43 layers: 2 window-only, 21 CSA with the lightning indexer, 20 HCA;
/// 3 hash-routed), without the multi-token-prediction block; its fp4 experts beside fp8 and
/// bf16: 155,537,977,431 bytes, 0.31 % under the 156,023,192,948 of its 45 non-MTP shard files
/// (tests/fixtures/checkpoint-sizes.json).
#[test]
fn deepseek_v4_flash_counts_llama_cpp_s_tensors() {
    let m = find_model("deepseek-v4-flash").unwrap();
    assert_eq!(m.arch.params().total, 284_334_567_511);
    assert_eq!(m.arch.params().active, 13_801_959_511);
    assert_eq!(m.checkpoint_weights.unwrap().bytes, 155_537_977_431);
    let v = m.arch.deepseek_v4.as_ref().unwrap();
    let count =
        |c: crate::model::arch::Compression| v.compression.iter().filter(|&&x| x == c).count();
    assert_eq!(
        (
            count(crate::model::arch::Compression::None),
            count(crate::model::arch::Compression::Csa),
            count(crate::model::arch::Compression::Hca)
        ),
        (2, 21, 20)
    );
}

#[test]
fn kimi_k3_counts_the_published_text_tensors() {
    let m = find_model("kimi-k3").unwrap();
    assert_eq!(m.arch.params().total, 2_779_483_135_584);
    assert_eq!(m.arch.params().active, 105_362_677_344);
    let w = m.checkpoint_weights.unwrap();
    assert_eq!(w.bytes, 1_559_940_676_800);
}

// MiniMax-M3 (MiniMaxAI/MiniMax-M3's text_config, the vision tower and the 7 MTP modules left
// out): the text tensors as llama.cpp's converter writes them, 0.2 % under the checkpoint's
// 854,172,958,720 bytes of bf16 tensors (427,086,479,360 values, vision and MTP included;
// code-search index file 59245552846).
#[test]
fn minimax_m3_counts_the_published_text_tensors() {
    let m = find_model("minimax-m3").unwrap();
    assert_eq!(m.arch.params().total, 426_174_572_928);
    assert_eq!(m.arch.params().active, 25_962_473_856);
}

// MiniMaxAI/MiniMax-M2 is published in FP8 (128 × 128 blocks with an f32 scale each; the
// embeddings and head bf16, the router f32): about one byte a parameter, as vLLM loads it,
// not the 457 GB of bf16 it was sized at without its quantization_config.
#[test]
fn minimax_m2_is_sized_as_its_fp8_checkpoint() {
    let m = find_model("minimax-m2").unwrap();
    let params = m.arch.params().total;
    let bytes = m.checkpoint_weights.unwrap().bytes;
    assert!(bytes > params && bytes < params + params / 100, "{bytes}");
}

/// deepseek-ai/DeepSeek-V3's Hub total, 684,531,386,000 parameters (BF16 3,918,786,560 +
/// F8_E4M3 680,571,043,840 + F32 41,555,600; code-search index file ids 58758039937,
/// 69432390537), counts the MTP layer 61 and the f32 `weight_scale_inv` of every fp8 linear (one
/// a 128 × 128 block), which are parameters there: gpumem's language model, its MTP layer and
/// those scales over the 62 layers' linears reproduce it to the unit. The routers' correction
/// biases are the rest of the F32 (59 × 256).
#[test]
fn deepseek_v3_hub_total_is_the_model_its_mtp_layer_and_its_block_scales() {
    use super::quantized::{linear_bytes, linears, Scheme};
    let arch = find_model("deepseek-v3").unwrap().arch;
    assert_eq!(arch.params().total, 671_026_419_200);
    assert_eq!(arch.unloaded_params(), 13_463_426_304);
    // The MTP layer's linears are one more layer's of the last kind (its `eh_proj`, embedding
    // and head are bf16 in the checkpoint, not among them).
    let mut with_mtp = arch.clone();
    with_mtp.num_layers += arch.mtp.layers;
    let block = Scheme::Fp8 {
        block: Some((128, 128)),
    };
    let scales: u128 = linears(&with_mtp)
        .iter()
        .filter(|l| !l.skipped_by_default)
        .map(|l| {
            let weights = u128::from(l.inputs) * u128::from(l.outputs);
            (linear_bytes(block, l.inputs, l.outputs, 2) - weights) / 4 * u128::from(l.count)
        })
        .sum();
    assert_eq!(scales, 41_555_600 - 59 * 256);
    let total = u128::from(arch.params().total) + u128::from(arch.unloaded_params()) + scales;
    assert_eq!(total, 684_531_386_000);
}

/// DeepSeek-V3.2's MTP layer is V3's with a lightning indexer of its own (64 heads of 128:
/// 13,959,424 parameters); GLM-5's keeps no embedding or head of its own.
#[test]
fn mtp_layers_of_the_dsa_families() {
    let v32 = find_model("deepseek-v3.2").unwrap().arch;
    assert_eq!(v32.params().total, 671_877_944_064);
    assert_eq!(v32.unloaded_params(), 13_463_426_304 + 13_959_424);
    // GLM-5.2's layer 78: experts 256 × 3 × 6144 × 2048, the shared expert, the router and
    // its f32 bias, MLA with its norms, the indexer, two layer norms, eh_proj and 3 norms.
    let glm = find_model("glm-5").unwrap().arch;
    let mla = 6144 * 2048 + 2048 * 16384 + 6144 * 576 + 512 * 28672 + 16384 * 6144 + 2048 + 512;
    let indexer = 4096 * 2048 + 128 * 6144 + 32 * 6144 + 256;
    let moe = 256 * 3 * 6144 * 2048 + 3 * 6144 * 2048 + 256 * 6144 + 256;
    let joins = 2 * 6144 + 12288 * 6144 + 3 * 6144;
    assert_eq!(mla + indexer + moe + joins, 9_952_920_576u64);
    assert_eq!(glm.unloaded_params(), 9_952_920_576);
    // Kimi-K2's config stores none.
    assert_eq!(find_model("kimi-k2").unwrap().arch.unloaded_params(), 0);
}
