//! Kimi-K3's own layout beyond Kimi-Linear's (llama.cpp's `kimi-k3` builder; the published
//! config.json's `text_config`): cross-layer residual attention, routed experts in a latent
//! space, a sigmoid output gate on latent attention, and KDA's single full-rank output gate
//! with its bounded decay.

use serde::Serialize;

use super::{Attention, ModelArch};

/// What Kimi-K3 adds to Kimi-Linear's hybrid of KDA and latent attention.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct K3Layout {
    /// `attn_res_block_size`: every this many layers the residual stream is banked, and each
    /// block (attention and feed-forward) reads a softmax-weighted mix of the bank and the
    /// stream, scored by a learned vector (`attn_res_score`, `ffn_res_score`, and one more
    /// before the output). 0: no residual attention.
    pub res_block: u64,
    /// `routed_expert_hidden_size`: the routed experts run at this width between a down- and
    /// an up-projection (`ffn_routed_down`, `ffn_routed_up`); 0: at the model's width.
    pub latent: u64,
    /// `latent_moe_use_norm`: an RMS norm over the experts' latent output before the
    /// up-projection.
    pub latent_norm: bool,
    /// `linear_attn_config.gate_lower_bound` is set: KDA's decay is the bound times a sigmoid
    /// (not −exp(A) times a softplus).
    pub gate_lower_bound: bool,
    /// `mla_use_output_gate`: latent attention's output times a sigmoid of a projection of the
    /// layer's normed input (`attn_gate`, heads × V wide) before `attn_output`.
    pub mla_gate: bool,
    /// `activation_situ_linear_beta` is positive: SiTU squashes the up projection too (β' ·
    /// tanh(up / β')), as in every feed-forward block.
    pub situ_up: bool,
    /// `moe_renormalize` (`expert_weights_norm`): the routed experts' weights are normalised to
    /// sum to one; llama.cpp's `kimi-k3` builder leaves them as gathered without the key.
    pub renormalize: bool,
}

impl ModelArch {
    /// Kimi-K3's parameters beyond what the shared arithmetic counts (Kimi-Linear's layout with
    /// KDA's two low-rank gate projections): the residual scores (two a layer, one before the
    /// output, each a model-width vector as llama.cpp's converter fuses norm and projection),
    /// KDA's full-rank gate in place of its low-rank pair, the latent attention's output gate,
    /// and each expert layer's latent projections and norm. Returns (added, lacked) for total
    /// and active alike; the experts' own latent width is counted where they are.
    pub(super) fn k3_params(&self) -> (u128, u128) {
        let Some(k) = self.kimi_k3 else {
            return (0, 0);
        };
        let w = u128::from;
        let h = w(self.hidden_size);
        let mut added = 0;
        let mut lacked = 0;
        if k.res_block > 0 {
            added += (2 * w(self.num_layers) + 1) * h;
        }
        if let Some(s) = self.ssm {
            let kda = w(self.recurrent_layer_count());
            added += kda * h * w(s.inner);
            lacked += kda * (h * w(s.state) + w(s.state) * w(s.inner));
        }
        if let (true, Attention::Mla { v_head_dim, .. }) = (k.mla_gate, &self.attention) {
            added += w(self.attention_layer_count()) * h * w(self.num_heads) * w(*v_head_dim);
        }
        if k.latent > 0 {
            let norm = if k.latent_norm { w(k.latent) } else { 0 };
            added += w(self.moe_layers()) * (2 * h * w(k.latent) + norm);
        }
        (added, lacked)
    }

    /// The routed experts' input and output width: the latent where Kimi-K3 has one, else the
    /// model's.
    pub fn expert_width(&self) -> u64 {
        match self.kimi_k3 {
            Some(k) if k.latent > 0 => k.latent,
            _ => self.hidden_size,
        }
    }
}
