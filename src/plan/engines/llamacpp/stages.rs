//! The stage formulas, where llama.cpp's graph is not replayed: the buffer is the largest
//! stage's live tensors (the output head, attention, a recurrent mixer, the feed-forward block)
//! plus the graph inputs, each fitted to and checked against llama.cpp's own reports.

use crate::model::arch::{Attention, Mlp, ModelArch, SsmKind};
use crate::plan::engines::settings::Settings;

/// The stage formulas' common figures: llama.cpp's graph allocator reuses memory between
/// stages, so the buffer is the largest stage's live tensors plus the graph inputs.
#[derive(Clone, Copy)]
pub(super) struct Stages<'a> {
    arch: &'a ModelArch,
    flash_attention: bool,
    /// Tokens in the micro-batch.
    ub: u128,
    h: u128,
    heads: u128,
    q_dim: u128,
    /// KV cells (the context padded), and those the attention reads (the window where every
    /// layer slides).
    n_kv: u128,
    attended: u128,
    /// One hidden state of the wider of model and query (`hidden`) and of the model (`width`).
    hidden: u128,
    width: u128,
    /// The KQ mask(s).
    mask: u128,
    interleaved: bool,
    recurrent: u64,
    has_attention: bool,
    /// MLA's per-head width: the latent, or the value where the cache holds full K and V.
    mla: Option<u64>,
    small_mask_hole: bool,
}

impl<'a> Stages<'a> {
    pub(super) fn new(
        arch: &'a ModelArch,
        s: &Settings,
        ub: u128,
        n_kv: u128,
        swa_cells: u128,
    ) -> Self {
        let w = u128::from;
        let h = w(arch.hidden_size);
        let heads = w(arch.num_heads);
        let q_dim = heads * w(arch.head_dim);
        let sliding = arch.sliding_window.as_ref();
        let swa_layers = (0..arch.num_layers)
            .filter(|&i| arch.is_sliding_layer(i))
            .count() as u64;
        let all_sliding = sliding.is_some() && swa_layers == arch.num_layers;
        let interleaved = sliding.is_some() && swa_layers > 0 && !all_sliding;
        let attended = match sliding {
            Some(win) if all_sliding => n_kv.min(w(win.window) + ub),
            _ => n_kv,
        };
        let width = ub * h * 4;
        // The KQ mask (f32; f16 with flash attention), two with interleaved sliding windows,
        // the sliding layers' spanning their own cells (the window plus a micro-batch unless
        // --swa-full).
        let mask_bytes = if s.flash_attention { 2 } else { 4 };
        let mask = match sliding {
            Some(_) if interleaved => (n_kv + swa_cells) * ub * mask_bytes,
            _ => attended * ub * mask_bytes,
        };
        let mla = match &arch.attention {
            Attention::Mla {
                kv_lora_rank,
                v_head_dim,
                ..
            } => Some(if arch.mla_full_cache {
                *v_head_dim
            } else {
                *kv_lora_rank
            }),
            Attention::Standard { .. } => None,
        };
        Stages {
            arch,
            flash_attention: s.flash_attention,
            ub,
            h,
            heads,
            q_dim,
            n_kv,
            attended,
            hidden: ub * h.max(q_dim) * 4,
            width,
            mask,
            interleaved,
            recurrent: arch.recurrent_layer_count(),
            has_attention: arch.attention_layer_count() > 0,
            mla,
            small_mask_hole: arch.fused_projections && s.flash_attention && mask < width,
        }
    }

    /// Logits of every token of the micro-batch, with the final norm's output, its input and
    /// the residual (model width); and, where the attention is wider than the model in a model
    /// with experts or recurrent layers (GLM-4.5: 3×, Qwen3-MoE: 2×, Nemotron-H: 1.14×), a
    /// fourth model-width tensor that can stay below the logits (llama.cpp's report on
    /// GLM-4.5-Air's layout at 16384 tokens; never on the dense decoders measured, Qwen3-32B
    /// 1.6× wide and Gemma 2 9B 1.14×).
    pub(super) fn output(&self) -> u128 {
        let Stages {
            arch,
            ub,
            h,
            q_dim,
            width,
            mask,
            interleaved,
            recurrent,
            has_attention,
            mla,
            small_mask_hole,
            ..
        } = *self;
        let wide = matches!(arch.attention, Attention::Standard { .. })
            && q_dim > h
            && (arch.moe.is_some() || recurrent > 0);
        let output = ub * u128::from(arch.vocab_size) * 4 + if wide { 4 } else { 3 } * width;
        // Where llama.cpp's graph allocator puts the logits depends on what the layers left
        // behind. In a hybrid with experts the mask is first needed mid-graph and the logits land
        // above it (Qwen3-Next, Jamba, Nemotron-H's MoE layout; never in the hybrids without experts
        // measured: Granite-4.0-H's dense layout, Nemotron-H, Falcon-H1, at up to four contexts); with
        // interleaved sliding windows and experts they can land above both masks and three more
        // model-width tensors (gpt-oss with flash attention and Llama 4 without, at 4096 tokens; not
        // at 16384). Both are counted, so these models may come out above llama.cpp, never below.
        // Dense models with interleaved windows never showed it (Gemma 2's 2B, 9B and 27B shapes
        // at 4096 to 32768 tokens, Gemma 3's at 4096 and 16384, flash attention on and off): experts, as in the
        // hybrids, are what the measured placements have in common. Under MLA the logits can land
        // above eight model-width tensors (DeepSeek-V2's layout at 4096 tokens).
        if recurrent > 0 && has_attention && arch.moe.is_some() {
            output + mask
        } else if interleaved && arch.moe.is_some() {
            output + mask + 3 * width
        } else if small_mask_hole {
            // Phi-3's fused layout with flash attention: where the (f16) mask's hole is too small
            // for a model-width tensor, the last layer's tensors stack above it and the logits above
            // them, four model widths up (Phi-3-mini's and Phi-4-mini's shapes at 4096 tokens); at
            // 32768 the hole takes them and the logits sit two widths up.
            output + mask + width
        } else if mla.is_some() {
            output + 8 * width
        } else {
            output
        }
    }

    /// Attention: the scores (without flash attention), the masks, and the tensors live around
    /// them.
    pub(super) fn attention(&self) -> u128 {
        let Stages {
            arch,
            flash_attention,
            ub,
            h,
            heads,
            q_dim,
            attended,
            hidden,
            mask,
            recurrent,
            has_attention,
            mla,
            ..
        } = *self;
        let w = u128::from;
        // A hybrid's attention layers keep more model-width tensors live around the scores
        // (Qwen3-Next's gated attention needs 10.5 and 12 of them on two shapes, Granite-4.0-H and
        // Jamba eight of the wider width) besides this
        // micro-batch's K and V; a plain decoder three of the query width and three of the model's,
        // and so does a hybrid whose attention is a block of its own, with no feed-forward beside
        // it in the layer (Nemotron-H: 5.2 of the wider width measured, 5.6 counted), or that attends
        // beside its mixer (Falcon-H1: the layer's input, its normed copy and the mixer's output are
        // the model-width three; 4.24 model widths measured, 4.5 counted).
        // MLA adds two per-head tensors of the latent width (the absorbed query and the latent
        // output; of the value width when the cache holds full K and V) and two more hidden states.
        let standalone_attention =
            (0..arch.num_layers).any(|i| arch.has_attention(i) && !arch.has_ffn(i));
        let around = if recurrent > 0 && arch.attn_output_gate {
            (12 * h + 2 * w(arch.num_kv_heads) * w(arch.head_dim)) * ub * 4
        } else if recurrent > 0 && !standalone_attention && !arch.parallel_attention {
            8 * hidden
        } else if let (Some(width), false) = (mla, arch.mla_full_cache) {
            // The absorbed query and the latent output per head, and the query and model-width
            // states around them: 2.25 query widths and 3.25 model widths per token, fitted to
            // DeepSeek-V2's layout (16 heads) and DeepSeek-V3's shape (128 heads) at 16384 and 4096
            // tokens, where the stage shows with and without flash attention (eight widths of the
            // larger, counted before, came out 1.56× on V3's 128 heads).
            2 * ub * heads * w(width) * 4
                + ub * (9 * q_dim).div_ceil(4) * 4
                + ub * (13 * h).div_ceil(4) * 4
        } else if let Some(width) = mla {
            8 * hidden + 2 * ub * heads * w(width) * 4
        } else if arch.fused_projections {
            // The fused q/k/v output, the roped query and one model-width state (Phi-3-mini's
            // shape: 5 model widths; Phi-3-medium's, with grouped K and V: 3.5).
            ub * (2 * q_dim + 2 * w(arch.num_kv_heads) * w(arch.head_dim) + h) * 4
        } else {
            // Three hidden states of each width: query-sized ones (Q, the attention output) and
            // model-sized ones (the residual and normed input); a fourth of the query's width where
            // the query is scaled by an op of its own (Gemma 2's layout at 16384 tokens without
            // flash attention: 4 query and 3 model widths beside the scores and masks).
            let q_states = if arch.query_prescaled { 4 } else { 3 };
            ub * (q_states * q_dim + 3 * h) * 4
        };
        if !has_attention {
            0
        } else if flash_attention {
            mask + around
        } else {
            heads * attended * ub * 4 + mask + around
        }
    }

    /// The recurrent mixer's stage.
    pub(super) fn mixer(&self) -> u128 {
        let Stages {
            arch,
            ub,
            n_kv,
            hidden,
            recurrent,
            has_attention,
            ..
        } = *self;
        let w = u128::from;
        // In a Mamba hybrid the recurrent layers after the first attention layer run with its masks
        // still allocated: two f32 masks' worth (Jamba's layout: 7.3 bytes per token and cell; the
        // Qwen3-Next and Granite-4.0-H shapes show nothing of the kind).
        let mamba_kind = arch
            .ssm
            .is_some_and(|m| matches!(m.kind, SsmKind::Mamba | SsmKind::JambaMamba));
        let masks_beside_mixer = if has_attention && recurrent > 0 && mamba_kind {
            n_kv * ub * 8
        } else {
            0
        };
        masks_beside_mixer
            + match arch.ssm.filter(|_| recurrent > 0) {
                None => 0,
                Some(m) => {
                    let (inner, conv) = (w(m.inner), m.conv_channels());
                    let state = w(m.state) * inner * 4;
                    let conv_state = w(m.conv_kernel.saturating_sub(1)) * conv * 4;
                    match m.kind {
                        // In-projection (x and z), the convolution's input and output, the x→(Δ, B, C)
                        // projection, Δ, the scan output and the gated output, all f32, plus the hidden
                        // states around it (Jamba's layout shows ten inner widths live; Mamba-370M's
                        // logits hide this stage).
                        SsmKind::Mamba | SsmKind::JambaMamba => {
                            ub * (10 * inner + w(m.dt_rank) + 2 * w(m.state)) * 4 + 3 * hidden
                        }
                        // The in-projection (z, x, B, C, Δ), convolution output, scan output and the
                        // gated norm; the layer's state as gathered and as written back (scan and
                        // convolution); and the hidden states around it.
                        SsmKind::Mamba2 => {
                            ub * ((2 * inner + 2 * w(m.groups) * w(m.state) + w(m.dt_rank))
                                + conv
                                + 2 * inner)
                                * 4
                                + 2 * (state + conv_state)
                                + 3 * hidden
                        }
                        // llama.cpp's chunked delta rule (chunks of 64): the qkvz and βα projections and
                        // their split copies, the convolution's input and output, the output before the
                        // gated norm, the 64-wide intra-chunk products per value head, and the new
                        // state; plus 256 KiB for the chunk masks. Fitted to llama.cpp's reports (within
                        // 0.2 % of its per-token slope on Qwen3-Next's shape).
                        SsmKind::GatedDeltaNet => {
                            let qkvz = conv + inner;
                            ub * (2 * qkvz + 2 * conv + inner + w(m.dt_rank) * 64) * 4
                                + state
                                + (256 << 10)
                        }
                        // KDA (not fitted: the replay answers where it runs): q, k and v projected,
                        // joined to their tails and convolved, the decay, the delta rule's output,
                        // its contiguous copy and the gate, f32 per token; the state as gathered
                        // and as written back.
                        SsmKind::Kda => {
                            ub * (2 * conv + w(m.conv_kernel) * inner + 4 * inner) * 4
                                + 2 * state
                                + conv_state
                        }
                        // The time mix's interpolated inputs, LoRA outputs, projections and WKV
                        // output, f32 per token: 14 model widths for RWKV-6 and 19 plus 100 values
                        // for RWKV-7, measured (llama.cpp's per-token slope on the 1.6B and 7B
                        // RWKV-6 and the 1.5B and 2.9B RWKV-7 shapes, to 0.01 MiB); and the layer's
                        // state as gathered and written back. RWKV-6 at a 128-token micro-batch
                        // shows a third copy of the WKV state (its WKV output carries the new state
                        // beside the tokens'), so it is counted at every size.
                        SsmKind::Rwkv6 => ub * 14 * inner * 4 + 3 * state + 2 * conv_state,
                        SsmKind::Rwkv7 => ub * (19 * inner + 100) * 4 + 2 * (state + conv_state),
                    }
                }
            }
    }

    /// The feed-forward block: dense or routed, with the hidden states and the mask beside it.
    pub(super) fn ffn(&self) -> u128 {
        let Stages {
            arch,
            ub,
            h,
            hidden,
            width,
            mask,
            has_attention,
            small_mask_hole,
            ..
        } = *self;
        let w = u128::from;
        let ffn_width = |inter: u64| -> u128 {
            let i = w(inter);
            match arch.mlp {
                Mlp::Gated => 2 * ub * i * 4,
                Mlp::Plain => ub * i * 4,
            }
        };
        // A fused gate-and-up projection (Phi-3) is one tensor of twice the width, and its
        // activation a third one (Phi-3-mini's shape at 32768 tokens with flash attention).
        let dense = if arch.fused_projections {
            3 * ub * w(arch.intermediate_size) * 4
        } else {
            ffn_width(arch.intermediate_size)
        };
        // Routed experts with a gate keep the gate, the up projection and their product for every
        // selected expert, then each expert's output before they are weighted and summed
        // (Mixtral's shape with flash attention: 3 × 14336 × 2 + 4096 × 2 per token).
        let moe = arch.moe.as_ref().map_or(0, |m| {
            let k = w(m.experts_per_token);
            let routed = match arch.mlp {
                Mlp::Gated => 3 * ub * w(m.expert_intermediate) * 4 * k + ub * h * 4 * k,
                Mlp::Plain => ffn_width(m.expert_intermediate) * k,
            };
            routed + ffn_width(m.shared_intermediate) + ub * w(m.experts) * 4
        });
        // The KQ mask stays allocated through every layer's feed-forward block but the last one's;
        // in Phi-3's layout with flash attention, a mask too small to take a model-width tensor in
        // its hole costs one more above it (Phi-3-medium's shape at 4096 tokens).
        let mask_live = match has_attention {
            false => 0,
            true if small_mask_hole => mask + width,
            true => mask,
        };
        dense.max(moe) + 3 * hidden + mask_live
    }
}
