//! Which of llama.cpp's graph builders an architecture runs, as far as the allocator sees it:
//! the flags the replay follows, or `None` where the architecture's graph is not modelled.

use crate::model::arch::{Attention, K3Layout, Mlp, ModelArch, Moe, Msa, Norm, Ssm, SsmKind};
use crate::model::Family;

/// Which of llama.cpp's graph builders an architecture runs, as far as the allocator sees it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Builder {
    pub(super) qkv_bias: bool,
    pub(super) o_bias: bool,
    pub(super) qk_norm: bool,
    /// gpt-oss (`openai-moe`): alternating sliding-window layers, a biased router whose
    /// weights are a softmax over the selected experts, biased experts, and the last hidden
    /// state kept as an output with the rows gathered after the last layer.
    pub(super) oss: bool,
    /// Gemma: embeddings scaled by √width and the query scaled by an op of its own; in Gemma 2
    /// and 3, norms after attention and after the feed-forward block too.
    pub(super) gemma: bool,
    /// Gemma 4 (`gemma4`): Gemma 3's layer without the query's scale op, V RMS-normed (without
    /// a weight) and in the full layers their K projection, each layer's output multiplied by
    /// a scalar, the full layers at heads of their own size and count.
    pub(super) gemma4: bool,
    /// Phi-3: one fused q/k/v projection (Q, K and V are views of it) with the query scaled by
    /// an op of its own, and one fused gate/up projection halved by SwiGLU.
    pub(super) fused: bool,
    /// Llama 4: chunked attention in three layers of four, the fourth without RoPE and with
    /// its query scaled by a per-token temperature input; L2-normed q/k after RoPE; experts in
    /// every `layer_freq`-th layer with sigmoid weights applied to the input before the experts
    /// and a shared expert beside them.
    pub(super) llama4: bool,
    /// Command R7B (`cohere2`): LayerNorm, attention and the feed-forward block side by side
    /// on one normed input, RoPE only in the sliding-window layers.
    pub(super) cohere: bool,
    /// Falcon (`falcon`): Command R7B's side-by-side blocks with biased LayerNorms (a second one
    /// before attention in Falcon-40B's layout), fused q/k/v and a GELU MLP; attention's output
    /// joins the MLP's before the residual does.
    pub(super) falcon: bool,
    /// StarCoder2 and GPT-NeoX (`starcoder2`, `gptneox`): biased LayerNorms, biased q/k/v (one
    /// fused projection in GPT-NeoX) and output, a biased GELU MLP; GPT-NeoX's MLP runs beside
    /// attention on a norm of its own unless `use_parallel_residual` is off.
    pub(super) neox: bool,
    /// Q, K and V from one projection, viewed apart (Phi-3, Falcon, GPT-NeoX).
    pub(super) fused_qkv: bool,
    /// GLM-4.5 (`glm4moe`): dense leading layers, then sigmoid-scored experts chosen with a
    /// per-expert correction bias, normalised (and maybe scaled) weights, and a shared expert.
    /// DeepSeek-V3's and MiniMax-M2's experts are routed the same way.
    pub(super) glm: bool,
    /// DeepSeek-V2/V3 (`deepseek2`): multi-head latent attention, and DeepSeek-V2's softmax
    /// router whose weights are not normalised.
    pub(super) mla: Option<Mla>,
    /// DeepSeek-V3.2's sparse attention (`deepseek32`): the lightning indexer's heads, key
    /// width and top-k, over an absorbed latent with a compressed query.
    pub(super) dsa: Option<crate::model::Indexer>,
    /// The recurrent mixer of the layers that have one.
    pub(super) recurrent: Option<Ssm>,
    /// Attention without RoPE (Jamba).
    pub(super) rope_free: bool,
    /// The residual is the first operand of both residual adds (Jamba's `add(inpL, cur)`),
    /// so they may take its memory first.
    pub(super) residual_first: bool,
    /// The routed experts' top-k weights are used as gathered (DeepSeek-V2, Jamba).
    pub(super) unnormalised: bool,
    /// A layer is one block (a mixer, attention, or a feed-forward block) and the residual
    /// (Mamba, Nemotron-H).
    pub(super) one_block: bool,
    /// Attention and the mixer side by side on two norms of the layer's input, their sum added
    /// to the residual before the rows are gathered (Falcon-H1).
    pub(super) parallel: bool,
    /// The final norm over every token is an output of its own (Nemotron-H's and
    /// Qwen3-Next's multi-token prediction seed), the output rows gathered after it.
    pub(super) nextn: bool,
    /// Qwen3-Next's attention: one projection of twice the query width holding the query and
    /// a gate, the gate's sigmoid multiplied into the attention output before `wo`.
    pub(super) gated_attention: bool,
    /// Qwen3.5 (`qwen35`, `qwen35moe`): interleaved multimodal RoPE, whose position input holds
    /// four positions a token; the gated DeltaNet's β and α from projections of their own, and
    /// its q and k broadcast to the value heads by the fused op rather than repeated. (Its
    /// attention gate is copied out before RoPE in the source, but ggml orders nodes by use,
    /// so the copy runs after attention as Qwen3-Next's does.)
    pub(super) qwen35: bool,
    /// Qwen2-MoE (`qwen2moe`): top-k weights used as gathered, and the shared expert's gate a
    /// sigmoid computed as `silu(x) / x` (x read twice, so the SiLU gets memory of its own).
    pub(super) qwen2_moe: bool,
    /// Kimi-K3 (`kimi-k3`): Kimi-Linear's layers with its residual attention, SiTU
    /// activations, latent experts, the latent attention's output gate and KDA's full-rank
    /// gate and bounded decay ([`super::kimi_k3`]).
    pub(super) k3: Option<K3Layout>,
    /// MiniMax-M3 (`minimax-m3`): MiniMax Sparse Attention in the expert layers under flash
    /// attention ([`super::msa`]); without it, or with several sequences in one cache
    /// (`--kv-unified`), every layer attends densely.
    pub(super) msa: Option<Msa>,
}

/// Multi-head latent attention's widths, and whether the GGUF caches the latent (`absorbed`,
/// current conversions) or full per-head K and V (an unsplit `attn_kv_b`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Mla {
    pub(super) q_lora: Option<u64>,
    pub(super) kv_lora: u64,
    pub(super) nope: u64,
    pub(super) rope: u64,
    pub(super) v: u64,
    pub(super) absorbed: bool,
}

/// The decoder layouts llama.cpp builds with the graph modelled here (its `llama`, `qwen2`,
/// `qwen3`, `qwen3moe`, `qwen2moe`, `openai-moe`, `gemma`, `gemma2`, `gemma3`, `phi3`, `llama4`,
/// `cohere2`, `falcon`, `starcoder2`, `gptneox`, `glm4moe`, `deepseek2`, `minimax-m2` and
/// `gemma4` builders; Mistral's and Mixtral's GGUFs are `llama`): pre-norm attention with grouped K/V,
/// optional q/k/v and output biases, per-head q/k norms (Qwen3, Gemma 3) or whole-width ones
/// (MiniMax-M2), and a gated feed-forward or routed experts (a GELU MLP in Falcon, StarCoder2
/// and GPT-NeoX).
pub(super) fn modelled(arch: &ModelArch) -> Option<Builder> {
    // Encoders are built by `encoder.rs`, from the arch's `Encoder` alone.
    if arch.encoder.is_some() {
        let ok = matches!(
            arch.family_kind(),
            Family::Bert | Family::NomicBert | Family::JinaBertV2
        ) && arch.moe.is_none()
            && arch.num_heads == arch.num_kv_heads;
        return ok.then_some(Builder::default());
    }
    // GLM-5-next's own graph (`glm5_next.rs`) reads its layout and its KDA mixer alone.
    if arch.glm5_next.is_some() {
        return Some(Builder::default());
    }
    if let Some(ssm) = arch.ssm {
        return recurrent(arch, ssm);
    }
    let family = arch.family_kind();
    // DeepSeek-V4's own graph (`deepseek4.rs`) reads its layout alone.
    if family == Family::DeepseekV4 {
        return arch.deepseek_v4.as_ref().map(|_| Builder::default());
    }
    let (qkv_bias, o_bias, qk_norm, mla) = attention_of(arch, family)?;
    let f = Flags::of(family);
    if arch.fused_projections != f.fused {
        return None;
    }
    // Whole-width q/k norms are MiniMax-M2's alone (its loader requires them).
    let ok = family_ok(arch, family, (qkv_bias, o_bias, qk_norm))
        && arch.qk_norm_full_width == (family == Family::MinimaxM2)
        && arch.full_attention.is_some() == f.gemma4
        && norms_ok(arch, family, &f)
        && moe_ok(arch, &f)
        && layout_ok(arch, &f)
        && dsa_ok(arch, mla);
    let router_bias = arch.moe.as_ref().is_some_and(|m| m.router_bias);
    ok.then_some(Builder {
        qkv_bias,
        o_bias,
        qk_norm,
        oss: f.oss,
        gemma: f.gemma,
        gemma4: f.gemma4,
        // Gemma 4's final norm over every token is an output of its own (the hidden state a
        // draft model reads), the output rows gathered after it (not its assistant's).
        nextn: f.gemma4 && family == Family::Gemma4,
        fused: f.fused,
        llama4: f.llama4,
        cohere: f.cohere,
        falcon: f.falcon,
        neox: f.neox,
        fused_qkv: f.fused || f.falcon || (f.neox && family != Family::Starcoder2),
        glm: f.glm || (f.deepseek && router_bias),
        mla,
        dsa: arch.indexer,
        unnormalised: f.qwen2_moe || (mla.is_some() && !router_bias),
        qwen2_moe: f.qwen2_moe,
        msa: arch.msa,
        ..Builder::default()
    })
}

/// Sparse attention as llama.cpp's `deepseek32` builds it: only over an absorbed latent with a
/// compressed query, and with an indexer key its Hadamard rotation covers whole (a power of
/// two from 64); DeepSeek-V3.2 and GLM-5 have an indexer and no other family does.
fn dsa_ok(arch: &ModelArch, mla: Option<Mla>) -> bool {
    let v32 = arch.family_kind().has_sparse_attention();
    match (arch.indexer, mla) {
        (None, _) => !v32,
        (Some(i), Some(m)) => {
            v32 && m.absorbed
                && m.q_lora.is_some()
                && i.heads > 0
                && i.top_k > 0
                && i.head_dim >= 64
                && i.head_dim.is_power_of_two()
        }
        (Some(_), None) => false,
    }
}

/// The attention's biases and q/k norm, and its latent widths where it is DeepSeek's; `None`
/// for latent attention in any other family.
fn attention_of(arch: &ModelArch, family: Family) -> Option<(bool, bool, bool, Option<Mla>)> {
    match arch.attention {
        Attention::Standard {
            qkv_bias,
            o_bias,
            qk_norm,
        } => Some((qkv_bias, o_bias, qk_norm, None)),
        Attention::Mla {
            q_lora_rank: q_lora,
            kv_lora_rank: kv_lora,
            qk_nope_head_dim: nope,
            qk_rope_head_dim: rope,
            v_head_dim: v,
        } if family.is_deepseek() => Some((
            false,
            false,
            false,
            Some(Mla {
                q_lora,
                kv_lora,
                nope,
                rope,
                v,
                absorbed: !arch.mla_full_cache,
            }),
        )),
        Attention::Mla { .. } => None,
    }
}

/// Which builder's ways a family takes.
struct Flags {
    oss: bool,
    gemma: bool,
    gemma4: bool,
    fused: bool,
    llama4: bool,
    cohere: bool,
    falcon: bool,
    neox: bool,
    glm: bool,
    deepseek: bool,
    qwen2_moe: bool,
}

impl Flags {
    fn of(family: Family) -> Self {
        Flags {
            oss: family == Family::GptOss,
            gemma: matches!(
                family,
                Family::Gemma
                    | Family::Gemma2
                    | Family::Gemma3
                    | Family::Gemma4
                    | Family::Gemma4Assistant
            ),
            gemma4: matches!(family, Family::Gemma4 | Family::Gemma4Assistant),
            fused: family == Family::Phi3,
            llama4: family == Family::Llama4,
            cohere: family == Family::Cohere2,
            falcon: family == Family::Falcon,
            neox: matches!(family, Family::Starcoder2 | Family::GptNeox),
            glm: matches!(
                family,
                Family::Glm4Moe | Family::MinimaxM2 | Family::MinimaxM3
            ),
            deepseek: family.is_deepseek(),
            qwen2_moe: family == Family::Qwen2Moe,
        }
    }
}

/// The attention biases, norms, experts and layouts each family's builder has.
fn family_ok(
    arch: &ModelArch,
    family: Family,
    (qkv_bias, o_bias, qk_norm): (bool, bool, bool),
) -> bool {
    let no_moe = arch.moe.is_none();
    match family {
        Family::Llama | Family::Mistral | Family::Mixtral | Family::Qwen2 | Family::Gemma2 => {
            !qk_norm
        }
        Family::Gemma => !qk_norm && !qkv_bias && !o_bias && arch.sliding_window.is_none(),
        // A gated shared expert beside the routed ones in every layer.
        Family::Qwen2Moe => {
            !qk_norm
                && arch.moe.as_ref().is_some_and(|m| {
                    m.shared_gate
                        && m.shared_intermediate > 0
                        && m.first_dense_layers == 0
                        && m.layer_freq <= 1
                })
        }
        Family::Phi3 => !qk_norm && !qkv_bias && no_moe && arch.sliding_window.is_none(),
        Family::Qwen3 | Family::Qwen3Moe | Family::Gemma3 => qk_norm,
        // Gemma 4: dense, or (26B-A4B) softmax-routed experts in every layer beside the dense
        // MLP, which is the shared expert's width.
        Family::Gemma4 | Family::Gemma4Assistant => {
            qk_norm
                && !qkv_bias
                && !o_bias
                && arch.moe.as_ref().is_none_or(|m| gemma4_moe_ok(arch, m))
        }
        Family::Llama4 => !qk_norm && !qkv_bias && !o_bias,
        Family::Cohere2 => !qk_norm && !qkv_bias && !o_bias && no_moe,
        Family::Falcon => {
            !qk_norm
                && !qkv_bias
                && !o_bias
                && no_moe
                && arch.parallel_attention
                && arch.mlp == Mlp::Plain
                && !arch.mlp_bias
        }
        Family::Starcoder2 | Family::GptNeox => {
            !qk_norm
                && qkv_bias
                && o_bias
                && no_moe
                && arch.mlp == Mlp::Plain
                && arch.mlp_bias
                && (family != Family::Starcoder2 || !arch.parallel_attention)
        }
        Family::DeepseekV2 | Family::DeepseekV3 | Family::DeepseekV32 | Family::GlmDsa => {
            arch.moe.as_ref().is_some_and(|m| m.layer_freq <= 1)
        }
        Family::Glm4Moe => {
            !o_bias
                && arch
                    .moe
                    .as_ref()
                    .is_some_and(|m| m.router_bias && m.layer_freq <= 1)
        }
        // MiniMax-M2: experts in every layer, chosen by sigmoid scores plus a correction bias,
        // no shared expert; its loader reads no weights scale (none is applied).
        Family::MinimaxM2 => {
            qk_norm && !qkv_bias && !o_bias && arch.moe.as_ref().is_some_and(minimax_m2_moe_ok)
        }
        // MiniMax-M3: per-head q/k norms, leading dense layers, then M2's routing with shared
        // experts beside; its sparse attention needs an indexer head a KV head (its loader's
        // assertion) and blocks of some cells.
        Family::MinimaxM3 => qk_norm && !qkv_bias && !o_bias && minimax_m3_ok(arch),
        _ => {
            family == Family::GptOss
                && !qk_norm
                && arch.moe.is_some()
                && arch.sliding_window.is_some()
        }
    }
}

/// Gemma 4 26B-A4B's experts: softmax-routed in every layer beside the dense MLP, which is the
/// shared expert's width.
fn gemma4_moe_ok(arch: &ModelArch, m: &Moe) -> bool {
    m.shared_intermediate == arch.intermediate_size
        && !m.router_bias
        && !m.shared_gate
        && !m.scaled_weights
        && m.groups.0 <= 1
        && m.first_dense_layers == 0
        && m.layer_freq <= 1
}

/// MiniMax-M2's experts: in every layer, sigmoid scores plus a correction bias, no shared
/// expert, no weights scale.
fn minimax_m2_moe_ok(m: &Moe) -> bool {
    m.router_bias
        && !m.scaled_weights
        && !m.shared_gate
        && m.shared_intermediate == 0
        && m.first_dense_layers == 0
        && m.layer_freq <= 1
}

/// MiniMax-M3's sparse attention (an indexer head a KV head, blocks of some cells) and its
/// experts (M2's routing with shared experts beside).
fn minimax_m3_ok(arch: &ModelArch) -> bool {
    arch.msa
        .is_some_and(|m| m.heads == arch.num_kv_heads && m.block > 0 && m.top_k_blocks > 0)
        && arch.moe.as_ref().is_some_and(|m| {
            m.router_bias && !m.shared_gate && m.shared_intermediate > 0 && m.layer_freq <= 1
        })
}

/// Gemma 2 and 3's four norms a layer (Gemma 1's two) and its separately scaled query (none in
/// Gemma 4), and only Gemma's; Command R7B's one norm; Falcon's one or two.
fn norms_ok(arch: &ModelArch, family: Family, f: &Flags) -> bool {
    if f.gemma {
        let norms = if family == Family::Gemma { 2 } else { 4 };
        arch.norms_per_layer == norms
            && arch.query_prescaled != f.gemma4
            && (arch.moe.is_none() || f.gemma4)
    } else if f.cohere {
        arch.norms_per_layer == 1 && !arch.query_prescaled
    } else if f.falcon {
        (1..=2).contains(&arch.norms_per_layer) && !arch.query_prescaled
    } else {
        arch.norms_per_layer == 2 && !arch.query_prescaled
    }
}

/// Experts as llama.cpp's `build_moe_ffn` routes them for these builders: a router in every
/// layer, top-k weights, no shared expert; a routing bias only in gpt-oss's builder.
fn moe_ok(arch: &ModelArch, f: &Flags) -> bool {
    arch.moe.as_ref().is_none_or(|m| {
        (f.llama4
            || f.glm
            || f.deepseek
            || f.qwen2_moe
            || f.gemma4
            || (m.shared_intermediate == 0 && m.first_dense_layers == 0 && m.layer_freq <= 1))
            && (f.oss || f.glm || f.deepseek || !m.router_bias)
            && (f.glm || f.deepseek || !m.scaled_weights)
            && (f.qwen2_moe || !m.shared_gate)
            && routable(m)
    })
}

/// The rest of the layout the builders share: no recurrent mixer, windows only where the
/// builder has them, the MLP, norms, sinks and parallel blocks each builder has, and a shape.
fn layout_ok(arch: &ModelArch, f: &Flags) -> bool {
    arch.ssm.is_none()
        && (f.oss || f.gemma || f.llama4 || f.cohere || arch.sliding_window.is_none())
        && (f.falcon || f.neox || arch.mlp == Mlp::Gated)
        && (f.oss || f.neox || !arch.mlp_bias)
        // Command R7B's norm is a LayerNorm without a bias, which a GGUF cannot tell from an
        // RMSNorm: either is taken.
        && (f.cohere
            || if f.falcon || f.neox {
                arch.norm == Norm::Layer
            } else {
                arch.norm == Norm::Rms
            })
        && (f.oss || !arch.attention_sinks)
        && (f.falcon || f.neox || !arch.parallel_attention)
        && !arch.attn_output_gate
        && !arch.embedding_norm
        && arch.num_layers > 0
        && arch.num_heads > 0
        && arch.num_kv_heads > 0
        && arch.head_dim > 0
}

/// The recurrent and hybrid layouts modelled here: llama.cpp's `mamba` (Mamba, FalconMamba,
/// Mamba-2), `jamba`, `nemotron_h` (and `nemotron_h_moe`), `falcon-h1`, `granitehybrid` and
/// `qwen3next`, `qwen35` and `qwen35moe` builders.
pub(super) fn recurrent(arch: &ModelArch, ssm: Ssm) -> Option<Builder> {
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
    match (arch.family_kind(), ssm.kind) {
        (Family::Mamba, SsmKind::Mamba) | (Family::Mamba2, SsmKind::Mamba2) => {
            (arch.attention_layer_count() == 0
                && arch.moe.is_none()
                && !arch.ffn_blocks_alone
                && arch.norms_per_layer == 1)
                .then_some(Builder {
                    recurrent: Some(ssm),
                    one_block: true,
                    ..Builder::default()
                })
        }
        (Family::Jamba, SsmKind::JambaMamba) => jamba(arch, ssm),
        (Family::NemotronH, SsmKind::Mamba2) => nemotron_h(arch, ssm),
        (Family::Qwen3Next, SsmKind::GatedDeltaNet) => qwen3_next(arch, ssm),
        (Family::Qwen35, SsmKind::GatedDeltaNet) if !arch.joint_qkvz => {
            qwen3_next(arch, ssm).map(|b| Builder { qwen35: true, ..b })
        }
        (Family::GraniteHybrid, SsmKind::Mamba2) => granite_hybrid(arch, ssm),
        (Family::KimiLinear, SsmKind::Kda) => kimi_linear(arch, ssm),
        (Family::KimiK3, SsmKind::Kda) => kimi_k3(arch, ssm),
        (Family::FalconH1, SsmKind::Mamba2) => falcon_h1(arch, ssm),
        _ => None,
    }
}

/// Jamba: Mamba mixers and attention without RoPE, the residual first in its adds.
fn jamba(arch: &ModelArch, ssm: Ssm) -> Option<Builder> {
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

/// Nemotron-H: one block a layer, squared-ReLU MLPs or experts.
fn nemotron_h(arch: &ModelArch, ssm: Ssm) -> Option<Builder> {
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

/// Qwen3-Next and Qwen3.5: Gated DeltaNet beside gated attention.
fn qwen3_next(arch: &ModelArch, ssm: Ssm) -> Option<Builder> {
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

/// Kimi-Linear: KDA beside latent attention without RoPE (its latent cached and absorbed, its
/// query projected directly), then DeepSeek-V3's experts (sigmoid scores with a correction
/// bias, normalised and scaled weights, a shared expert) after dense leading layers.
fn kimi_linear(arch: &ModelArch, ssm: Ssm) -> Option<Builder> {
    // llama.cpp's KDA runs the attention heads (`n_head`), each as wide for q, k and v.
    let heads_ok = ssm.groups == ssm.dt_rank
        && ssm.dt_rank == arch.num_heads
        && ssm.inner == ssm.dt_rank.saturating_mul(ssm.state)
        && ssm.state > 0;
    let mla = match arch.attention {
        Attention::Mla {
            q_lora_rank: None,
            kv_lora_rank: kv_lora,
            qk_nope_head_dim: nope,
            qk_rope_head_dim: rope,
            v_head_dim: v,
        } if !arch.mla_full_cache && kv_lora > 0 && v > 0 => Mla {
            q_lora: None,
            kv_lora,
            nope,
            rope,
            v,
            absorbed: true,
        },
        _ => return None,
    };
    let attention_ok = arch.num_heads > 0
        && arch.sliding_window.is_none()
        && !arch.attention_sinks
        && !arch.attn_output_gate
        && !arch.parallel_attention
        && !arch.ffn_blocks_alone;
    let moe_ok = arch.moe.as_ref().is_some_and(|m| {
        m.router_bias
            && !m.shared_gate
            && m.shared_intermediate > 0
            && m.groups.0 <= 1
            && m.layer_freq <= 1
            && routable(m)
    });
    (heads_ok && attention_ok && moe_ok && pre_norm_gated(arch)).then_some(Builder {
        recurrent: Some(ssm),
        mla: Some(mla),
        glm: true,
        rope_free: true,
        ..Builder::default()
    })
}

/// Kimi-K3: Kimi-Linear's builder with a compressed query where the file has one, and the
/// parts [`K3Layout`] names; its routed experts sigmoid-scored with a correction bias beside a
/// shared expert, as Kimi-Linear's.
fn kimi_k3(arch: &ModelArch, ssm: Ssm) -> Option<Builder> {
    let k3 = arch.kimi_k3?;
    // Kimi-Linear's checks, on the same layout without the compressed query.
    let mut probe = arch.clone();
    probe.kimi_k3 = None;
    let q_lora = match arch.attention {
        Attention::Mla {
            q_lora_rank,
            kv_lora_rank,
            qk_nope_head_dim,
            qk_rope_head_dim,
            v_head_dim,
        } => {
            probe.attention = Attention::Mla {
                q_lora_rank: None,
                kv_lora_rank,
                qk_nope_head_dim,
                qk_rope_head_dim,
                v_head_dim,
            };
            q_lora_rank
        }
        _ => return None,
    };
    let b = kimi_linear(&probe, ssm)?;
    Some(Builder {
        mla: b.mla.map(|m| Mla { q_lora, ..m }),
        k3: Some(k3),
        unnormalised: !k3.renormalize,
        ..b
    })
}

/// Granite-4.0-H.
fn granite_hybrid(arch: &ModelArch, ssm: Ssm) -> Option<Builder> {
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

/// Falcon-H1: attention and the mixer side by side, then a gated MLP.
fn falcon_h1(arch: &ModelArch, ssm: Ssm) -> Option<Builder> {
    (standard_attention(arch)
        && arch.parallel_attention
        && arch.moe.is_none()
        && arch.mlp == Mlp::Gated
        && !arch.mlp_bias
        && arch.norms_per_layer == 2)
        .then_some(Builder {
            recurrent: Some(ssm),
            parallel: true,
            ..Builder::default()
        })
}

/// A layer of two pre-norms (before the mixer or attention, and before the feed-forward block),
/// a gated feed-forward block without biases, and no separately scaled query.
pub(super) fn pre_norm_gated(arch: &ModelArch) -> bool {
    arch.mlp == Mlp::Gated && !arch.mlp_bias && arch.norms_per_layer == 2 && !arch.query_prescaled
}

/// Experts `build_moe_ffn` can route: a top-k within the expert count.
pub(super) fn routable(m: &Moe) -> bool {
    m.experts > 0 && (1..=m.experts).contains(&m.experts_per_token)
}

/// Plain attention over a full cache: separate q/k/v projections without biases or norms.
pub(super) fn standard_attention(arch: &ModelArch) -> bool {
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
