//! The shape the walk needs, read once from the architecture: what transformers' modules for
//! the family keep, and which families and features are walked at all.

use super::TrainingError;
use crate::model::arch::ModelArch;

/// How the family's decoder layer is built, where it differs from Llama's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Llama's: two RMSNorms a layer, SDPA.
    Llama,
    /// Gemma 2's: four Gemma RMSNorms a layer (f32 math, `1 + weight`), eager attention with
    /// its logits soft-capped (transformers runs no SDPA for it), the embeddings scaled, the
    /// final logits soft-capped.
    Gemma2,
    /// Gemma 3's: Gemma 2's four norms and scaled embeddings, Gemma norms on each head's query
    /// and key (in f32), SDPA, a rotary table for the sliding layers and one for the others.
    Gemma3,
    /// DeepSeek-V2's: latent attention run eagerly in f32 (its complex rotary embedding turns
    /// the query and key to f32), experts routed by an f32 gate beside shared experts.
    DeepseekV2,
    /// gpt-oss's: norms whose weight multiplies the f32 product, eager attention with a learned
    /// sink column beside each head's scores (a bf16 softmax over the keys and the sink), biased
    /// projections, experts routed by a biased linear whose top k are soft-maxed, their clamped
    /// SwiGLU.
    GptOss,
}

/// DeepSeek-V2's latent attention (the query projected directly).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MlaShape {
    pub kv_lora_rank: u128,
    pub nope: u128,
    pub rope: u128,
    pub v: u128,
}

/// The shape the walk needs, taken once from the architecture.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub hidden: u128,
    pub intermediate: u128,
    pub layers: u128,
    pub heads: u128,
    pub kv_heads: u128,
    pub head_dim: u128,
    pub vocab: u128,
    pub qk_norm: bool,
    /// Where the layer differs from Llama's.
    pub layout: Layout,
    /// Routed experts, in the layers that have them.
    pub moe: Option<MoeShape>,
    /// DeepSeek-V2's latent attention.
    pub mla: Option<MlaShape>,
    /// Phi-3's fused q/k/v and gate/up projections.
    pub fused: bool,
    /// A sliding window transformers applies.
    pub window: Option<u128>,
    /// Every layer slides (Mistral, Mixtral, Phi-3): past the window they share one mask.
    pub window_all_layers: bool,
    /// The output head shares the embedding matrix.
    pub tied: bool,
    /// Rotary tables made each forward: Gemma 3's one for each kind of layer it has (sliding,
    /// full), the others' one.
    pub rotary_tables: u128,
    /// Parameter tensors (each has an optimizer step counter).
    pub param_tensors: u128,
    /// Parameters over all tensors.
    pub params: u128,
    /// Of those, parameters kept in f32 whatever the model's dtype (DeepSeek-V2's expert gates).
    pub f32_params: u128,
    /// Weights of one layer's linear projections (their bf16 copies under autocast).
    pub layer_linear_params: u128,
    /// Biased q, k and v projections (Qwen2); a biased output projection.
    pub qkv_bias: bool,
    pub o_bias: bool,
}

/// Routed experts (Mixtral, Qwen3-MoE: a softmax router, its top k renormalized; DeepSeek-V2:
/// an f32 softmax gate, shared experts beside).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MoeShape {
    pub experts: u128,
    pub top_k: u128,
    pub intermediate: u128,
    /// Always-active shared experts' intermediate width, summed (0: none).
    pub shared_intermediate: u128,
    /// Layers with experts; the others are dense.
    pub layers: u128,
    /// The first layer has experts.
    pub first_layer: bool,
    /// The router is registered before the experts (Mixtral's block; Qwen3-MoE's registers it
    /// after them), which is the order DeepSpeed's ZeRO-3 gathers them in.
    pub router_first: bool,
}

/// Attention's own fields: biases, per-head norms, the latent.
struct AttentionFields {
    qkv_bias: bool,
    o_bias: bool,
    qk_norm: bool,
    mla: Option<MlaShape>,
}

impl Shape {
    pub(crate) fn of(arch: &ModelArch) -> Result<Self, TrainingError> {
        use crate::model::arch::{Mlp, Norm};
        use crate::model::family::Family;
        let layout = layout_of(arch)?;
        let att = attention_of(arch)?;
        if arch.ssm.is_some() || arch.mlp != Mlp::Gated {
            return Err(TrainingError::Unsupported {
                what: "recurrent layers or an ungated MLP",
            });
        }
        let moe = moe_of(arch, layout)?;
        if layout == Layout::DeepseekV2 && (moe.is_none() || att.mla.is_none()) {
            return Err(TrainingError::Unsupported {
                what: "DeepSeek without latent attention and experts",
            });
        }
        if layout == Layout::GptOss && (moe.is_none() || !arch.attention_sinks) {
            return Err(TrainingError::Unsupported {
                what: "gpt-oss without experts and sinks",
            });
        }
        let norms = match layout {
            Layout::Llama | Layout::DeepseekV2 | Layout::GptOss => 2,
            Layout::Gemma2 | Layout::Gemma3 => 4,
        };
        if arch.norm != Norm::Rms || arch.norms_per_layer != norms {
            return Err(TrainingError::Unsupported {
                what: "LayerNorm, or norms other than the family's",
            });
        }
        let w = u128::from;
        let (h, heads, kv, d, i) = (
            w(arch.hidden_size),
            w(arch.num_heads),
            w(arch.num_kv_heads),
            w(arch.head_dim),
            w(arch.intermediate_size),
        );
        let moe_layers = moe.map_or(0, |m| m.layers);
        Ok(Shape {
            hidden: h,
            intermediate: i,
            layers: w(arch.num_layers),
            heads,
            kv_heads: kv,
            head_dim: d,
            vocab: w(arch.vocab_size),
            qk_norm: att.qk_norm,
            layout,
            moe,
            fused: arch.fused_projections,
            window_all_layers: matches!(
                arch.family_kind(),
                Family::Mistral | Family::Mixtral | Family::Phi3
            ),
            window: arch
                .transformers_window
                .or(arch.sliding_window.as_ref().map(|w| w.window))
                .map(u128::from),
            tied: arch.tie_word_embeddings,
            rotary_tables: rotary_tables(arch, layout),
            param_tensors: param_tensors(arch, layout, &att, moe, u128::from(norms)),
            mla: att.mla,
            params: w(arch.params().total),
            f32_params: if layout == Layout::DeepseekV2 {
                moe_layers * moe.map_or(0, |m| m.experts) * h
            } else {
                0
            },
            layer_linear_params: h * (heads * d + 2 * kv * d) + heads * d * h + 3 * h * i,
            qkv_bias: att.qkv_bias,
            o_bias: att.o_bias,
        })
    }
}

/// Gemma 3 makes a rotary table for each kind of layer in its `layer_types` (transformers 5
/// iterates their set): two once it has a full-attention layer beside the sliding ones.
fn rotary_tables(arch: &ModelArch, layout: Layout) -> u128 {
    if layout != Layout::Gemma3 {
        return 1;
    }
    let sliding = (0..arch.num_layers).any(|i| arch.is_sliding_layer(i));
    let full = (0..arch.num_layers).any(|i| !arch.is_sliding_layer(i));
    u128::from(sliding) + u128::from(full)
}

/// The family's layer, for the families walked.
fn layout_of(arch: &ModelArch) -> Result<Layout, TrainingError> {
    use crate::model::family::Family;
    match arch.family_kind() {
        Family::Llama
        | Family::Mistral
        | Family::Qwen2
        | Family::Qwen3
        | Family::Phi3
        | Family::Mixtral
        | Family::Qwen3Moe => Ok(Layout::Llama),
        Family::Gemma2 => Ok(Layout::Gemma2),
        Family::Gemma3 => Ok(Layout::Gemma3),
        Family::DeepseekV2 | Family::DeepseekV3 => Ok(Layout::DeepseekV2),
        Family::GptOss => Ok(Layout::GptOss),
        _ => Err(TrainingError::Unmodelled {
            family: arch.family.clone(),
        }),
    }
}

/// Attention's biases and norms, or DeepSeek-V2's latent (a query projected directly).
fn attention_of(arch: &ModelArch) -> Result<AttentionFields, TrainingError> {
    use crate::model::arch::Attention;
    match arch.attention {
        Attention::Standard {
            qkv_bias,
            o_bias,
            qk_norm,
        } => Ok(AttentionFields {
            qkv_bias,
            o_bias,
            qk_norm,
            mla: None,
        }),
        Attention::Mla {
            q_lora_rank: None,
            kv_lora_rank,
            qk_nope_head_dim,
            qk_rope_head_dim,
            v_head_dim,
        } => Ok(AttentionFields {
            qkv_bias: false,
            o_bias: false,
            qk_norm: false,
            mla: Some(MlaShape {
                kv_lora_rank: u128::from(kv_lora_rank),
                nope: u128::from(qk_nope_head_dim),
                rope: u128::from(qk_rope_head_dim),
                v: u128::from(v_head_dim),
            }),
        }),
        Attention::Mla { .. } => Err(TrainingError::Unsupported {
            what: "a compressed query (DeepSeek-V3's q_lora_rank)",
        }),
    }
}

/// The routed experts walked: softmax routers (gpt-oss's biased), DeepSeek-V2's ungated shared
/// experts.
fn moe_of(arch: &ModelArch, layout: Layout) -> Result<Option<MoeShape>, TrainingError> {
    let Some(m) = &arch.moe else {
        return Ok(None);
    };
    if (m.router_bias && layout != Layout::GptOss)
        || m.groups.0 > 1
        || m.shared_gate
        || m.scaled_weights
        || (m.shared_intermediate > 0 && layout != Layout::DeepseekV2)
    {
        return Err(TrainingError::Unsupported {
            what: "routing biases, expert groups or gated shared experts",
        });
    }
    Ok(Some(MoeShape {
        experts: u128::from(m.experts),
        top_k: u128::from(m.experts_per_token),
        intermediate: u128::from(m.expert_intermediate),
        shared_intermediate: u128::from(m.shared_intermediate),
        layers: u128::from(arch.moe_layers()),
        first_layer: arch.is_moe_layer(0),
        router_first: arch.family_kind() != crate::model::family::Family::Qwen3Moe,
    }))
}

/// Parameter tensors (each has an optimizer step count): per layer the norms, attention's
/// (q, k, v, o, their biases and per-head norms, a sink; Phi-3's fused q/k/v; MLA's q, kv_a, its
/// norm, kv_b and o), the feed-forward block's (gate, up, down, Phi-3's gate/up fused; or the
/// router, the experts' gate/up and down, the shared experts' three, gpt-oss's three biases);
/// the embedding, the final norm and an untied head.
fn param_tensors(
    arch: &ModelArch,
    layout: Layout,
    att: &AttentionFields,
    moe: Option<MoeShape>,
    norms: u128,
) -> u128 {
    let fused = arch.fused_projections;
    let attention = match (att.mla.is_some(), fused) {
        (true, _) => 5,
        (false, true) => 2,
        (false, false) => 4,
    } + if att.qkv_bias { 3 } else { 0 }
        + u128::from(att.o_bias)
        + if att.qk_norm { 2 } else { 0 }
        + u128::from(arch.attention_sinks);
    let dense = if fused { 2 } else { 3 };
    let experts = moe.map_or(0, |m| {
        3 + if m.shared_intermediate > 0 { 3 } else { 0 }
            + if layout == Layout::GptOss { 3 } else { 0 }
    });
    let moe_layers = moe.map_or(0, |m| m.layers);
    let layers = u128::from(arch.num_layers);
    layers * (norms + attention)
        + (layers - moe_layers) * dense
        + moe_layers * experts
        + 2
        + u128::from(!arch.tie_word_embeddings)
}

/// One parameter tensor: `count` stacked matrices of `rows` × `cols` (the experts' are 3-D), or
/// a vector of `rows` elements (`cols` 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tensor {
    pub count: u128,
    pub rows: u128,
    pub cols: u128,
}

impl Tensor {
    pub(super) const fn matrix(rows: u128, cols: u128) -> Self {
        Tensor {
            count: 1,
            rows,
            cols,
        }
    }

    /// `count` matrices of `rows` × `cols`, stacked (the experts').
    const fn stack(count: u128, rows: u128, cols: u128) -> Self {
        Tensor { count, rows, cols }
    }

    pub(super) const fn vector(len: u128) -> Self {
        Tensor::stack(1, len, 0)
    }

    /// Its elements.
    pub fn elements(self) -> u128 {
        self.count * self.rows * self.cols.max(1)
    }
}

impl Shape {
    /// Every parameter tensor's elements ([`Shape::tensors`]).
    pub(crate) fn dense_tensor_elements(&self) -> Option<Vec<u128>> {
        Some(self.tensors()?.iter().map(|t| t.elements()).collect())
    }

    /// Every parameter tensor, as transformers 5 registers them: the embedding; each layer's
    /// attention projections (Phi-3's fused q/k/v), their biases and per-head norms, its MLP
    /// (gate, up and down; Phi-3's fused gate/up; routed experts' router and stacked gate/up
    /// and down) and norms (two, Gemma's four); the final norm; an untied head. `None` where
    /// the list is not kept: shared experts or dense layers among expert ones outside
    /// DeepSeek-V2. The router comes before the experts as Mixtral registers it (Qwen3-MoE
    /// registers it after them; nothing taken from the order tells the two apart: the step
    /// Adafactor takes for the stacked experts is set by their own factors either way).
    pub(crate) fn tensors(&self) -> Option<Vec<Tensor>> {
        let norms = match self.layout {
            Layout::Llama => 2,
            Layout::Gemma2 | Layout::Gemma3 => 4,
            Layout::DeepseekV2 => return self.deepseek_tensors(),
            Layout::GptOss => return self.gpt_oss_tensors(),
        };
        if self.mla.is_some() {
            return None;
        }
        let (h, i) = (self.hidden, self.intermediate);
        let (q, kv) = (self.heads * self.head_dim, self.kv_heads * self.head_dim);
        let mut layer = if self.fused {
            vec![Tensor::matrix(q + 2 * kv, h), Tensor::matrix(h, q)]
        } else {
            let mut l = vec![
                Tensor::matrix(q, h),
                Tensor::matrix(kv, h),
                Tensor::matrix(kv, h),
                Tensor::matrix(h, q),
            ];
            if self.qkv_bias {
                l.extend([Tensor::vector(q), Tensor::vector(kv), Tensor::vector(kv)]);
            }
            l
        };
        if self.o_bias {
            layer.push(Tensor::vector(h));
        }
        if self.qk_norm || self.layout == Layout::Gemma3 {
            layer.extend([Tensor::vector(self.head_dim), Tensor::vector(self.head_dim)]);
        }
        match (self.moe, self.fused) {
            (Some(m), _) if m.layers == self.layers && m.shared_intermediate == 0 => {
                layer.extend([
                    Tensor::matrix(m.experts, h),
                    Tensor::stack(m.experts, 2 * m.intermediate, h),
                    Tensor::stack(m.experts, h, m.intermediate),
                ]);
            }
            (Some(_), _) => return None,
            (None, true) => layer.extend([Tensor::matrix(2 * i, h), Tensor::matrix(h, i)]),
            (None, false) => layer.extend([
                Tensor::matrix(i, h),
                Tensor::matrix(i, h),
                Tensor::matrix(h, i),
            ]),
        }
        layer.extend((0..norms).map(|_| Tensor::vector(h)));
        let mut out = vec![Tensor::matrix(self.vocab, h)];
        for _ in 0..self.layers {
            out.extend(&layer);
        }
        out.push(Tensor::vector(h));
        if !self.tied {
            out.push(Tensor::matrix(self.vocab, h));
        }
        Some(out)
    }
}

impl Shape {
    /// The embedding, the final norm and an untied head around `layers`.
    fn around(&self, layers: Vec<Tensor>) -> Vec<Tensor> {
        let h = self.hidden;
        let mut out = vec![Tensor::matrix(self.vocab, h)];
        out.extend(layers);
        out.push(Tensor::vector(h));
        if !self.tied {
            out.push(Tensor::matrix(self.vocab, h));
        }
        out
    }

    /// DeepSeek-V2's: the query projected directly, the latent's projection (with the shared
    /// RoPE key), its norm, its up-projection to K and V, the output; dense MLPs in the first
    /// layers, then the f32 router, the stacked experts and the shared experts' MLP.
    fn deepseek_tensors(&self) -> Option<Vec<Tensor>> {
        let (mla, moe) = (self.mla?, self.moe?);
        let (h, heads) = (self.hidden, self.heads);
        let attention = [
            Tensor::matrix(heads * (mla.nope + mla.rope), h),
            Tensor::matrix(mla.kv_lora_rank + mla.rope, h),
            Tensor::vector(mla.kv_lora_rank),
            Tensor::matrix(heads * (mla.nope + mla.v), mla.kv_lora_rank),
            Tensor::matrix(h, heads * mla.v),
        ];
        let norms = [Tensor::vector(h), Tensor::vector(h)];
        let mlp = |i: u128| {
            [
                Tensor::matrix(i, h),
                Tensor::matrix(i, h),
                Tensor::matrix(h, i),
            ]
        };
        let mut layers = Vec::new();
        for l in 0..self.layers {
            layers.extend(attention);
            if l < self.layers - moe.layers {
                layers.extend(mlp(self.intermediate));
            } else {
                // The experts, then the router, then the shared experts.
                layers.extend([
                    Tensor::stack(moe.experts, 2 * moe.intermediate, h),
                    Tensor::stack(moe.experts, h, moe.intermediate),
                    Tensor::matrix(moe.experts, h),
                ]);
                if moe.shared_intermediate > 0 {
                    layers.extend(mlp(moe.shared_intermediate));
                }
            }
            layers.extend(norms);
        }
        Some(self.around(layers))
    }

    /// The elements of the widest decoder layer, `root` elements (embeddings, final norm, an
    /// untied head) aside: a layer with experts where only some layers have them (its
    /// experts, router and shared experts in place of the dense MLP), else the one layer.
    pub(super) fn widest_layer(&self, root: u128) -> u128 {
        let layers = self.params.saturating_sub(root);
        let Some(m) = self.moe.filter(|m| m.layers < self.layers) else {
            return layers / self.layers.max(1);
        };
        let h = self.hidden;
        let experts = m.experts * (3 * m.intermediate + 1) * h + 3 * m.shared_intermediate * h;
        let extra = experts.saturating_sub(3 * self.intermediate * h);
        (layers.saturating_sub(m.layers * extra)) / self.layers.max(1) + extra
    }

    /// gpt-oss's: biased q, k, v and o projections and a sink a head; a biased router; the
    /// stacked experts (gate/up stored hidden × 2·width) with their biases, 2-D tensors.
    fn gpt_oss_tensors(&self) -> Option<Vec<Tensor>> {
        let moe = self.moe.filter(|m| m.layers == self.layers)?;
        let (h, e, w) = (self.hidden, moe.experts, moe.intermediate);
        let (q, kv) = (self.heads * self.head_dim, self.kv_heads * self.head_dim);
        let layer = [
            Tensor::vector(self.heads),
            Tensor::matrix(q, h),
            Tensor::vector(q),
            Tensor::matrix(kv, h),
            Tensor::vector(kv),
            Tensor::matrix(kv, h),
            Tensor::vector(kv),
            Tensor::matrix(h, q),
            Tensor::vector(h),
            Tensor::matrix(e, h),
            Tensor::vector(e),
            Tensor::stack(e, h, 2 * w),
            Tensor::matrix(e, 2 * w),
            Tensor::stack(e, w, h),
            Tensor::matrix(e, h),
            Tensor::vector(h),
            Tensor::vector(h),
        ];
        Some(self.around((0..self.layers).flat_map(|_| layer).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::Shape;

    // The tensor lists add up to the models' parameters.
    #[test]
    fn tensor_lists_count_every_parameter() {
        for name in [
            "llama-3.1-8b",
            "qwen2.5-0.5b",
            "phi-3-mini",
            "gemma-2-2b",
            "mixtral-8x7b",
            "qwen3-30b-a3b",
            "deepseek-v2-lite",
            "gpt-oss-20b",
        ] {
            let arch = crate::model::find_model(name).expect(name).arch;
            let s = Shape::of(&arch).expect(name);
            let tensors = s.tensors().expect(name);
            let sum: u128 = tensors.iter().map(|t| t.elements()).sum();
            assert_eq!(sum, s.params, "{name}");
            assert_eq!(tensors.len() as u128, s.param_tensors, "{name}");
        }
    }
}
