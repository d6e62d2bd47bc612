//! The replay against hand-worked graphs and the allocator's own rules.

use super::*;
use crate::model::arch::{Ssm, SsmKind};
use crate::model::llama_like;

const F16: Precision = Precision {
    name: "f16",
    block_bytes: 2,
    block_elems: 1,
};

#[test]
fn freed_neighbours_merge_and_best_fit_prefers_the_smallest_hole() {
    let mut b = Blocks::new(32, UNBOUNDED);
    let a = b.alloc(64);
    let c = b.alloc(32);
    let d = b.alloc(64);
    let _e = b.alloc(32);
    b.release(a, 64);
    b.release(d, 64);
    // Two 64-byte holes of equal fit: ggml takes the later one (its `<=`).
    assert_eq!(b.alloc(32), d);
    b.release(c, 32);
    // c merged with the hole before it: 96 bytes from 0.
    assert_eq!(b.chunks[0].free[0], (0, 96));
    assert_eq!(b.total(), 192);
}

// ggml-vulkan's buffers are at most 1 GiB: a tensor that no chunk's end has room for starts
// another chunk, the buffer being every chunk's high-water mark; a later tensor goes to the
// chunk it grows least, and a freed hole in a later chunk wins over an equal one earlier.
#[test]
fn a_bounded_buffer_type_fills_chunks_as_ggml_does() {
    let mut b = Blocks::new(1, 100);
    let first = b.alloc(60);
    let second = b.alloc(60);
    assert_eq!((first.chunk, second.chunk), (0, 1));
    assert_eq!(b.total(), 120);
    let third = b.alloc(30);
    assert_eq!((third.chunk, third.offset), (0, 60));
    assert_eq!(b.total(), 150);
    let fourth = b.alloc(20);
    assert_eq!((fourth.chunk, fourth.offset), (1, 60));
    b.release(first, 60);
    b.release(second, 60);
    // Both chunks now have a 60-byte hole at 0 beside their last block: the later one is taken.
    assert_eq!(b.alloc(50).chunk, 1);
    // One larger than any chunk gets a chunk of its own size.
    let big = b.alloc(500);
    assert_eq!((big.chunk, big.offset), (2, 0));
    assert_eq!(b.total(), 90 + 80 + 500);
}

#[test]
fn absurd_shapes_fall_back_instead_of_overflowing() {
    let huge = llama_like("x", 1 << 40, 1 << 41, 2, 1 << 20, 1 << 20, 1 << 40);
    assert_eq!(compute_buffer(&huge, 512, 4096, 4096, false, &F16), None);
    let llama = llama_like("x", 64, 128, 2, 4, 2, 100);
    assert_eq!(
        compute_buffer(&llama, u64::MAX, u64::MAX, u64::MAX, true, &F16),
        None
    );
    let mut mamba = llama_like("x", 64, 0, 2, 0, 0, 100);
    mamba.family = "mamba".into();
    mamba.head_dim = 0;
    mamba.norms_per_layer = 1;
    let ssm = Ssm {
        kind: SsmKind::Mamba,
        conv_kernel: 4,
        inner: 128,
        state: 16,
        dt_rank: 4,
        groups: 0,
        conv_bias: true,
        norm: false,
        ranks: [0; 4],
    };
    mamba.ssm = Some(ssm);
    assert!(compute_buffer(&mamba, 512, 4096, 4096, false, &F16).is_some());
    for (inner, state) in [(1 << 50, 16), (128, 1 << 50), (u64::MAX / 2, u64::MAX / 2)] {
        mamba.ssm = Some(Ssm {
            inner,
            state,
            ..ssm
        });
        assert_eq!(compute_buffer(&mamba, 512, 4096, 4096, false, &F16), None);
    }
    let next = crate::model::find_model("qwen3-next-80b-a3b").map(|m| m.arch);
    let Some(mut next) = next else {
        panic!("the catalog's Qwen3-Next");
    };
    let Some(ssm) = next.ssm else {
        panic!("Qwen3-Next's gated DeltaNet");
    };
    assert!(compute_buffer(&next, 512, 4096, 4096, true, &F16).is_some());
    for (inner, state) in [(1 << 50, 1 << 50 >> 5), (u64::MAX / 2, u64::MAX / 64)] {
        next.ssm = Some(Ssm {
            inner,
            state,
            ..ssm
        });
        assert_eq!(compute_buffer(&next, 512, 4096, 4096, true, &F16), None);
    }
}

#[test]
fn gated_delta_net_is_replayed_only_where_llamas_fused_op_runs() {
    let next = crate::model::find_model("qwen3-next-80b-a3b").map(|m| m.arch);
    let Some(mut next) = next else {
        panic!("the catalog's Qwen3-Next");
    };
    let Some(ssm) = next.ssm else {
        panic!("Qwen3-Next's gated DeltaNet");
    };
    // A small vocabulary and flash attention, so the linear layers set the peak.
    next.vocab_size = 2048;
    let split = compute_buffer(&next, 512, 4096, 4096, true, &F16);
    assert!(split.is_some());
    // The older single projection keeps q/k/v/z alive until z is used: more, not less
    // (llama.cpp, on 8 of these layers and 64 of the experts: 92.11 against 90.01 MiB).
    let joint = ModelArch {
        joint_qkvz: true,
        ..next.clone()
    };
    assert!(compute_buffer(&joint, 512, 4096, 4096, true, &F16) > split);
    // Key heads of another size than value heads, or value heads that do not divide among
    // the key heads: llama.cpp's op refuses them, so no replay.
    for ssm in [Ssm { state: 64, ..ssm }, Ssm { groups: 12, ..ssm }] {
        let other = ModelArch {
            ssm: Some(ssm),
            ..next.clone()
        };
        assert_eq!(compute_buffer(&other, 512, 4096, 4096, false, &F16), None);
    }
}

#[test]
fn deepseek_v4_is_replayed_for_a_cache_llama_cpp_takes() {
    let Some(v4) = crate::model::find_model("deepseek-v4-flash").map(|m| m.arch) else {
        panic!("the catalog's DeepSeek-V4-Flash");
    };
    // A window of 128 plus the batch, padded to 256 cells.
    let batch = |kv_type, flash_attention, seqs| Batch {
        arch: &v4,
        tokens: 512,
        kv_cells: 32768,
        swa_cells: 768,
        flash_attention,
        kv_type,
        seqs,
        parallel: seqs,
        outputs: None,
    };
    let q8 = crate::model::dtype::kv_precision("q8_0").expect("q8_0");
    let f16 = compute_buffer_of(&batch(&F16, true, 1));
    assert!(f16.is_some());
    // A quantized cache adds its rotations' inputs and products under flash attention (never
    // less; whether more depends on where the peak falls).
    assert!(compute_buffer_of(&batch(&q8, true, 1)) >= f16);
    // llama.cpp refuses a quantized cache without flash attention: the stage formulas
    // answer, and say so.
    assert_eq!(compute_buffer_of(&batch(&q8, false, 1)), None);
    // Several sequences' streams are replayed (each its own window and compressed caches);
    // the exact bytes are held in tests/fixtures/llamacpp-devices/*-np-cpu.json.
    assert!(compute_buffer_of(&batch(&F16, true, 2)).is_some());
}

#[test]
fn falcon_is_replayed_only_in_its_parallel_layout() {
    let Some(falcon) = crate::model::find_model("falcon-7b").map(|m| m.arch) else {
        panic!("the catalog's Falcon-7B");
    };
    // llama.cpp's compute buffers at 4096 tokens and micro-batches of 512 (Falcon-7B's
    // shape, 4 of its layers): 620.88 MiB; with Falcon-40B's second LayerNorm, 602.88 MiB,
    // less, not more: the extra tensor changes which free blocks ggml-alloc reuses.
    let one = compute_buffer(&falcon, 512, 4096, 4096, false, &F16);
    assert_eq!(one, Some(651_044_864));
    let two = ModelArch {
        norms_per_layer: 2,
        ..falcon.clone()
    };
    assert_eq!(
        compute_buffer(&two, 512, 4096, 4096, false, &F16),
        Some(632_170_496)
    );
    // Attention then the MLP (Falcon-RW's layout) is not the graph llama.cpp builds.
    let serial = ModelArch {
        parallel_attention: false,
        norms_per_layer: 2,
        ..falcon.clone()
    };
    assert_eq!(compute_buffer(&serial, 512, 4096, 4096, false, &F16), None);
    // Nor are biased projections, which its builder never loads.
    let biased = ModelArch {
        mlp_bias: true,
        ..falcon
    };
    assert_eq!(compute_buffer(&biased, 512, 4096, 4096, false, &F16), None);
}

#[test]
fn gpt_neox_is_replayed_with_either_residual_and_its_biases() {
    let Some(neox) = crate::model::find_model("gpt-neox-20b").map(|m| m.arch) else {
        panic!("the catalog's GPT-NeoX-20B");
    };
    let parallel = compute_buffer(&neox, 512, 4096, 4096, false, &F16);
    assert!(parallel.is_some());
    let serial = ModelArch {
        parallel_attention: false,
        ..neox.clone()
    };
    assert!(compute_buffer(&serial, 512, 4096, 4096, false, &F16).is_some());
    // Without biases it is not the graph llama.cpp's builder makes (it requires them).
    let unbiased = ModelArch {
        mlp_bias: false,
        ..neox.clone()
    };
    assert_eq!(
        compute_buffer(&unbiased, 512, 4096, 4096, false, &F16),
        None
    );
    // StarCoder2 has no parallel layout in llama.cpp.
    let starcoder = ModelArch {
        family: "starcoder2".into(),
        ..neox
    };
    assert_eq!(
        compute_buffer(&starcoder, 512, 4096, 4096, false, &F16),
        None
    );
}

#[test]
fn only_the_modelled_layouts_are_replayed() {
    let llama = llama_like("x", 64, 128, 2, 4, 2, 100);
    assert!(compute_buffer(&llama, 16, 256, 256, true, &F16).is_some());
    let mut other = llama.clone();
    other.family = "gemma2".into();
    assert!(compute_buffer(&other, 16, 256, 256, true, &F16).is_none());
    let mut routed = llama.clone();
    routed.moe = Some(crate::model::Moe {
        experts: 8,
        experts_per_token: 2,
        expert_intermediate: 32,
        shared_intermediate: 0,
        first_dense_layers: 0,
        layer_freq: 1,
        router_bias: false,
        shared_gate: false,
        scaled_weights: false,
        groups: (0, 0),
    });
    assert!(compute_buffer(&routed, 16, 256, 256, false, &F16).is_some());
    // A shared expert beside the llama builder's experts is another builder's graph (Llama 4's).
    if let Some(m) = routed.moe.as_mut() {
        m.shared_intermediate = 64;
    }
    assert!(compute_buffer(&routed, 16, 256, 256, false, &F16).is_none());
    let mut windowed = llama;
    windowed.sliding_window = Some(crate::model::SlidingWindow {
        window: 32,
        layers: crate::model::SlidingLayers::All,
    });
    assert!(compute_buffer(&windowed, 16, 256, 256, true, &F16).is_none());
}

/// Every layer and the output on one device under `rules`: the host's and the device's
/// buffers.
fn one_device(arch: &ModelArch, kv: &Precision, rules: BufferRules, cells: u64) -> (u64, u64) {
    one_device_fa(arch, kv, rules, cells, true)
}

/// [`one_device`] with flash attention on or off.
fn one_device_fa(
    arch: &ModelArch,
    kv: &Precision,
    rules: BufferRules,
    cells: u64,
    flash_attention: bool,
) -> (u64, u64) {
    on_one_device(arch, (kv, rules), (cells, 512), (flash_attention, false))
}

/// Every layer and the output of `arch` on one device (`kv` cache, device `rules`), a batch of
/// `tokens` over `cells` cells, flash attention on or off, splits `reordered` as the backend
/// reorders them or not: the host's and the device's buffers.
fn on_one_device(
    arch: &ModelArch,
    (kv, rules): (&Precision, BufferRules),
    (cells, tokens): (u64, u64),
    (flash_attention, reorders): (bool, bool),
) -> (u64, u64) {
    let layers: Vec<Option<usize>> = (0..=arch.num_layers).map(|_| Some(0)).collect();
    let batch = Batch {
        arch,
        tokens,
        kv_cells: cells,
        swa_cells: cells,
        flash_attention,
        kv_type: kv,
        seqs: 1,
        parallel: 1,
        outputs: None,
    };
    let placed = Placed {
        layer_devices: &layers,
        devices: 1,
        pipeline: false,
        moves: &[],
        device_rules: rules,
        rpc_rules: &[],
        host_rules: BufferRules::CPU,
        op_offload: false,
        reorders,
        weights: None,
    };
    let b = compute_buffers_placed(&batch, &placed).expect("Llama is replayed");
    (b[0], b[1])
}

// ggml-cuda's buffers: 128-byte alignment (a few bytes a tensor above the CPU's 32), and flash
// attention over a q8_0 cache holds the layer's K and V converted to f16 beside its output:
// Llama-3.1-8B at 131,072 cells, 8 KV heads of 128, 256 MiB each, held at once with the
// output and the f16 mask, above the logits' stage where the CPU's rules peak.
#[test]
fn cuda_buffers_align_to_128_and_hold_flash_attentions_f16_copies() {
    let arch = crate::model::find_model("llama-3.1-8b")
        .expect("the catalog's Llama-3.1-8B")
        .arch;
    let q8 = crate::model::dtype::kv_precision("q8_0").expect("q8_0");
    let cells = 131_072;
    let (cpu_host, cpu) = one_device(&arch, &F16, BufferRules::CPU, cells);
    let (cuda_host, cuda) = one_device(&arch, &F16, BufferRules::CUDA, cells);
    assert_eq!(
        cpu_host, cuda_host,
        "the host's buffer is the CPU's either way"
    );
    assert!(cuda >= cpu && cuda - cpu < 1 << 20, "{cuda} vs {cpu}");
    let (_, cpu_q8) = one_device(&arch, &q8, BufferRules::CPU, cells);
    let (_, cuda_q8) = one_device(&arch, &q8, BufferRules::CUDA, cells);
    assert_eq!(
        cpu_q8, cpu,
        "the CPU's flash attention reads the q8_0 cache as it is"
    );
    let copies = 2 * cells * 8 * 128 * 2;
    let out = 512 * 4096 * 4;
    let mask = cells * 512 * 2;
    assert!(cuda_q8 >= copies + out + mask, "{cuda_q8}");
    assert!(cuda_q8 > cuda + copies / 2, "{cuda_q8} vs {cuda}");
}

// ggml-metal's flash attention reserves each layer's K and V in f16 beside its output,
// whatever the cache's type: Llama-3.1-8B at 131,072 cells, 512 MiB a layer.
#[test]
fn metal_flash_attention_reserves_k_and_v_in_f16() {
    let arch = crate::model::find_model("llama-3.1-8b")
        .expect("the catalog's Llama-3.1-8B")
        .arch;
    let cells = 131_072;
    let (_, cpu_fa) = one_device(&arch, &F16, BufferRules::CPU, cells);
    let (_, metal_fa) = one_device(&arch, &F16, BufferRules::METAL, cells);
    let f16 = 2 * cells * 8 * 128 * 2;
    let partials = 4 * 32 * 32 * 32 * 130;
    let out = 512 * 4096 * 4;
    let mask = cells * 512 * 2;
    assert!(metal_fa >= f16 + partials + out + mask, "{metal_fa}");
    assert!(metal_fa >= cpu_fa + f16 / 2, "{metal_fa} vs {cpu_fa}");
}

// ggml-metal's reordering of each split, replayed, against the compute buffers llama.cpp
// printed on Apple GPUs (`tests/fixtures/llamacpp-metal/public-logs.json`). Those builds
// predate its allocation dependencies, which are left out here; each equals the 0.01 MiB
// printed, and the reordering is what makes two of them (in graph order: 298.50 and 304.75).
#[test]
fn metal_reordering_gives_the_buffers_llama_cpp_printed_on_apple_gpus() {
    let doc: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../../tests/fixtures/llamacpp-metal/public-logs.json"
    ))
    .expect("the fixture");
    let before_deps = BufferRules {
        fusion_deps: graph::FusionDeps::None,
        ..BufferRules::METAL
    };
    let logs = doc["logs"].as_array().expect("logs");
    assert_eq!(logs.len(), 3);
    for log in logs {
        let name = log["catalog_model"].as_str().expect("a model");
        let arch = crate::model::find_model(name).expect("in the catalog").arch;
        let n = |k: &str| log[k].as_u64().expect(k);
        let (_, device) = on_one_device(
            &arch,
            (&F16, before_deps),
            (n("n_ctx"), n("n_ubatch")),
            (true, true),
        );
        let printed = format!("{:.2}", device as f64 / 1_048_576.0);
        let logged = format!("{:.2}", log["mtl0_compute_mib"].as_f64().expect("MiB"));
        assert_eq!(printed, logged, "{name}");
    }
}

/// A catalog model's prompt graph: 512 tokens over 4,096 cells, flash attention, f16 cache.
fn prompt_graph(model: &str) -> (ModelArch, Graph) {
    let arch = crate::model::find_model(model)
        .expect("a catalog model")
        .arch;
    let batch = Batch {
        arch: &arch,
        tokens: 512,
        kv_cells: 4096,
        swa_cells: 4096,
        flash_attention: true,
        kv_type: &F16,
        seqs: 1,
        parallel: 1,
        outputs: None,
    };
    let g = whole(Shape::from_batch(&batch).expect("replayed")).expect("replayed");
    (arch, g)
}

// ggml-vulkan's reordering of Llama-3.1-8B's first layer, as llama.cpp's Vulkan build printed
// it on lavapipe (every layer on the device, flash attention, 512 tokens): the three
// projections pulled together, each RoPE with its cache write, V's write ahead of Q's rope.
#[test]
fn vulkan_reorders_a_llama_layer_as_ggml_vulkan_does() {
    let (_, g) = prompt_graph("llama-3.1-8b");
    let start = g
        .nodes
        .iter()
        .position(|&n| g.tensors[n].op == Op::RmsNorm)
        .expect("a norm");
    let uses = super::reorder::use_counts(&g);
    let (order, kept) = super::reorder::reorder(&g, &g.nodes[start..], &uses);
    assert!(kept.is_empty(), "a dense layer keeps nothing alive");
    // ggml's names for the first 31 nodes after reordering; views of any kind are `E` but
    // where the reordering looks for a `VIEW`.
    use Op::{Add, Glu, Mul, MulMat, Other, Reshape, RmsNorm, Rope, SetRows, View};
    let e = Reshape;
    let ggml = [
        RmsNorm, Mul, MulMat, MulMat, MulMat, e, e, e, View, Rope, SetRows, View, e, View, e, Rope,
        View, SetRows, View, e, Other, e, MulMat, Add, RmsNorm, Mul, MulMat, MulMat, Glu, MulMat,
        Add,
    ];
    let ours: Vec<Op> = order[..ggml.len()]
        .iter()
        .map(|&n| g.tensors[n].op)
        .collect();
    for (i, (&want, &got)) in ggml.iter().zip(&ours).enumerate() {
        let same = want == got || (want == Reshape && got.is_empty());
        assert!(same, "node {i}: ggml {want:?}, replay {got:?}\n{ours:?}");
    }
    // The order is a permutation of the split.
    let mut sorted = order.clone();
    sorted.sort_unstable();
    let mut split = g.nodes[start..].to_vec();
    split.sort_unstable();
    assert_eq!(sorted, split);
}

// ggml-cuda's fused weighted sum of the experts is found in every MoE layer of Qwen3-30B-A3B
// (8 experts a token): the sum's last add keeps the experts' unweighted outputs (a
// `mul_mat_id`'s) and their router weights.
#[test]
fn cuda_keeps_each_layers_experts_until_their_sum() {
    let (arch, g) = prompt_graph("qwen3-30b-a3b");
    let mut deps = super::graph::Deps::new();
    let whole = std::iter::once(0..g.nodes.len()).collect::<Vec<_>>();
    super::sched::moe_sum_deps(&g, &whole, &mut deps);
    assert_eq!(u64::try_from(deps.len()).ok(), Some(arch.num_layers));
    for (&sum, kept) in &deps {
        assert_eq!(g.tensors[sum].op, Op::Add);
        assert_eq!(kept.len(), 2);
        assert_eq!(g.tensors[kept[0]].op, Op::MulMatId);
        assert!(g.tensors[kept[1]].bytes < g.tensors[kept[0]].bytes);
    }
    // On the host (no fused kernel) nothing is kept.
    let mut none = super::graph::Deps::new();
    super::sched::moe_sum_deps(&g, &[], &mut none);
    assert!(none.is_empty());
}

// MiniMax-M3's sparse attention is replayed a stream at a time, as llama.cpp loops over the
// streams; several sequences in one cache (`--kv-unified`) attend densely, as without flash
// attention (the exact bytes: tests/fixtures/llamacpp-devices/minimax-m3-layout-*-cpu.json).
#[test]
fn minimax_m3_sparse_attention_is_replayed_a_stream_at_a_time() {
    let arch = crate::model::find_model("minimax-m3").unwrap().arch;
    let kv = crate::model::dtype::KV_F16;
    let buffer = |(seqs, parallel): (u64, u64), flash_attention: bool| {
        compute_buffer_of(&Batch {
            arch: &arch,
            tokens: 512,
            kv_cells: 4096,
            swa_cells: 4096,
            flash_attention,
            kv_type: &kv,
            seqs,
            parallel,
            outputs: None,
        })
    };
    assert!(buffer((1, 1), true).is_some());
    assert!(buffer((2, 2), false).is_some());
    let streams = buffer((2, 2), true);
    assert!(streams.is_some());
    assert_ne!(streams, buffer((1, 1), true));
    assert!(buffer((1, 2), true).is_some());
}
