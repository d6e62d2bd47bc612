//! The coordinator replay against DeepSpeed's own counts and MemTracker's storages.

use super::*;

/// Llama-3.2-1B's layer shape with `layers` layers.
fn llama_1b(layers: u128) -> DenseLayout {
    DenseLayout {
        kind: LayerKind::Llama,
        layers,
        hidden: 2_048,
        q: 2_048,
        kv: 512,
        head_dim: 64,
        intermediate: 8_192,
        vocab: 128_256,
        tied: true,
        rotary_tables: 1,
        qkv_bias: false,
        o_bias: false,
        qk_norm: false,
    }
}

// The coordinator's own counts (`__n_available_params`), logged from deepspeed 0.19.8 over
// a fake group of 4 ranks at 64 tokens, second step.
#[test]
fn replay_matches_the_coordinators_count() {
    let count = |d: &DenseLayout, ckpt| -> Vec<u128> {
        replay(&Trace::of(d, ckpt))
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    };
    let n = count(&llama_1b(20), false);
    assert_eq!(n.iter().copied().max(), Some(1_252_524_032));
    // After the embedding's forward the coordinator has freed it (its next use lies
    // beyond the reuse window) and kept the first layer's prefetched weights.
    assert_eq!(
        &n[..5],
        &[
            262_668_288,
            323_485_696,
            384_303_104,
            121_634_816,
            182_452_224
        ]
    );
    let small = count(&llama_1b(4), true);
    assert_eq!(small.iter().copied().max(), Some(505_937_920));
    assert_eq!(small.last(), Some(&262_668_288));
    let g = gathered(&llama_1b(20), false);
    assert_eq!((g.forward_end, g.loss), (1_009_254_400, 1_009_254_400));
}

/// Qwen3-0.6B's layer shape with `layers` layers.
fn qwen3_06b(layers: u128) -> DenseLayout {
    DenseLayout {
        kind: LayerKind::Llama,
        layers,
        hidden: 1_024,
        q: 2_048,
        kv: 1_024,
        head_dim: 128,
        intermediate: 3_072,
        vocab: 151_936,
        tied: true,
        rotary_tables: 1,
        qkv_bias: false,
        o_bias: false,
        qk_norm: true,
    }
}

// The last forward prefetch also gathers the first query projection for backward's end:
// its flat buffer stays until then beside the copies of the others (MemTracker: a storage
// of 54,525,952 bytes at 24 layers, none at 12).
#[test]
fn a_coalesced_buffer_stays_until_its_last_weight_is_waited_on() {
    let total = |layers: u128| 151_936 * 1_024 + layers * 15_728_640;
    let g = gathered(&qwen3_06b(24), false);
    assert_eq!(g.loss, total(24) + 27_262_976);
    let g = gathered(&qwen3_06b(28), false);
    assert_eq!(g.loss, total(28) + 39_845_888);
    let g = gathered(&qwen3_06b(12), false);
    assert_eq!(g.loss, total(12));
}

/// Phi-3-mini's layer shape (fused projections, a dropout after attention and after the
/// MLP) with `layers` layers.
fn phi3_mini(layers: u128) -> DenseLayout {
    DenseLayout {
        kind: LayerKind::Fused,
        layers,
        hidden: 3_072,
        q: 3_072,
        kv: 3_072,
        head_dim: 96,
        intermediate: 8_192,
        vocab: 32_064,
        tied: false,
        rotary_tables: 1,
        qkv_bias: false,
        o_bias: false,
        qk_norm: false,
    }
}

/// Gemma-3-1B (26 layers, 5 sliding to 1 full: two rotary tables).
fn gemma3_1b() -> DenseLayout {
    DenseLayout {
        kind: LayerKind::Gemma,
        layers: 26,
        hidden: 1_152,
        q: 1_024,
        kv: 256,
        head_dim: 256,
        intermediate: 6_912,
        vocab: 262_144,
        tied: true,
        rotary_tables: 2,
        qkv_bias: false,
        o_bias: false,
        qk_norm: true,
    }
}

// The coordinator's count after every fetch and release of the second step, logged from
// deepspeed 0.19.8 (transformers 5.24) over a fake group of 4 ranks at 64 tokens: the
// events, the most gathered and the sum over the events, each equal (and every event, when
// compared one by one).
#[test]
fn replay_matches_the_coordinators_count_on_phi3_and_gemma() {
    let fingerprint = |d: &DenseLayout, ckpt| {
        let n: Vec<u128> = replay(&Trace::of(d, ckpt))
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        (n.len(), n.iter().copied().max(), n.iter().sum::<u128>())
    };
    assert_eq!(
        fingerprint(&phi3_mini(12), false),
        (583, Some(1_092_550_656), 486_896_369_664)
    );
    assert_eq!(
        fingerprint(&phi3_mini(12), true),
        (799, Some(1_092_550_656), 647_718_567_936)
    );
    assert_eq!(
        fingerprint(&gemma3_1b(), true),
        (2_569, Some(999_751_680), 1_985_364_099_072)
    );
    // Gemma 2 (eager attention, one rotary table, no per-head norms) at 8 of 2B's layers.
    let gemma2 = DenseLayout {
        layers: 8,
        hidden: 2_304,
        q: 2_048,
        kv: 1_024,
        intermediate: 9_216,
        vocab: 256_000,
        rotary_tables: 1,
        qk_norm: false,
        ..gemma3_1b()
    };
    assert_eq!(
        fingerprint(&gemma2, true),
        (707, Some(1_212_678_144), 665_602_228_224)
    );
    // Routed experts: the sparse block one module, fetched whole (Qwen3-MoE's shape at 2
    // layers, with and without checkpointing; Mixtral's at 4 layers of 4 experts).
    let qwen3_moe = DenseLayout {
        kind: LayerKind::Routed {
            experts: 128,
            intermediate: 768,
            router_first: false,
        },
        layers: 2,
        hidden: 2_048,
        q: 4_096,
        kv: 512,
        head_dim: 128,
        intermediate: 768,
        vocab: 151_936,
        tied: false,
        rotary_tables: 1,
        qkv_bias: false,
        o_bias: false,
        qk_norm: true,
    };
    assert_eq!(
        fingerprint(&qwen3_moe, true),
        (143, Some(1_355_808_768), 149_119_303_680)
    );
    assert_eq!(
        fingerprint(&qwen3_moe, false),
        (105, Some(1_355_808_768), 105_607_593_984)
    );
    let mixtral = DenseLayout {
        kind: LayerKind::Routed {
            experts: 4,
            intermediate: 14_336,
            router_first: true,
        },
        layers: 4,
        hidden: 4_096,
        q: 4_096,
        kv: 1_024,
        vocab: 32_000,
        qk_norm: false,
        ..qwen3_moe
    };
    assert_eq!(
        fingerprint(&mixtral, false),
        (159, Some(1_456_472_064), 162_332_147_712)
    );
}
