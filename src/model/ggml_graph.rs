//! llama.cpp's compute buffer by replay: the prompt graph llama.cpp reserves, built node by node
//! as its graph builder does, and placed by a model of ggml's graph allocator (`ggml-alloc.c`:
//! inputs first, tensors in graph order, parents freed after their last consumer, in-place
//! reuse of a sole consumer's parent, best fit over the free blocks with the last block
//! growing the buffer). The buffer is the highest offset any tensor reaches.
//!
//! Where llama.cpp's graph for an architecture is modelled here, the figure is llama.cpp's own
//! to the byte (CPU backend, 32-byte alignment: `tests/fixtures/llamacpp/`); elsewhere
//! [`compute_buffer`] returns `None` and the estimate falls back to its stage formulas.

use super::arch::{Attention, Mlp, ModelArch, Moe, Norm, Ssm, SsmKind};
use super::dtype::Precision;

fn sat(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Past 256 TiB a tensor fits no device: shapes with one are not replayed (the stage formulas,
/// which saturate, answer then), so the offsets here stay far from overflow.
const MOST: u64 = 1 << 48;

/// The CPU backend's tensor alignment (`TENSOR_ALIGNMENT`).
const ALIGNMENT: u64 = 32;

// Distinct layouts for the in-place check (only same-shaped tensors share memory).
const MODEL: u64 = 1;
const QUERY: u64 = 2;
const KV: u64 = 3;
const FFN: u64 = 4;
const SCORES: u64 = 5;
const Q3: u64 = 6;
const K3: u64 = 7;
const OTHER: u64 = 8;
const ROUTER: u64 = 9;
const ROUTER_IDS: u64 = 10;
const WEIGHTS: u64 = 11;
const SUMS: u64 = 12;
const EXPERT_FFN: u64 = 13;
const EXPERT_OUT: u64 = 14;
const LATENT: u64 = 15;
const INNER: u64 = 16;

const INPUT_LAYOUT: u64 = u64::MAX;

/// What the allocator needs to know of an op: whether ggml may compute it in its first
/// parent's memory (`ggml_op_can_inplace`), or whether it is only a view of another tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A leaf: an input the allocator places (tokens, positions, masks), or memory it does not
    /// own (weights, the KV cache).
    Leaf,
    /// An op that may reuse a parent's memory (add, mul, rms_norm, rope, soft_max, …).
    InPlace,
    /// An op that always gets memory of its own (mul_mat, get_rows, flash attention, …).
    Fresh,
    /// A view, reshape, permute or set_rows result: memory of `view_src`.
    View,
}

#[derive(Debug, Clone)]
struct Tensor {
    kind: Kind,
    bytes: u64,
    /// Shape tag: tensors may share memory in place only when their layouts agree.
    layout: u64,
    srcs: Vec<usize>,
    view_src: Option<usize>,
    input: bool,
    output: bool,
    /// Weights and the KV cache: allocated elsewhere.
    external: bool,
}

/// A computation graph in llama.cpp's evaluation order.
#[derive(Debug, Default)]
struct Graph {
    tensors: Vec<Tensor>,
    nodes: Vec<usize>,
    leafs: Vec<usize>,
    seen: Vec<bool>,
}

impl Graph {
    fn push(&mut self, t: Tensor) -> usize {
        self.tensors.push(t);
        self.seen.push(false);
        self.tensors.len() - 1
    }

    /// Memory the allocator does not place (a weight or the KV cache).
    fn external(&mut self) -> usize {
        self.push(Tensor {
            kind: Kind::Leaf,
            bytes: 0,
            layout: 0,
            srcs: Vec::new(),
            view_src: None,
            input: false,
            output: false,
            external: true,
        })
    }

    fn input(&mut self, bytes: u64) -> usize {
        self.push(Tensor {
            kind: Kind::Leaf,
            bytes,
            // Inputs never share memory in place with the ops' outputs.
            layout: INPUT_LAYOUT,
            srcs: Vec::new(),
            view_src: None,
            input: true,
            output: false,
            external: false,
        })
    }

    fn op(&mut self, kind: Kind, bytes: u64, layout: u64, srcs: &[usize]) -> usize {
        self.push(Tensor {
            kind,
            bytes,
            layout,
            srcs: srcs.to_vec(),
            view_src: None,
            input: false,
            output: false,
            external: false,
        })
    }

    /// A view of `src` (of its own source when `src` is itself a view, as ggml records it).
    fn view(&mut self, src: usize, layout: u64) -> usize {
        let root = self.tensors[src].view_src.unwrap_or(src);
        let bytes = self.tensors[src].bytes;
        self.push(Tensor {
            kind: Kind::View,
            bytes,
            layout,
            srcs: vec![src],
            view_src: Some(root),
            input: false,
            output: false,
            external: self.tensors[root].external,
        })
    }

    /// `ggml_set_rows(dest, rows, indices)`: a view of `dest` whose sources are, as ggml orders
    /// them, the rows, the indices and `dest`.
    fn set_rows(&mut self, dest: usize, rows: usize, indices: usize) -> usize {
        self.write(dest, &[rows, indices, dest])
    }

    /// `ggml_cpy(src, dest)`: a view of `dest` that reads `src`.
    fn copy(&mut self, src: usize, dest: usize) -> usize {
        self.write(dest, &[src, dest])
    }

    /// An op that writes into `dest` (a view of it) from `srcs`.
    fn write(&mut self, dest: usize, srcs: &[usize]) -> usize {
        let root = self.tensors[dest].view_src.unwrap_or(dest);
        self.push(Tensor {
            kind: Kind::View,
            bytes: self.tensors[dest].bytes,
            layout: 0,
            srcs: srcs.to_vec(),
            view_src: Some(root),
            input: false,
            output: false,
            external: self.tensors[root].external,
        })
    }

    /// `ggml_build_forward_expand`: appends `t` and its unvisited ancestors, parents first.
    fn expand(&mut self, t: usize) {
        // Iterative depth-first post-order (a deep model's chain of layers would otherwise
        // recurse once per tensor).
        let mut stack = vec![(t, 0usize)];
        while let Some((i, next)) = stack.pop() {
            if next == 0 {
                if self.seen[i] {
                    continue;
                }
                self.seen[i] = true;
            }
            if let Some(&src) = self.tensors[i].srcs.get(next) {
                stack.push((i, next + 1));
                if !self.seen[src] {
                    stack.push((src, 0));
                }
                continue;
            }
            if self.tensors[i].kind == Kind::Leaf {
                self.leafs.push(i);
            } else {
                self.nodes.push(i);
            }
        }
    }
}

fn aligned(bytes: u64) -> u64 {
    bytes.div_ceil(ALIGNMENT) * ALIGNMENT
}

/// ggml's dynamic tensor allocator over one buffer: free blocks sorted by offset, the last one
/// unbounded.
#[derive(Debug)]
struct Blocks {
    free: Vec<(u64, u64)>,
    high: u64,
}

impl Blocks {
    fn new() -> Self {
        Blocks {
            free: vec![(0, u64::MAX / 2)],
            high: 0,
        }
    }

    fn alloc(&mut self, bytes: u64) -> u64 {
        let size = aligned(bytes);
        // Best fit among all blocks but the last; the last (which grows the buffer) otherwise.
        let last = self.free.len() - 1;
        let mut best = None;
        let mut best_size = u64::MAX;
        for (i, &(_, len)) in self.free[..last].iter().enumerate() {
            if len >= size && len <= best_size {
                best = Some(i);
                best_size = len;
            }
        }
        let i = best.unwrap_or(last);
        let offset = self.free[i].0;
        self.free[i].0 += size;
        self.free[i].1 -= size;
        if self.free[i].1 == 0 {
            self.free.remove(i);
        }
        self.high = self.high.max(offset + size);
        offset
    }

    fn release(&mut self, offset: u64, bytes: u64) {
        let size = aligned(bytes);
        for i in 0..self.free.len() {
            let (start, len) = self.free[i];
            if start + len == offset {
                self.free[i].1 += size;
                if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0
                {
                    self.free[i].1 += self.free[i + 1].1;
                    self.free.remove(i + 1);
                }
                return;
            }
            if offset + size == start {
                self.free[i].0 = offset;
                self.free[i].1 += size;
                if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == offset {
                    self.free[i - 1].1 += self.free[i].1;
                    self.free.remove(i);
                }
                return;
            }
        }
        let at = self.free.partition_point(|&(start, _)| start < offset);
        self.free.insert(at, (offset, size));
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Slot {
    allocated: bool,
    children: u32,
    views: u32,
    offset: u64,
}

/// One KV cache's graph inputs, and the scores its layers compute without flash attention.
#[derive(Debug, Clone, Copy)]
struct CacheInputs {
    k_idxs: usize,
    v_idxs: usize,
    mask: usize,
    scores: u64,
}

/// What one layer's attention reads besides Q, K and V.
struct AttentionStep {
    k_idxs: usize,
    v_idxs: usize,
    mask: usize,
    /// Bytes of the scores without flash attention.
    scores: u64,
    /// Bytes of the attention output.
    out: u64,
    /// Bytes of V copied out contiguous before the transposed cache takes it, where V is a view
    /// that is not.
    v_copy: Option<u64>,
    flash_attention: bool,
}

/// `build_attn` over a K and a V cache: Q, V and K evaluated in that order, K and V written to
/// their caches, then flash attention, or the scores, their softmax and the weighted sum of V
/// made contiguous. Returns the attention output.
fn attend(
    g: &mut Graph,
    [q, k, v]: [usize; 3],
    (k_cache, v_cache): (usize, usize),
    a: &AttentionStep,
) -> usize {
    g.expand(q);
    g.expand(v);
    g.expand(k);
    let k_rows = g.view(k, OTHER);
    let stored = g.set_rows(k_cache, k_rows, a.k_idxs);
    g.expand(stored);
    let stored = if a.flash_attention {
        let v_rows = g.view(v, OTHER);
        g.set_rows(v_cache, v_rows, a.v_idxs)
    } else {
        let v_2d = match a.v_copy {
            Some(bytes) => g.op(Kind::Fresh, bytes, OTHER, &[v]),
            None => g.view(v, OTHER),
        };
        let v_elems = g.view(v_2d, OTHER);
        let cache_elems = g.view(v_cache, OTHER);
        g.set_rows(cache_elems, v_elems, a.v_idxs)
    };
    g.expand(stored);
    let k_all = g.view(k_cache, OTHER);
    let v_all = g.view(v_cache, OTHER);
    let q4 = g.view(q, OTHER);
    let qp = g.view(q4, OTHER);
    let kp = g.view(k_all, OTHER);
    let vp = g.view(v_all, OTHER);
    if a.flash_attention {
        let o = g.op(Kind::Fresh, a.out, OTHER, &[qp, kp, vp, a.mask]);
        g.view(o, QUERY)
    } else {
        let kq = g.op(Kind::Fresh, a.scores, SCORES, &[kp, qp]);
        let kq = g.op(Kind::InPlace, a.scores, SCORES, &[kq, a.mask]);
        let kqv = g.op(Kind::Fresh, a.out, OTHER, &[vp, kq]);
        let permuted = g.view(kqv, OTHER);
        g.op(Kind::Fresh, a.out, QUERY, &[permuted])
    }
}

/// Tensor sizes of a routed feed-forward block.
struct Routed {
    k: u64,
    router: u64,
    weights: u64,
    sums: u64,
    expert_ffn: u64,
    /// The first projection's output: `expert_ffn`, or twice it where gate and up are fused.
    gate_up: u64,
    expert_out: u64,
    /// A shared expert's width (Llama 4, GLM-4.5, Qwen3-Next), 0 without one.
    shared: u64,
    /// The shared expert's output is scaled by a sigmoid gate of its own (Qwen3-Next).
    shared_gate: bool,
    /// The weights are scaled by an op of their own.
    scaled: bool,
    /// Routing within expert groups: the groups and how many a token uses.
    groups: Option<(u64, u64)>,
    /// Group-limited routing's tensors: two scores per group, one per group, and the kept
    /// groups' experts.
    group_pairs: u64,
    group_scores: u64,
    kept_scores: u64,
}

/// The buffer ggml's graph allocator reserves for `g` (`ggml_gallocr_reserve`).
fn reserve(g: &Graph) -> u64 {
    let mut blocks = Blocks::new();
    let mut slots = vec![Slot::default(); g.tensors.len()];
    let allocate = |i: usize, slots: &mut [Slot], blocks: &mut Blocks| {
        let t = &g.tensors[i];
        if t.external || slots[i].allocated || t.view_src.is_some() {
            return;
        }
        slots[i].allocated = true;
        if t.kind == Kind::InPlace {
            for &p in &t.srcs {
                let parent = &g.tensors[p];
                // Only memory the allocator placed itself (never a view's), never an output,
                // only of the same layout, and only when this op is the parent's last use.
                if !slots[p].allocated || parent.output || parent.layout != t.layout {
                    continue;
                }
                if slots[p].children == 1 && slots[p].views == 0 {
                    slots[i].offset = slots[p].offset;
                    slots[p].allocated = false;
                    if aligned(parent.bytes) > aligned(t.bytes) {
                        blocks.release(
                            slots[p].offset + aligned(t.bytes),
                            aligned(parent.bytes) - aligned(t.bytes),
                        );
                    }
                    return;
                }
            }
        }
        slots[i].offset = blocks.alloc(t.bytes);
    };
    for &leaf in &g.leafs {
        allocate(leaf, &mut slots, &mut blocks);
    }
    for &n in &g.nodes {
        if let Some(root) = g.tensors[n].view_src {
            slots[root].views += 1;
        }
        if g.tensors[n].input {
            allocate(n, &mut slots, &mut blocks);
        }
        for &s in &g.tensors[n].srcs {
            slots[s].children += 1;
            if g.tensors[s].input {
                allocate(s, &mut slots, &mut blocks);
            }
        }
    }
    for &n in &g.nodes {
        for &p in &g.tensors[n].srcs {
            allocate(p, &mut slots, &mut blocks);
        }
        allocate(n, &mut slots, &mut blocks);
        for &p in &g.tensors[n].srcs {
            slots[p].children -= 1;
            if slots[p].children != 0 || slots[p].views != 0 {
                continue;
            }
            match g.tensors[p].view_src {
                Some(root) => {
                    slots[root].views -= 1;
                    if slots[root].views == 0
                        && slots[root].children == 0
                        && slots[root].allocated
                        && !g.tensors[root].output
                    {
                        blocks.release(slots[root].offset, g.tensors[root].bytes);
                        slots[root].allocated = false;
                    }
                }
                None if slots[p].allocated && !g.tensors[p].output => {
                    blocks.release(slots[p].offset, g.tensors[p].bytes);
                    slots[p].allocated = false;
                }
                None => {}
            }
        }
    }
    blocks.high
}

/// Which of llama.cpp's graph builders an architecture runs, as far as the allocator sees it.
#[derive(Debug, Clone, Copy, Default)]
struct Builder {
    qkv_bias: bool,
    o_bias: bool,
    qk_norm: bool,
    /// gpt-oss (`openai-moe`): alternating sliding-window layers, a biased router whose
    /// weights are a softmax over the selected experts, biased experts, and the last hidden
    /// state kept as an output with the rows gathered after the last layer.
    oss: bool,
    /// Gemma: embeddings scaled by √width and the query scaled by an op of its own; in Gemma 2
    /// and 3, norms after attention and after the feed-forward block too.
    gemma: bool,
    /// Phi-3: one fused q/k/v projection (Q, K and V are views of it) with the query scaled by
    /// an op of its own, and one fused gate/up projection halved by SwiGLU.
    fused: bool,
    /// Llama 4: chunked attention in three layers of four, the fourth without RoPE and with
    /// its query scaled by a per-token temperature input; L2-normed q/k after RoPE; experts in
    /// every `layer_freq`-th layer with sigmoid weights applied to the input before the experts
    /// and a shared expert beside them.
    llama4: bool,
    /// Command R7B (`cohere2`): LayerNorm, attention and the feed-forward block side by side
    /// on one normed input, RoPE only in the sliding-window layers.
    cohere: bool,
    /// Falcon (`falcon`): Command R7B's side-by-side blocks with biased LayerNorms (a second one
    /// before attention in Falcon-40B's layout), fused q/k/v and a GELU MLP; attention's output
    /// joins the MLP's before the residual does.
    falcon: bool,
    /// StarCoder2 and GPT-NeoX (`starcoder2`, `gptneox`): biased LayerNorms, biased q/k/v (one
    /// fused projection in GPT-NeoX) and output, a biased GELU MLP; GPT-NeoX's MLP runs beside
    /// attention on a norm of its own unless `use_parallel_residual` is off.
    neox: bool,
    /// Q, K and V from one projection, viewed apart (Phi-3, Falcon, GPT-NeoX).
    fused_qkv: bool,
    /// GLM-4.5 (`glm4moe`): dense leading layers, then sigmoid-scored experts chosen with a
    /// per-expert correction bias, normalised (and maybe scaled) weights, and a shared expert.
    /// DeepSeek-V3's experts are routed the same way.
    glm: bool,
    /// DeepSeek-V2/V3 (`deepseek2`): multi-head latent attention, and DeepSeek-V2's softmax
    /// router whose weights are not normalised.
    mla: Option<Mla>,
    /// The recurrent mixer of the layers that have one.
    recurrent: Option<Ssm>,
    /// Attention without RoPE (Jamba).
    rope_free: bool,
    /// The residual is the first operand of both residual adds (Jamba's `add(inpL, cur)`),
    /// so they may take its memory first.
    residual_first: bool,
    /// The routed experts' top-k weights are used as gathered (DeepSeek-V2, Jamba).
    unnormalised: bool,
    /// A layer is one block (a mixer, attention, or a feed-forward block) and the residual
    /// (Mamba, Nemotron-H).
    one_block: bool,
    /// Attention and the mixer side by side on two norms of the layer's input, their sum added
    /// to the residual before the rows are gathered (Falcon-H1).
    parallel: bool,
    /// The final norm over every token is an output of its own (Nemotron-H's and
    /// Qwen3-Next's multi-token prediction seed), the output rows gathered after it.
    nextn: bool,
    /// Qwen3-Next's attention: one projection of twice the query width holding the query and
    /// a gate, the gate's sigmoid multiplied into the attention output before `wo`.
    gated_attention: bool,
    /// Qwen2-MoE (`qwen2moe`): top-k weights used as gathered, and the shared expert's gate a
    /// sigmoid computed as `silu(x) / x` (x read twice, so the SiLU gets memory of its own).
    qwen2_moe: bool,
}

/// Multi-head latent attention's widths, and whether the GGUF caches the latent (`absorbed`,
/// current conversions) or full per-head K and V (an unsplit `attn_kv_b`).
#[derive(Debug, Clone, Copy)]
struct Mla {
    q_lora: Option<u64>,
    kv_lora: u64,
    nope: u64,
    rope: u64,
    v: u64,
    absorbed: bool,
}

/// The decoder layouts llama.cpp builds with the graph modelled here (its `llama`, `qwen2`,
/// `qwen3`, `qwen3moe`, `qwen2moe`, `openai-moe`, `gemma`, `gemma2`, `gemma3`, `phi3`, `llama4`,
/// `cohere2`, `falcon`, `starcoder2`, `gptneox`, `glm4moe` and `deepseek2` builders; Mistral's
/// and Mixtral's GGUFs are `llama`): pre-norm attention with grouped K/V, optional q/k/v and
/// output biases, per-head q/k norms (Qwen3, Gemma 3), and a gated feed-forward or routed
/// experts (a GELU MLP in Falcon, StarCoder2 and GPT-NeoX).
fn modelled(arch: &ModelArch) -> Option<Builder> {
    if let Some(ssm) = arch.ssm {
        return recurrent(arch, ssm);
    }
    let deepseek = matches!(
        arch.family.as_str(),
        "deepseek2" | "deepseek_v2" | "deepseek_v3" | "kimi_k2"
    );
    let (qkv_bias, o_bias, qk_norm, mla) = match arch.attention {
        Attention::Standard {
            qkv_bias,
            o_bias,
            qk_norm,
        } => (qkv_bias, o_bias, qk_norm, None),
        Attention::Mla {
            q_lora_rank: q_lora,
            kv_lora_rank: kv_lora,
            qk_nope_head_dim: nope,
            qk_rope_head_dim: rope,
            v_head_dim: v,
        } if deepseek => {
            let absorbed = !arch.mla_full_cache;
            let mla = Mla {
                q_lora,
                kv_lora,
                nope,
                rope,
                v,
                absorbed,
            };
            (false, false, false, Some(mla))
        }
        Attention::Mla { .. } => return None,
    };
    let oss = matches!(arch.family.as_str(), "gpt-oss" | "gpt_oss");
    let gemma = matches!(
        arch.family.as_str(),
        "gemma" | "gemma2" | "gemma3" | "gemma3_text"
    );
    let fused = arch.family == "phi3";
    let llama4 = matches!(arch.family.as_str(), "llama4" | "llama4_text");
    let cohere = arch.family == "cohere2";
    let falcon = arch.family == "falcon";
    let neox = matches!(arch.family.as_str(), "starcoder2" | "gptneox" | "gpt_neox");
    let glm = matches!(arch.family.as_str(), "glm4moe" | "glm4_moe");
    let qwen2_moe = matches!(arch.family.as_str(), "qwen2moe" | "qwen2_moe");
    if arch.fused_projections != fused {
        return None;
    }
    let family_ok = match arch.family.as_str() {
        "llama" | "mistral" | "mixtral" | "qwen2" | "gemma2" => !qk_norm,
        "gemma" => !qk_norm && !qkv_bias && !o_bias && arch.sliding_window.is_none(),
        // A gated shared expert beside the routed ones in every layer.
        "qwen2moe" | "qwen2_moe" => {
            !qk_norm
                && arch.moe.as_ref().is_some_and(|m| {
                    m.shared_gate
                        && m.shared_intermediate > 0
                        && m.first_dense_layers == 0
                        && m.layer_freq <= 1
                })
        }
        "phi3" => !qk_norm && !qkv_bias && arch.moe.is_none() && arch.sliding_window.is_none(),
        "qwen3" | "qwen3moe" | "qwen3_moe" | "gemma3" | "gemma3_text" => qk_norm,
        "llama4" | "llama4_text" => !qk_norm && !qkv_bias && !o_bias,
        "cohere2" => !qk_norm && !qkv_bias && !o_bias && arch.moe.is_none(),
        "falcon" => {
            !qk_norm
                && !qkv_bias
                && !o_bias
                && arch.moe.is_none()
                && arch.parallel_attention
                && arch.mlp == Mlp::Plain
                && !arch.mlp_bias
        }
        "starcoder2" | "gptneox" | "gpt_neox" => {
            !qk_norm
                && qkv_bias
                && o_bias
                && arch.moe.is_none()
                && arch.mlp == Mlp::Plain
                && arch.mlp_bias
                && (arch.family != "starcoder2" || !arch.parallel_attention)
        }
        _ if deepseek => arch.moe.as_ref().is_some_and(|m| m.layer_freq <= 1),
        "glm4moe" | "glm4_moe" => {
            !o_bias
                && arch
                    .moe
                    .as_ref()
                    .is_some_and(|m| m.router_bias && m.layer_freq <= 1)
        }
        _ => oss && !qk_norm && arch.moe.is_some() && arch.sliding_window.is_some(),
    };
    // Gemma 2 and 3's four norms a layer (Gemma 1's two) and its separately scaled query, and
    // only Gemma's; Command R7B's one norm.
    let gemma_ok = if gemma {
        let norms = if arch.family == "gemma" { 2 } else { 4 };
        arch.norms_per_layer == norms && arch.query_prescaled && arch.moe.is_none()
    } else if cohere {
        arch.norms_per_layer == 1 && !arch.query_prescaled
    } else if falcon {
        (1..=2).contains(&arch.norms_per_layer) && !arch.query_prescaled
    } else {
        arch.norms_per_layer == 2 && !arch.query_prescaled
    };
    // Experts as llama.cpp's `build_moe_ffn` routes them for these builders: a router in every
    // layer, top-k weights, no shared expert; a routing bias only in gpt-oss's builder.
    let moe_ok = arch.moe.as_ref().is_none_or(|m| {
        (llama4
            || glm
            || deepseek
            || qwen2_moe
            || (m.shared_intermediate == 0 && m.first_dense_layers == 0 && m.layer_freq <= 1))
            && (oss || glm || deepseek || !m.router_bias)
            && (glm || deepseek || !m.scaled_weights)
            && (qwen2_moe || !m.shared_gate)
            && routable(m)
    });
    let plain = moe_ok
        && gemma_ok
        && arch.ssm.is_none()
        && (oss || gemma || llama4 || cohere || arch.sliding_window.is_none())
        && (falcon || neox || arch.mlp == Mlp::Gated)
        && (oss || neox || !arch.mlp_bias)
        // Command R7B's norm is a LayerNorm without a bias, which a GGUF cannot tell from an
        // RMSNorm: either is taken.
        && (cohere
            || if falcon || neox {
                arch.norm == Norm::Layer
            } else {
                arch.norm == Norm::Rms
            })
        && (oss || !arch.attention_sinks)
        && (falcon || neox || !arch.parallel_attention)
        && !arch.attn_output_gate
        && !arch.embedding_norm
        && arch.num_layers > 0
        && arch.num_heads > 0
        && arch.num_kv_heads > 0
        && arch.head_dim > 0;
    (family_ok && plain).then_some(Builder {
        qkv_bias,
        o_bias,
        qk_norm,
        oss,
        gemma,
        fused,
        llama4,
        cohere,
        falcon,
        neox,
        fused_qkv: fused || falcon || (neox && arch.family != "starcoder2"),
        glm: glm || (deepseek && arch.moe.as_ref().is_some_and(|m| m.router_bias)),
        mla,
        unnormalised: qwen2_moe
            || (mla.is_some() && !(arch.moe.as_ref().is_some_and(|m| m.router_bias))),
        qwen2_moe,
        ..Builder::default()
    })
}

/// The recurrent and hybrid layouts modelled here: llama.cpp's `mamba` (Mamba, FalconMamba,
/// Mamba-2), `jamba`, `nemotron_h` (and `nemotron_h_moe`), `falcon-h1`, `granitehybrid` and
/// `qwen3next` builders.
fn recurrent(arch: &ModelArch, ssm: Ssm) -> Option<Builder> {
    let sane = ssm.inner > 0
        && ssm.state > 0
        && ssm.dt_rank > 0
        && ssm.conv_kernel > 1
        && arch.num_layers > 0
        && !arch.embedding_norm
        && arch.norm == Norm::Rms;
    if !sane {
        return None;
    }
    match (arch.family.as_str(), ssm.kind) {
        ("mamba", SsmKind::Mamba) | ("mamba2", SsmKind::Mamba2) => (arch.attention_layer_count()
            == 0
            && arch.moe.is_none()
            && !arch.ffn_blocks_alone
            && arch.norms_per_layer == 1)
            .then_some(Builder {
                recurrent: Some(ssm),
                one_block: true,
                ..Builder::default()
            }),
        ("jamba", SsmKind::JambaMamba) => {
            let attention_ok =
                standard_attention(arch) && !arch.parallel_attention && !arch.ffn_blocks_alone;
            // llama.cpp's Jamba routes by softmax, top-k weights as gathered, no shared expert.
            let moe_ok = arch.moe.as_ref().is_none_or(|m| {
                m.shared_intermediate == 0
                    && !m.router_bias
                    && !m.shared_gate
                    && m.groups.0 <= 1
                    && routable(m)
            });
            (attention_ok && moe_ok && pre_norm_gated(arch)).then_some(Builder {
                recurrent: Some(ssm),
                rope_free: true,
                residual_first: true,
                unnormalised: true,
                ..Builder::default()
            })
        }
        ("nemotron_h" | "nemotron_h_moe", SsmKind::Mamba2) => {
            // Experts as Nemotron-H routes them: sigmoid scores with a correction bias,
            // normalised top-k weights, a squared-ReLU shared expert beside them.
            let moe_ok = arch
                .moe
                .as_ref()
                .is_none_or(|m| m.router_bias && !m.shared_gate && m.groups.0 <= 1 && routable(m));
            (standard_attention(arch)
                && moe_ok
                && arch.ffn_blocks_alone
                && arch.mlp == Mlp::Plain
                && !arch.mlp_bias
                && arch.norms_per_layer == 1)
                .then_some(Builder {
                    recurrent: Some(ssm),
                    rope_free: true,
                    one_block: true,
                    nextn: true,
                    glm: arch.moe.is_some(),
                    ..Builder::default()
                })
        }
        ("qwen3next" | "qwen3_next", SsmKind::GatedDeltaNet) => {
            // llama.cpp's fused gated-delta-net op needs key and value heads of one size, and
            // whole value heads per key head.
            let heads_ok = ssm.groups > 0
                && ssm.dt_rank % ssm.groups == 0
                && ssm.inner % ssm.dt_rank == 0
                && ssm.inner / ssm.dt_rank == ssm.state;
            let attention_ok = arch.attention
                == Attention::Standard {
                    qkv_bias: false,
                    o_bias: false,
                    qk_norm: true,
                }
                && arch.attn_output_gate
                && arch.num_heads > 0
                && arch.num_kv_heads > 0
                && arch.head_dim > 0
                && arch.sliding_window.is_none()
                && !arch.attention_sinks
                && !arch.fused_projections
                && !arch.parallel_attention
                && !arch.ffn_blocks_alone;
            // Softmax-routed experts in every layer, normalised top-k weights, and beside them
            // a shared expert scaled by a sigmoid gate of its own.
            let moe_ok = arch.moe.as_ref().is_none_or(|m| {
                m.shared_intermediate > 0
                    && m.shared_gate
                    && !m.router_bias
                    && m.groups.0 <= 1
                    && m.first_dense_layers == 0
                    && m.layer_freq <= 1
                    && routable(m)
            });
            (heads_ok && attention_ok && moe_ok && pre_norm_gated(arch)).then_some(Builder {
                recurrent: Some(ssm),
                qk_norm: true,
                gated_attention: true,
                nextn: true,
                ..Builder::default()
            })
        }
        ("granitehybrid" | "granitemoehybrid", SsmKind::Mamba2) => {
            // Granite-4.0-H: Jamba's layout with Mamba-2 mixers, RoPE unless the file turns it
            // off, and softmax-routed experts with normalised weights beside a plain shared one.
            let moe_ok = arch.moe.as_ref().is_none_or(|m| {
                !m.router_bias
                    && !m.shared_gate
                    && m.groups.0 <= 1
                    && m.first_dense_layers == 0
                    && m.layer_freq <= 1
                    && routable(m)
            });
            (standard_attention(arch)
                && !arch.parallel_attention
                && !arch.ffn_blocks_alone
                && moe_ok
                && pre_norm_gated(arch))
            .then_some(Builder {
                recurrent: Some(ssm),
                rope_free: arch.no_rope,
                ..Builder::default()
            })
        }
        ("falcon-h1", SsmKind::Mamba2) => (standard_attention(arch)
            && arch.parallel_attention
            && arch.moe.is_none()
            && arch.mlp == Mlp::Gated
            && !arch.mlp_bias
            && arch.norms_per_layer == 2)
            .then_some(Builder {
                recurrent: Some(ssm),
                parallel: true,
                ..Builder::default()
            }),
        _ => None,
    }
}

/// A layer of two pre-norms (before the mixer or attention, and before the feed-forward block),
/// a gated feed-forward block without biases, and no separately scaled query.
fn pre_norm_gated(arch: &ModelArch) -> bool {
    arch.mlp == Mlp::Gated && !arch.mlp_bias && arch.norms_per_layer == 2 && !arch.query_prescaled
}

/// Experts `build_moe_ffn` can route: a top-k within the expert count.
fn routable(m: &Moe) -> bool {
    m.experts > 0 && (1..=m.experts).contains(&m.experts_per_token)
}

/// Plain attention over a full cache: separate q/k/v projections without biases or norms.
fn standard_attention(arch: &ModelArch) -> bool {
    arch.attention
        == Attention::Standard {
            qkv_bias: false,
            o_bias: false,
            qk_norm: false,
        }
        && arch.num_heads > 0
        && arch.num_kv_heads > 0
        && arch.head_dim > 0
        && arch.sliding_window.is_none()
        && !arch.attn_output_gate
        && !arch.attention_sinks
        && !arch.fused_projections
}

/// The recurrent state's graph inputs: which cached state each sequence reads (one sequence
/// here), and the rows past them (none).
#[derive(Debug, Clone, Copy)]
struct StateInputs {
    main: usize,
    extra: usize,
}

/// `build_rs`: the states of one layer's cache `all` cleared where new, read by `rows` (a `get_rows`, or Mamba's scan), and the rows of
/// sequences not in the batch copied back (none here).
fn read_states(
    g: &mut Graph,
    all: usize,
    inputs: StateInputs,
    rows: impl FnOnce(&mut Graph, usize, usize) -> usize,
) -> usize {
    let states = g.view(all, OTHER);
    let zero = g.view(states, OTHER);
    let cleared = g.view(zero, OTHER);
    g.expand(cleared);
    let out = rows(g, states, inputs.main);
    g.expand(out);
    let extra = g.op(Kind::Fresh, 0, OTHER, &[states, inputs.extra]);
    let dest = g.view(all, OTHER);
    let copied = g.copy(extra, dest);
    g.expand(copied);
    out
}

/// The convolution's input: the cached columns beside the new inputs (transposed), its last
/// `d_conv − 1` columns copied back into the layer's cache `conv_all`.
fn convolution_input(
    g: &mut Graph,
    (cached, new): (usize, usize),
    bytes: u64,
    conv_all: usize,
) -> usize {
    let transposed = g.view(new, OTHER);
    let conv_x = g.op(Kind::Fresh, bytes, OTHER, &[cached, transposed]);
    let last = g.view(conv_x, OTHER);
    let dest = g.view(conv_all, OTHER);
    let saved = g.copy(last, dest);
    g.expand(saved);
    conv_x
}

/// One Mamba mixer over `cur` (`tokens` tokens, one sequence), as llama.cpp's
/// `build_mamba_layer` (v1) and `build_mamba2_layer` build it: the in-projection (v1: x and z;
/// v2: z, x/B/C and Δ in one), the convolution over the cached and new inputs (its last
/// `d_conv − 1` columns written back), Δ, B and C (v1: projected from x, normed for Jamba and
/// FalconMamba; v2: views of the convolution's output and the projection), the selective scan
/// from the cached state (its final state written back), the skip term, the z gate, Mamba-2's
/// grouped norm where the model has one, and the out-projection. Returns the mixer's output.
fn mamba(
    g: &mut Graph,
    cur: usize,
    s: &Ssm,
    inputs: StateInputs,
    tokens: u64,
    model: u64,
) -> Option<usize> {
    let v2 = s.kind == SsmKind::Mamba2;
    let f32 = |elems: u64| elems.checked_mul(4);
    let width = |n: u64| f32(n.checked_mul(tokens)?);
    let inner = width(s.inner)?;
    let channels = u64::try_from(s.conv_channels()).ok()?;
    let past = s.conv_kernel - 1;
    let scan_out = f32(s
        .inner
        .checked_mul(tokens)?
        .checked_add(s.state.checked_mul(s.inner)?)?)?;
    let (conv_all, ssm_all) = (g.external(), g.external());
    let conv_state = f32(past.checked_mul(channels)?)?;
    // Mamba-2's in-projection (z, x/B/C and Δ), the widest per-token tensor of either kind.
    let in_proj = width(channels.checked_add(s.inner)?.checked_add(s.dt_rank)?)?;
    let conv_x_bytes = f32(past.checked_add(tokens)?.checked_mul(channels)?)?;
    if [conv_state, in_proj, conv_x_bytes, scan_out]
        .iter()
        .any(|&bytes| bytes > MOST)
    {
        return None;
    }
    let conv = read_states(g, conv_all, inputs, |g, states, ids| {
        g.op(Kind::Fresh, conv_state, OTHER, &[states, ids])
    });
    let conv = g.view(conv, OTHER);
    let w_in = g.external();
    // The projection's z, the convolution's input, and (Mamba-2) Δ.
    let (z, conv_in, dt) = if v2 {
        let zx = g.op(Kind::Fresh, in_proj, OTHER, &[w_in, cur]);
        let zx = g.view(zx, OTHER);
        let (z, xbc, dt) = (g.view(zx, OTHER), g.view(zx, OTHER), g.view(zx, OTHER));
        (z, xbc, Some(dt))
    } else {
        let cur = g.view(cur, OTHER);
        let xz = g.op(
            Kind::Fresh,
            width(s.inner.checked_mul(2)?)?,
            OTHER,
            &[w_in, cur],
        );
        let x = g.view(xz, OTHER);
        (g.view(xz, OTHER), x, None)
    };
    let conv_x = convolution_input(g, (conv, conv_in), conv_x_bytes, conv_all);
    let (w_conv, b) = (g.external(), g.external());
    let conv_out = width(channels)?;
    let layout = if v2 { OTHER } else { INNER };
    let x = g.op(Kind::Fresh, conv_out, layout, &[conv_x, w_conv]);
    let x = g.op(Kind::InPlace, conv_out, layout, &[x, b]);
    let x = g.op(Kind::InPlace, conv_out, layout, &[x]);
    let (scan_x, dt, bs, cs) = match dt {
        Some(dt) => {
            let (scan_x, bs, cs) = (g.view(x, OTHER), g.view(x, OTHER), g.view(x, OTHER));
            let heads = width(s.dt_rank)?;
            let dt = g.op(Kind::Fresh, heads, OTHER, &[dt]);
            let b = g.external();
            (scan_x, g.op(Kind::InPlace, heads, OTHER, &[dt, b]), bs, cs)
        }
        None => {
            let w_x = g.external();
            let dt_b_c = width(s.dt_rank.checked_add(s.state.checked_mul(2)?)?)?;
            let x_db = g.op(Kind::Fresh, dt_b_c, OTHER, &[w_x, x]);
            let (dt, bs, cs) = (
                g.view(x_db, OTHER),
                g.view(x_db, OTHER),
                g.view(x_db, OTHER),
            );
            // Jamba's norms carry weights, FalconMamba's do not; either way each is a tensor
            // of its own (a view's memory is never reused in place).
            let weighted = s.kind == SsmKind::JambaMamba;
            let (dt, bs, cs) = if weighted || s.norm {
                let norm = |g: &mut Graph, t: usize, bytes: u64| {
                    let n = g.op(Kind::InPlace, bytes, OTHER, &[t]);
                    if !weighted {
                        return n;
                    }
                    let w = g.external();
                    g.op(Kind::InPlace, bytes, OTHER, &[n, w])
                };
                let state = width(s.state)?;
                (
                    norm(g, dt, width(s.dt_rank)?),
                    norm(g, bs, state),
                    norm(g, cs, state),
                )
            } else {
                (g.op(Kind::Fresh, width(s.dt_rank)?, OTHER, &[dt]), bs, cs)
            };
            let (w_dt, b) = (g.external(), g.external());
            let dt = g.op(Kind::Fresh, inner, INNER, &[w_dt, dt]);
            let dt = g.op(Kind::InPlace, inner, INNER, &[dt, b]);
            (g.view(x, OTHER), dt, bs, cs)
        }
    };
    let a = g.external();
    let y_ssm = read_states(g, ssm_all, inputs, |g, states, ids| {
        let ssm = g.view(states, OTHER);
        g.op(
            Kind::Fresh,
            scan_out,
            OTHER,
            &[ssm, scan_x, dt, a, bs, cs, ids],
        )
    });
    let last_state = g.view(y_ssm, OTHER);
    let dest = g.view(ssm_all, OTHER);
    let saved = g.copy(last_state, dest);
    g.expand(saved);
    let y = g.view(y_ssm, INNER);
    let d = g.external();
    // Mamba scales its own x (in place); Mamba-2 a view of the convolution's output.
    let skip_of = if v2 { scan_x } else { x };
    let skip = g.op(Kind::InPlace, inner, INNER, &[skip_of, d]);
    let y = g.op(Kind::InPlace, inner, INNER, &[y, skip]);
    let z = g.op(Kind::Fresh, inner, INNER, &[z]);
    let mut y = g.op(Kind::Fresh, inner, INNER, &[z, y]);
    if v2 && s.norm {
        let grouped = g.view(y, OTHER);
        let n = g.op(Kind::InPlace, inner, INNER, &[grouped]);
        let w = g.external();
        y = g.op(Kind::InPlace, inner, INNER, &[n, w]);
    }
    let w_out = g.external();
    if v2 {
        let y = g.view(y, OTHER);
        Some(g.op(Kind::Fresh, model, MODEL, &[w_out, y]))
    } else {
        let out = g.op(Kind::Fresh, model, MODEL, &[w_out, y]);
        Some(g.view(out, MODEL))
    }
}

/// One gated DeltaNet mixer over `cur` (`tokens` tokens, one sequence), as llama.cpp's
/// `qwen3next` builder makes it with the fused gated-delta-net op its CPU backend runs: q, k
/// and v (and the output gate z) projected, either by one matrix whose parts are copied out
/// (`joint`, older GGUFs) or by two; β and α projected, β's sigmoid and α's softplus-scaled
/// decay; the convolution over the cached and new inputs (its last `d_conv − 1` columns
/// written back) and its SiLU; q and k L2-normed, repeated to the value heads where there are
/// fewer; the delta rule from the cached state (its output beside the final state, which is
/// written back); the gated norm with z, and the out-projection.
fn delta_net(
    g: &mut Graph,
    cur: usize,
    s: &Ssm,
    inputs: StateInputs,
    tokens: u64,
    (model, joint): (u64, bool),
) -> Option<usize> {
    let f32 = |elems: u64| elems.checked_mul(4);
    let width = |n: u64| f32(n.checked_mul(tokens)?);
    let (head, key_heads, value_heads) = (s.state, s.groups, s.dt_rank);
    let key = width(head.checked_mul(key_heads)?)?;
    let value = width(s.inner)?;
    let channels = head
        .checked_mul(key_heads)?
        .checked_mul(2)?
        .checked_add(s.inner)?;
    let past = s.conv_kernel - 1;
    let conv_state = f32(past.checked_mul(channels)?)?;
    let conv_x_bytes = f32(past.checked_add(tokens)?.checked_mul(channels)?)?;
    let repeated = width(head.checked_mul(value_heads)?)?;
    let state = f32(head.checked_mul(s.inner)?)?;
    // The op's output: every token's value rows, then the final state.
    let delta_out = f32(s.inner.checked_mul(tokens.checked_add(head)?)?)?;
    let qkvz = width(channels.checked_add(s.inner)?)?;
    if [conv_x_bytes, qkvz, delta_out, state, repeated]
        .iter()
        .any(|&bytes| bytes > MOST)
    {
        return None;
    }
    // The builder expands the layer's normed input before anything else (the Mamba builders
    // read their states first).
    g.expand(cur);
    let (conv_all, ssm_all) = (g.external(), g.external());
    let conv = read_states(g, conv_all, inputs, |g, states, ids| {
        g.op(Kind::Fresh, conv_state, OTHER, &[states, ids])
    });
    let conv = g.view(conv, OTHER);
    let (mixed, z) = if joint {
        let w = g.external();
        let qkvz = g.op(Kind::Fresh, qkvz, OTHER, &[w, cur]);
        let parts = g.view(qkvz, OTHER);
        let mut copy = |bytes: u64| {
            let part = g.view(parts, OTHER);
            g.op(Kind::Fresh, bytes, OTHER, &[part])
        };
        let (q, k) = (copy(key), copy(key));
        let v = copy(value);
        let z = copy(value);
        let qk = g.op(Kind::Fresh, key.checked_mul(2)?, OTHER, &[q, k]);
        (g.op(Kind::Fresh, width(channels)?, OTHER, &[qk, v]), z)
    } else {
        let (w, wz) = (g.external(), g.external());
        let qkv = g.op(Kind::Fresh, width(channels)?, OTHER, &[w, cur]);
        (
            g.view(qkv, OTHER),
            g.op(Kind::Fresh, value, OTHER, &[wz, cur]),
        )
    };
    let w_ba = g.external();
    let ba = g.op(
        Kind::Fresh,
        width(value_heads.checked_mul(2)?)?,
        OTHER,
        &[w_ba, cur],
    );
    let ba = g.view(ba, OTHER);
    let (b, a) = (g.view(ba, OTHER), g.view(ba, OTHER));
    let heads = width(value_heads)?;
    let b = g.op(Kind::Fresh, heads, OTHER, &[b]);
    let beta = g.op(Kind::InPlace, heads, OTHER, &[b]);
    let alpha = g.op(Kind::Fresh, heads, OTHER, &[a]);
    let dt_bias = g.external();
    let alpha = g.op(Kind::InPlace, heads, OTHER, &[alpha, dt_bias]);
    let alpha = g.op(Kind::InPlace, heads, OTHER, &[alpha]);
    let a_log = g.external();
    let decay = g.op(Kind::InPlace, heads, OTHER, &[alpha, a_log]);
    let (beta, decay) = (g.view(beta, OTHER), g.view(decay, OTHER));
    let conv_x = convolution_input(g, (conv, mixed), conv_x_bytes, conv_all);
    let cached = read_states(g, ssm_all, inputs, |g, states, ids| {
        g.op(Kind::Fresh, state, OTHER, &[states, ids])
    });
    let cached = g.view(cached, OTHER);
    let w_conv = g.external();
    let x = g.op(Kind::Fresh, width(channels)?, OTHER, &[conv_x, w_conv]);
    let x = g.op(Kind::InPlace, width(channels)?, OTHER, &[x]);
    // q and k: an RMS norm scaled to an L2 norm, then repeated to the value heads.
    let mut normed = || -> Option<usize> {
        let part = g.view(x, OTHER);
        let n = g.op(Kind::Fresh, key, OTHER, &[part]);
        let n = g.op(Kind::InPlace, key, OTHER, &[n]);
        if key_heads == value_heads {
            return Some(n);
        }
        let n = g.view(n, OTHER);
        let r = g.op(Kind::Fresh, repeated, OTHER, &[n]);
        Some(g.view(r, OTHER))
    };
    let (q, k) = (normed()?, normed()?);
    let v = g.view(x, OTHER);
    let out = g.op(
        Kind::Fresh,
        delta_out,
        OTHER,
        &[q, k, v, decay, beta, cached],
    );
    let last_state = g.view(out, OTHER);
    let dest = g.view(ssm_all, OTHER);
    let saved = g.copy(last_state, dest);
    g.expand(saved);
    let y = g.view(out, OTHER);
    let y = g.op(Kind::Fresh, value, INNER, &[y]);
    let w_norm = g.external();
    let y = g.op(Kind::InPlace, value, INNER, &[y, w_norm]);
    let z = g.view(z, OTHER);
    let z = g.op(Kind::Fresh, value, INNER, &[z]);
    let y = g.op(Kind::InPlace, value, INNER, &[y, z]);
    let y = g.view(y, OTHER);
    let w_out = g.external();
    let out = g.op(Kind::Fresh, model, MODEL, &[w_out, y]);
    Some(g.view(out, MODEL))
}

/// llama.cpp's CPU compute buffer for `arch`'s prompt graph of `tokens` tokens (every one an
/// output) over `kv_cells` cached cells (`swa_cells` in sliding-window layers), with or without
/// flash attention; `None` where the architecture's graph is not modelled here, or for shapes
/// no device could hold.
pub(crate) fn compute_buffer(
    arch: &ModelArch,
    tokens: u64,
    kv_cells: u64,
    swa_cells: u64,
    flash_attention: bool,
    kv_type: &Precision,
) -> Option<u64> {
    let Builder {
        qkv_bias,
        o_bias,
        qk_norm,
        oss,
        gemma,
        fused,
        llama4,
        cohere,
        falcon,
        neox,
        fused_qkv,
        glm,
        mla,
        recurrent,
        rope_free,
        residual_first,
        unnormalised,
        one_block,
        parallel,
        nextn,
        gated_attention,
        qwen2_moe,
    } = modelled(arch)?;
    // Squared-ReLU feed-forward blocks and experts without a gate (Nemotron-H).
    let plain = arch.mlp == Mlp::Plain;
    // Guards against shapes no device could hold; the estimate's own plausibility checks
    // refuse those first, so this is never the figure a user sees.
    if arch.num_layers > 4096 || tokens == 0 {
        return None;
    }
    let f32 = |elems: u64| elems.checked_mul(4);
    let h = arch.hidden_size;
    let q_dim = arch.num_heads.checked_mul(arch.head_dim)?;
    let kv_dim = arch.num_kv_heads.checked_mul(arch.head_dim)?;
    let width = |n: u64| f32(n.checked_mul(tokens)?);
    let model = width(h)?;
    let query = width(q_dim)?;
    let kv = width(kv_dim)?;
    let ffn = width(arch.intermediate_size)?;
    let logits = width(arch.vocab_size)?;
    let scores = |cells: u64| f32(cells.checked_mul(tokens)?.checked_mul(arch.num_heads)?);
    let scores = (scores(kv_cells)?, scores(swa_cells)?);
    let mask = |cells: u64| {
        cells
            .checked_mul(tokens)?
            .checked_mul(if flash_attention { 2 } else { 4 })
    };
    let mask = (mask(kv_cells)?, mask(swa_cells)?);
    if [
        model, query, kv, ffn, logits, scores.0, scores.1, mask.0, mask.1,
    ]
    .iter()
    .any(|&bytes| bytes > MOST)
    {
        return None;
    }

    let mut g = Graph::default();
    let ids = tokens.checked_mul(4)?;
    let tok_embd = g.external();
    let tokens_in = g.input(ids);
    let embd = g.op(Kind::Fresh, model, MODEL, &[tok_embd, tokens_in]);
    // The embeddings input (for a batch given as vectors) is reserved beside the token path
    // and has no consumer in a token batch, so it stays allocated for the whole graph.
    let embd_in = g.input(model);
    g.expand(embd);
    g.expand(embd_in);
    let pos = g.input(ids);
    // Each cache's inputs: the rows K and V are written to (without flash attention the V
    // cache is transposed and written element by element) and the KQ mask over its cells. A
    // model with sliding-window layers has a second cache, and a second set.
    let cache_inputs = |g: &mut Graph, mask: u64, scores: u64| -> Option<CacheInputs> {
        Some(CacheInputs {
            k_idxs: g.input(tokens.checked_mul(8)?),
            v_idxs: g.input(if flash_attention {
                tokens.checked_mul(8)?
            } else {
                kv.checked_mul(2)?
            }),
            mask: g.input(mask),
            scores,
        })
    };
    let full = cache_inputs(&mut g, mask.0, scores.0)?;
    let swa = cache_inputs(&mut g, mask.1, scores.1)?;
    let out_ids = g.input(ids);
    // The recurrent states' copy indices: one i32 per sequence, the rows past the batch's
    // sequences (none) a second view.
    let state_inputs = recurrent.map(|_| {
        let copy = g.input(4);
        StateInputs {
            main: g.view(copy, OTHER),
            extra: g.view(copy, OTHER),
        }
    });
    let norm = |g: &mut Graph, x: usize, bytes: u64, layout: u64| {
        // ggml computes RMSNorm in place where it can; LayerNorm (`ggml_norm`) never.
        let kind = if cohere || falcon || neox {
            Kind::Fresh
        } else {
            Kind::InPlace
        };
        let n = g.op(kind, bytes, layout, &[x]);
        let w = g.external();
        let n = g.op(Kind::InPlace, bytes, layout, &[n, w]);
        if !(falcon || neox) {
            return n;
        }
        let b = g.external();
        g.op(Kind::InPlace, bytes, layout, &[n, b])
    };
    // The routed feed-forward block (`build_moe_ffn`): router logits and their softmax, the
    // top-k experts by argsort, their weights gathered and normalised, each selected expert's
    // gate, up, SwiGLU and down projection, weighted, then summed expert by expert.
    let moe = match &arch.moe {
        None => None,
        Some(m) => {
            let k = m.experts_per_token;
            Some(Routed {
                k,
                router: width(m.experts)?,
                weights: width(k)?,
                sums: width(1)?,
                expert_ffn: width(m.expert_intermediate.checked_mul(k)?)?,
                gate_up: width(
                    m.expert_intermediate
                        .checked_mul(k)?
                        .checked_mul(if arch.fused_gate_up_exps { 2 } else { 1 })?,
                )?,
                expert_out: width(h.checked_mul(k)?)?,
                shared: width(m.shared_intermediate)?,
                shared_gate: m.shared_gate,
                scaled: m.scaled_weights,
                groups: match m.groups {
                    (groups, used) if groups > 1 => {
                        // llama.cpp refuses other layouts (GGML_ASSERT): not modelled.
                        if m.experts % groups != 0 || used == 0 || used >= groups {
                            return None;
                        }
                        Some((groups, used))
                    }
                    _ => None,
                },
                group_pairs: width(m.groups.0.checked_mul(2)?)?,
                group_scores: width(m.groups.0)?,
                kept_scores: width((m.experts / m.groups.0.max(1)).checked_mul(m.groups.1)?)?,
            })
        }
    };
    if let Some(m) = &moe {
        if [m.router, m.gate_up, m.expert_out]
            .iter()
            .any(|&b| b > MOST)
        {
            return None;
        }
    }
    let experts = |g: &mut Graph, cur: usize, m: &Routed| -> usize {
        let router = g.external();
        let mut logits = g.op(Kind::Fresh, m.router, ROUTER, &[router, cur]);
        let probs = if oss {
            // A biased router, its logits ranked as they are.
            let b = g.external();
            logits = g.op(Kind::InPlace, m.router, ROUTER, &[logits, b]);
            logits
        } else {
            // Softmax, or Llama 4's sigmoid.
            g.op(Kind::InPlace, m.router, ROUTER, &[logits])
        };
        // Llama 4 ranks the raw logits, GLM the scores plus a correction bias, the others what
        // the router made of them.
        let ranked = if llama4 {
            logits
        } else if glm {
            let b = g.external();
            g.op(Kind::InPlace, m.router, ROUTER, &[probs, b])
        } else {
            probs
        };
        let ranked = match m.groups {
            None => ranked,
            Some(_) => {
                // Group-limited routing: each group scored by its best two experts, the best
                // `used` groups kept, every other expert's score set to −∞.
                let by_group = g.view(ranked, OTHER);
                let order = g.op(Kind::Fresh, m.router, ROUTER_IDS, &[by_group]);
                let best_two = g.view(order, OTHER);
                let as_rows = g.view(by_group, OTHER);
                let picked = g.op(Kind::Fresh, m.group_pairs, OTHER, &[as_rows, best_two]);
                let picked = g.view(picked, OTHER);
                let group_scores = g.op(Kind::Fresh, m.group_scores, OTHER, &[picked]);
                let group_scores = g.view(group_scores, OTHER);
                let group_order = g.op(Kind::Fresh, m.group_scores, ROUTER_IDS, &[group_scores]);
                let kept = g.view(group_order, OTHER);
                let kept_scores = g.op(Kind::Fresh, m.kept_scores, OTHER, &[by_group, kept]);
                let masked = g.op(Kind::InPlace, m.router, ROUTER, &[by_group]);
                let merged = g.set_rows(masked, kept_scores, kept);
                g.view(merged, OTHER)
            }
        };
        let order = g.op(Kind::Fresh, m.router, ROUTER_IDS, &[ranked]);
        let selected = g.view(order, OTHER);
        let probs_3d = g.view(probs, OTHER);
        let weights = g.op(Kind::Fresh, m.weights, WEIGHTS, &[probs_3d, selected]);
        let weights_2d = g.view(weights, WEIGHTS);
        let weights = if llama4 || unnormalised {
            weights
        } else if oss {
            // Softmax over the selected experts' logits.
            g.op(Kind::InPlace, m.weights, WEIGHTS, &[weights_2d])
        } else {
            // Normalised to sum to one.
            let sum = g.op(Kind::Fresh, m.sums, SUMS, &[weights_2d]);
            let sum = g.op(Kind::InPlace, m.sums, SUMS, &[sum]);
            g.op(Kind::InPlace, m.weights, WEIGHTS, &[weights_2d, sum])
        };
        let mut weights = if llama4 || unnormalised {
            weights
        } else {
            g.view(weights, OTHER)
        };
        if m.scaled {
            weights = g.op(Kind::InPlace, m.weights, WEIGHTS, &[weights]);
        }
        g.expand(weights);
        let mut cur_3d = g.view(cur, OTHER);
        if llama4 {
            // The input repeated for each selected expert and weighted before the experts.
            let repeated = g.op(Kind::Fresh, m.expert_out, EXPERT_OUT, &[cur_3d]);
            cur_3d = g.op(
                Kind::InPlace,
                m.expert_out,
                EXPERT_OUT,
                &[repeated, weights],
            );
        }
        // `mul_mat_id`: an expert's weights applied to each token's selected experts.
        let per_expert = |g: &mut Graph, bytes: u64, layout: u64, x: usize| {
            let w = g.external();
            let y = g.op(Kind::Fresh, bytes, layout, &[w, x, selected]);
            if !oss {
                return y;
            }
            // Each expert's bias, added by expert id.
            let b = g.external();
            g.op(Kind::InPlace, bytes, layout, &[y, b, selected])
        };
        // With fused experts, gate and up are one tensor of twice the width.
        let up = per_expert(g, m.gate_up, EXPERT_FFN, cur_3d);
        let act = if plain {
            // Squared ReLU, in place.
            let relu = g.op(Kind::InPlace, m.expert_ffn, EXPERT_FFN, &[up]);
            g.op(Kind::InPlace, m.expert_ffn, EXPERT_FFN, &[relu])
        } else if arch.fused_gate_up_exps {
            let gate = g.view(up, EXPERT_FFN);
            let up = g.view(up, EXPERT_FFN);
            g.op(Kind::Fresh, m.expert_ffn, EXPERT_FFN, &[gate, up])
        } else {
            let gate = per_expert(g, m.expert_ffn, EXPERT_FFN, cur_3d);
            g.op(Kind::Fresh, m.expert_ffn, EXPERT_FFN, &[gate, up])
        };
        let mut out = per_expert(g, m.expert_out, EXPERT_OUT, act);
        if !llama4 {
            out = g.op(Kind::InPlace, m.expert_out, EXPERT_OUT, &[out, weights]);
        }
        g.expand(out);
        let each: Vec<usize> = (0..m.k).map(|_| g.view(out, MODEL)).collect();
        for &e in &each {
            g.expand(e);
        }
        let mut sum = each[0];
        for &e in &each[1..] {
            sum = g.op(Kind::InPlace, model, MODEL, &[sum, e]);
            g.expand(sum);
        }
        if m.k == 1 {
            sum = g.op(Kind::Fresh, model, MODEL, &[sum]);
        }
        sum
    };
    // A feed-forward block over `cur`: gated (or Phi-3's fused gate/up, or squared ReLU), or
    // routed experts with any shared expert beside them.
    let ffn_block = |g: &mut Graph, cur: usize, layer: u64| -> Option<usize> {
        let dense = |g: &mut Graph, width: u64| {
            if falcon || neox {
                // GELU between the projections, each biased in GPT-NeoX and StarCoder2.
                let bias = |g: &mut Graph, x: usize, bytes: u64, layout: u64| {
                    if !neox {
                        return x;
                    }
                    let b = g.external();
                    g.op(Kind::InPlace, bytes, layout, &[x, b])
                };
                let (wu, wd) = (g.external(), g.external());
                let up = g.op(Kind::Fresh, width, FFN, &[wu, cur]);
                let up = bias(g, up, width, FFN);
                let act = g.op(Kind::InPlace, width, FFN, &[up]);
                let down = g.op(Kind::Fresh, model, MODEL, &[wd, act]);
                return bias(g, down, model, MODEL);
            }
            if plain {
                let (wu, wd) = (g.external(), g.external());
                let up = g.op(Kind::Fresh, width, FFN, &[wu, cur]);
                let relu = g.op(Kind::InPlace, width, FFN, &[up]);
                let act = g.op(Kind::InPlace, width, FFN, &[relu]);
                return g.op(Kind::Fresh, model, MODEL, &[wd, act]);
            }
            let (wg, wu, wd) = (g.external(), g.external(), g.external());
            let gate = g.op(Kind::Fresh, width, FFN, &[wg, cur]);
            let up = g.op(Kind::Fresh, width, FFN, &[wu, cur]);
            let act = g.op(Kind::Fresh, width, FFN, &[gate, up]);
            g.op(Kind::Fresh, model, MODEL, &[wd, act])
        };
        Some(match moe.as_ref().filter(|_| arch.is_moe_layer(layer)) {
            None if fused => {
                let (wu, wd) = (g.external(), g.external());
                let gate_up = g.op(Kind::Fresh, ffn.checked_mul(2)?, OTHER, &[wu, cur]);
                let act = g.op(Kind::Fresh, ffn, FFN, &[gate_up]);
                g.op(Kind::Fresh, model, MODEL, &[wd, act])
            }
            None => dense(g, ffn),
            Some(m) if m.shared > 0 => {
                let routed = experts(g, cur, m);
                let mut shared = dense(g, m.shared);
                if m.shared_gate {
                    let w = g.external();
                    let x = g.op(Kind::Fresh, width(1)?, SUMS, &[w, cur]);
                    let gate = if qwen2_moe {
                        let silu = g.op(Kind::InPlace, width(1)?, SUMS, &[x]);
                        g.op(Kind::InPlace, width(1)?, SUMS, &[silu, x])
                    } else {
                        g.op(Kind::InPlace, width(1)?, SUMS, &[x])
                    };
                    shared = g.op(Kind::InPlace, model, MODEL, &[shared, gate]);
                }
                g.op(Kind::InPlace, model, MODEL, &[routed, shared])
            }
            Some(m) => experts(g, cur, m),
        })
    };
    let mut attn_scale = None;
    // The transposed V cache's per-element indices when they are wider than a grouped V
    // (DeepSeek's unsplit attn_kv_b caches every head's V).
    let mut full_v_idxs = None;
    let mut inp = embd;
    // Gemma's embeddings are scaled by √width, Granite's by its embedding multiplier.
    if gemma || arch.granite_scales.embedding {
        inp = g.op(Kind::InPlace, model, MODEL, &[embd]);
    }
    for layer in 0..arch.num_layers {
        let CacheInputs {
            k_idxs,
            v_idxs,
            mask: kq_mask,
            scores,
        } = if arch.is_sliding_layer(layer) {
            swa
        } else {
            full
        };
        let residual = inp;
        let normed = norm(&mut g, inp, model, MODEL);
        // Falcon-40B's layout attends on a second norm of the layer's input.
        let cur = if falcon && arch.norms_per_layer == 2 {
            norm(&mut g, inp, model, MODEL)
        } else {
            normed
        };
        let mixer = recurrent
            .zip(state_inputs)
            .filter(|_| arch.is_recurrent_layer(layer));
        let mut cur = if let Some((s, inputs)) = mixer.filter(|_| !parallel) {
            if s.kind == SsmKind::GatedDeltaNet {
                let shape = (model, arch.joint_qkvz);
                delta_net(&mut g, cur, &s, inputs, tokens, shape)?
            } else {
                mamba(&mut g, cur, &s, inputs, tokens, model)?
            }
        } else if one_block && !arch.has_attention(layer) {
            ffn_block(&mut g, cur, layer)?
        } else {
            let attended = if let Some(d) = mla {
                // DeepSeek's latent attention (`deepseek2` builder). Q, optionally through its own
                // low-rank projection and norm; the compressed K/V latent and the shared RoPE key
                // from one projection.
                let heads = arch.num_heads;
                let q_in = match d.q_lora {
                    Some(rank) => {
                        let wa = g.external();
                        let a = g.op(Kind::Fresh, width(rank)?, OTHER, &[wa, cur]);
                        norm(&mut g, a, width(rank)?, OTHER)
                    }
                    None => cur,
                };
                let wq = g.external();
                let q = g.op(
                    Kind::Fresh,
                    width(heads.checked_mul(d.nope + d.rope)?)?,
                    OTHER,
                    &[wq, q_in],
                );
                let q3 = g.view(q, OTHER);
                let w_kv_a = g.external();
                let kv_pe = g.op(
                    Kind::Fresh,
                    width(d.kv_lora + d.rope)?,
                    OTHER,
                    &[w_kv_a, cur],
                );
                let kv_cmpr = g.view(kv_pe, OTHER);
                let k_pe = g.view(kv_pe, OTHER);
                let k_pe = g.op(Kind::InPlace, width(d.rope)?, OTHER, &[k_pe, pos]);
                let kv_cmpr = norm(&mut g, kv_cmpr, width(d.kv_lora)?, LATENT);
                let (k_cache, v_cache) = (g.external(), g.external());
                if d.absorbed {
                    // The query's no-RoPE part absorbed into the latent per head, then the latent
                    // and RoPE parts side by side; the cache holds K only and V is a view of it.
                    let q_nope = g.view(q3, OTHER);
                    let q_pe = g.view(q3, OTHER);
                    let q_pe = g.op(
                        Kind::InPlace,
                        width(heads.checked_mul(d.rope)?)?,
                        OTHER,
                        &[q_pe, pos],
                    );
                    let q_nope = g.view(q_nope, OTHER);
                    let w_kb = g.external();
                    let absorbed = g.op(
                        Kind::Fresh,
                        width(heads.checked_mul(d.kv_lora)?)?,
                        OTHER,
                        &[w_kb, q_nope],
                    );
                    let absorbed = g.view(absorbed, OTHER);
                    let q = g.op(
                        Kind::Fresh,
                        width(heads.checked_mul(d.kv_lora + d.rope)?)?,
                        OTHER,
                        &[absorbed, q_pe],
                    );
                    let latent = g.view(kv_cmpr, OTHER);
                    let k = g.op(
                        Kind::Fresh,
                        width(d.kv_lora + d.rope)?,
                        OTHER,
                        &[latent, k_pe],
                    );
                    g.expand(q);
                    g.expand(latent);
                    g.expand(k);
                    let k_rows = g.view(k, OTHER);
                    let stored = g.set_rows(k_cache, k_rows, k_idxs);
                    g.expand(stored);
                    let k_all = g.view(k_cache, OTHER);
                    let v_all = g.view(k_all, OTHER);
                    let q4 = g.view(q, OTHER);
                    let qp = g.view(q4, OTHER);
                    let kp = g.view(k_all, OTHER);
                    let vp = g.view(v_all, OTHER);
                    let w_vb = g.external();
                    let per_head_v = width(heads.checked_mul(d.v)?)?;
                    let latent_out = width(heads.checked_mul(d.kv_lora)?)?;
                    if flash_attention {
                        let o = g.op(Kind::Fresh, latent_out, OTHER, &[qp, kp, vp, kq_mask]);
                        let o = g.view(o, OTHER);
                        let o = g.op(Kind::Fresh, per_head_v, OTHER, &[w_vb, o]);
                        let o = g.view(o, OTHER);
                        let o = g.op(Kind::Fresh, per_head_v, OTHER, &[o]);
                        g.view(o, QUERY)
                    } else {
                        // V is a view of the (untransposed) cache: copied out transposed, in the
                        // cache's own type.
                        let vt = g.view(vp, OTHER);
                        let v_copy = g.op(
                            Kind::Fresh,
                            sat(kv_type.bytes_for(u128::from(kv_cells) * u128::from(d.kv_lora))),
                            OTHER,
                            &[vt],
                        );
                        let kq = g.op(Kind::Fresh, scores, SCORES, &[kp, qp]);
                        let kq = g.op(Kind::InPlace, scores, SCORES, &[kq, kq_mask]);
                        let kqv = g.op(Kind::Fresh, latent_out, OTHER, &[v_copy, kq]);
                        let kqv = g.op(Kind::Fresh, per_head_v, OTHER, &[w_vb, kqv]);
                        let permuted = g.view(kqv, OTHER);
                        g.op(Kind::Fresh, per_head_v, QUERY, &[permuted])
                    }
                } else {
                    // An unsplit attn_kv_b: full per-head K and V decompressed and cached.
                    let k_dim = heads.checked_mul(d.nope + d.rope)?;
                    let v_dim = heads.checked_mul(d.v)?;
                    let w_kv_b = g.external();
                    let kv_full = g.op(
                        Kind::Fresh,
                        width(heads.checked_mul(d.nope + d.v)?)?,
                        OTHER,
                        &[w_kv_b, kv_cmpr],
                    );
                    let k_nope = g.view(kv_full, OTHER);
                    let v_view = g.view(kv_full, OTHER);
                    let v = g.op(Kind::Fresh, width(v_dim)?, OTHER, &[v_view]);
                    let q = g.op(Kind::InPlace, width(k_dim)?, OTHER, &[q3, pos]);
                    let k_pe_all = g.op(
                        Kind::Fresh,
                        width(heads.checked_mul(d.rope)?)?,
                        OTHER,
                        &[k_pe],
                    );
                    let k = g.op(Kind::Fresh, width(k_dim)?, OTHER, &[k_nope, k_pe_all]);
                    let v_idxs = if flash_attention {
                        v_idxs
                    } else {
                        *full_v_idxs.get_or_insert_with(|| {
                            g.input(v_dim.saturating_mul(tokens).saturating_mul(8))
                        })
                    };
                    let step = AttentionStep {
                        k_idxs,
                        v_idxs,
                        mask: kq_mask,
                        scores,
                        out: width(v_dim)?,
                        v_copy: None,
                        flash_attention,
                    };
                    attend(&mut g, [q, k, v], (k_cache, v_cache), &step)
                }
            } else {
                let project = |g: &mut Graph, bytes: u64, layout: u64| {
                    let w = g.external();
                    let mut t = g.op(Kind::Fresh, bytes, layout, &[w, cur]);
                    if qkv_bias {
                        let b = g.external();
                        t = g.op(Kind::InPlace, bytes, layout, &[t, b]);
                    }
                    t
                };
                // Qwen3-Next's query projection also holds the output gate.
                let mut q_and_gate = None;
                let (mut q, mut k, v) = if gated_attention {
                    let both = project(&mut g, query.checked_mul(2)?, OTHER);
                    q_and_gate = Some(both);
                    let q = g.view(both, OTHER);
                    let k = project(&mut g, kv, KV);
                    let v = project(&mut g, kv, KV);
                    (g.view(q, Q3), g.view(k, K3), g.view(v, OTHER))
                } else if fused_qkv {
                    let qkv = project(
                        &mut g,
                        width(q_dim.checked_add(kv_dim.checked_mul(2)?)?)?,
                        OTHER,
                    );
                    (g.view(qkv, Q3), g.view(qkv, K3), g.view(qkv, OTHER))
                } else {
                    let q = project(&mut g, query, QUERY);
                    let k = project(&mut g, kv, KV);
                    let v = project(&mut g, kv, KV);
                    (g.view(q, Q3), g.view(k, K3), g.view(v, OTHER))
                };
                if qk_norm {
                    q = norm(&mut g, q, query, Q3);
                    k = norm(&mut g, k, kv, K3);
                }
                // Command R7B's global layers, Jamba's and Nemotron-H's skip RoPE; Llama 4's global
                // layers skip it too and scale the query by a per-token temperature instead.
                let global = !arch.is_sliding_layer(layer);
                let (mut q, k) = if rope_free || (cohere && global) {
                    (q, k)
                } else if llama4 && global {
                    let scale = *attn_scale.get_or_insert_with(|| g.input(ids));
                    (g.op(Kind::InPlace, query, Q3, &[q, scale]), k)
                } else {
                    (
                        g.op(Kind::InPlace, query, Q3, &[q, pos]),
                        g.op(Kind::InPlace, kv, K3, &[k, pos]),
                    )
                };
                // Llama 4's L2 norms follow RoPE.
                let k = if llama4 && !global {
                    q = g.op(Kind::InPlace, query, Q3, &[q]);
                    g.op(Kind::InPlace, kv, K3, &[k])
                } else {
                    k
                };
                if gemma || fused {
                    q = g.op(Kind::InPlace, query, Q3, &[q]);
                }
                let step = AttentionStep {
                    k_idxs,
                    v_idxs,
                    mask: kq_mask,
                    scores,
                    out: query,
                    // A view into the fused projection is not contiguous: without flash attention
                    // (a transposed V cache) it is copied out first.
                    v_copy: fused_qkv.then_some(kv),
                    flash_attention,
                };
                let caches = (g.external(), g.external());
                let attended = attend(&mut g, [q, k, v], caches, &step);
                g.expand(attended);
                match q_and_gate {
                    Some(both) => {
                        let gate = g.view(both, OTHER);
                        let gate = g.op(Kind::Fresh, query, QUERY, &[gate]);
                        let gate = g.op(Kind::InPlace, query, QUERY, &[gate]);
                        g.op(Kind::InPlace, query, QUERY, &[attended, gate])
                    }
                    None => attended,
                }
            };
            g.expand(attended);
            let wo = g.external();
            let mut cur = g.op(Kind::Fresh, model, MODEL, &[wo, attended]);
            if o_bias {
                let b = g.external();
                cur = g.op(Kind::InPlace, model, MODEL, &[cur, b]);
            }
            cur
        };
        if cohere || falcon || (neox && arch.parallel_attention) {
            // The feed-forward block beside attention: on the same normed input (Command R7B,
            // Falcon) or on a norm of its own of the gathered input (GPT-NeoX's parallel
            // residual). The layer's output is that block's plus the residual and attention's
            // (Falcon adds attention's first, the others the residual), so attention's output
            // projection runs after the feed-forward block.
            let last = layer + 1 == arch.num_layers;
            let rows = |g: &mut Graph, x: usize| {
                if last {
                    g.op(Kind::Fresh, model, MODEL, &[x, out_ids])
                } else {
                    x
                }
            };
            let attn_out = rows(&mut g, cur);
            let residual = rows(&mut g, residual);
            let normed = if neox {
                norm(&mut g, residual, model, MODEL)
            } else {
                rows(&mut g, normed)
            };
            let out = ffn_block(&mut g, normed, layer)?;
            let (first, second) = if falcon {
                (attn_out, residual)
            } else {
                (residual, attn_out)
            };
            let sum = g.op(Kind::InPlace, model, MODEL, &[out, first]);
            inp = g.op(Kind::InPlace, model, MODEL, &[sum, second]);
            continue;
        }
        if let Some((s, inputs)) = mixer.filter(|_| parallel) {
            let normed = norm(&mut g, residual, model, MODEL);
            let mixed = mamba(&mut g, normed, &s, inputs, tokens, model)?;
            cur = g.op(Kind::InPlace, model, MODEL, &[cur, mixed]);
        }
        let last = layer + 1 == arch.num_layers;
        let mut residual = residual;
        if last && !oss && !nextn && !parallel {
            cur = g.op(Kind::Fresh, model, MODEL, &[cur, out_ids]);
            residual = g.op(Kind::Fresh, model, MODEL, &[residual, out_ids]);
        }
        // Granite scales each block's output before its residual add.
        if arch.granite_scales.residual {
            cur = g.op(Kind::InPlace, model, MODEL, &[cur]);
        }
        let post_norms = gemma && arch.norms_per_layer == 4;
        if post_norms {
            cur = norm(&mut g, cur, model, MODEL);
        }
        let mut ffn_inp = if residual_first {
            g.op(Kind::InPlace, model, MODEL, &[residual, cur])
        } else {
            g.op(Kind::InPlace, model, MODEL, &[cur, residual])
        };
        if one_block {
            inp = ffn_inp;
            continue;
        }
        if last && parallel {
            ffn_inp = g.op(Kind::Fresh, model, MODEL, &[ffn_inp, out_ids]);
        }
        let cur = norm(&mut g, ffn_inp, model, MODEL);
        let out = ffn_block(&mut g, cur, layer)?;
        let out = if post_norms {
            norm(&mut g, out, model, MODEL)
        } else if arch.granite_scales.residual {
            g.op(Kind::InPlace, model, MODEL, &[out])
        } else {
            out
        };
        // Phi-3 adds the residual first, so the add may take the residual's memory.
        inp = if fused || residual_first {
            g.op(Kind::InPlace, model, MODEL, &[ffn_inp, out])
        } else {
            g.op(Kind::InPlace, model, MODEL, &[out, ffn_inp])
        };
    }
    if oss {
        // The last hidden state is an output of its own (for multi-token prediction), and the
        // output rows are gathered after the last layer.
        g.tensors[inp].output = true;
        inp = g.op(Kind::Fresh, model, MODEL, &[inp, out_ids]);
    }
    let mut result_norm = norm(&mut g, inp, model, MODEL);
    if nextn {
        g.tensors[result_norm].output = true;
        result_norm = g.op(Kind::Fresh, model, MODEL, &[result_norm, out_ids]);
    }
    g.tensors[result_norm].output = true;
    let lm_head = g.external();
    let mut result = g.op(Kind::Fresh, logits, OTHER, &[lm_head, result_norm]);
    if arch.granite_scales.logits {
        result = g.op(Kind::InPlace, logits, OTHER, &[result]);
    }
    g.tensors[result].output = true;
    g.expand(result);
    Some(reserve(&g))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::llama_like;

    const F16: Precision = Precision {
        name: "f16",
        block_bytes: 2,
        block_elems: 1,
    };

    #[test]
    fn freed_neighbours_merge_and_best_fit_prefers_the_smallest_hole() {
        let mut b = Blocks::new();
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
        assert_eq!(b.free[0], (0, 96));
        assert_eq!(b.high, 192);
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
}
