//! vLLM 0.33's state pages for recurrent layers (`MambaSpec`): each layer's convolution and
//! scan state for one request on one rank (`MambaStateShapeCalculator`, `mamba_utils.py`), and
//! how a hybrid model's attention pages are sized to hold one (`_align_hybrid_block_size` in
//! `platforms/interface.py`).

use crate::model::{Family, ModelArch, Ssm, SsmKind};

/// A recurrent layer's state on one rank, in bytes: the convolution's last `d_conv − 1`
/// inputs (in the model's dtype, `act` bytes) and the scan state (in `ssm_bytes`), each split
/// over `tp` ranks as vLLM shards them. `None` for a mixer vLLM does not run (RWKV).
fn state_page(ssm: &Ssm, (tp, spec): (u64, u64), act: u64, ssm_bytes: u64) -> Option<u64> {
    let tp = u128::from(tp.max(1));
    let w = u128::from;
    // Speculative decoding keeps the proposed tokens' inputs too (`k − 1 + num_spec`).
    let steps = w(ssm.conv_kernel.saturating_sub(1)) + w(spec);
    let (conv_channels, scan) = match ssm.kind {
        // (conv_dim / tp, k − 1) and (inner / tp, state).
        SsmKind::Mamba | SsmKind::JambaMamba => (w(ssm.inner), w(ssm.inner) * w(ssm.state)),
        // Groups not divisible by the ranks are replicated to every rank that needs them
        // (`extra_groups_for_head_shards`); the scan state is heads × head size × state.
        SsmKind::Mamba2 => {
            let groups = w(ssm.groups);
            let groups = if groups % tp == 0 { groups } else { tp };
            (
                w(ssm.inner) + 2 * groups * w(ssm.state),
                w(ssm.inner) * w(ssm.state),
            )
        }
        // q, k and v convolved; a value head size × key head size state per value head.
        // KDA: q, k and v convolved apart, (3 × inner / tp, k − 1); a head size × head size
        // state per head.
        SsmKind::GatedDeltaNet | SsmKind::Kda => (ssm.conv_channels(), w(ssm.inner) * w(ssm.state)),
        SsmKind::Rwkv6 | SsmKind::Rwkv7 => return None,
    };
    let bytes = steps * conv_channels / tp * w(act) + scan / tp * w(ssm_bytes);
    u64::try_from(bytes).ok()
}

/// The scan state's element bytes: the model's dtype, but Nemotron-H's f32 (vLLM's
/// `NemotronHForCausalLMConfig` default, "the only one known to have no accuracy issues") and
/// Qwen3.5's (its published configs set `mamba_ssm_dtype: float32`, which
/// `Qwen3_5ForConditionalGenerationConfig` makes the cache's) and KDA's (`kda_state_dtype`:
/// f32 unless `mamba_ssm_cache_dtype` says otherwise).
fn ssm_state_bytes(arch: &ModelArch, act: u64) -> u64 {
    match arch.family_kind() {
        Family::NemotronH | Family::Qwen35 => 4,
        _ if arch.ssm.is_some_and(|s| s.kind == SsmKind::Kda) => 4,
        _ => act,
    }
}

/// State pages a request holds in a recurrent group: with prefix caching (vLLM's default for
/// hybrid models, `mamba_cache_mode="align"`) the running state and the last block's, and
/// Mamba-2's prefill checkpoint besides; without attention layers (no prefix caching) one.
fn pages_per_request(ssm: &Ssm, hybrid: bool, spec: u64) -> u64 {
    spec + match (hybrid, ssm.kind) {
        (false, _) => 1,
        (true, SsmKind::Mamba2) => 3,
        (true, _) => 2,
    }
}

/// The attention block size that makes an attention page hold one state page: the kernel's
/// alignment (16, or `--block-size` when larger; at least 128 beside latent attention, `mla`)
/// times the pages of one token needed, rounded up; never below `block_size`.
fn hybrid_block_size(block_size: u64, state_page: u64, attention_token: u64, mla: bool) -> u64 {
    let align = block_size.max(if mla { 128 } else { 16 });
    let tokens =
        align.saturating_mul(state_page.div_ceil(align.saturating_mul(attention_token).max(1)));
    tokens.div_ceil(16).saturating_mul(16).max(block_size)
}

/// A block's page, its tokens and the pages a request holds in each recurrent group, on a rank
/// of `tp` with `act`-byte activations: a hybrid's attention block (`block_size` asked for,
/// `attention_token` bytes a token) grown to hold a state page and the state pages padded to
/// it; without attention a block is one state page. `None` for a mixer vLLM does not run.
pub(super) fn pages(
    ssm: &Ssm,
    arch: &ModelArch,
    (tp, act, spec): (u64, u64, u64),
    hybrid: bool,
    (block_size, attention_token): (u64, u64),
) -> Option<(u64, u64, u64)> {
    // Kimi-K3 runs Kimi-Linear's pages, but its model holds terms gpumem does not model for
    // vLLM (the residual streams it banks across layers for its residual attention, the
    // experts' latent projections in the profile run): refused by name, not estimated as
    // Kimi-Linear.
    if arch.kimi_k3.is_some() {
        return None;
    }
    let state = state_page(ssm, (tp, spec), act, ssm_state_bytes(arch, act))?;
    // Each proposed token's state is a page of its own (`num_speculative_blocks`).
    let per_request = pages_per_request(ssm, hybrid, spec);
    Some(if hybrid {
        let mla = matches!(arch.attention, crate::model::Attention::Mla { .. });
        let tokens = hybrid_block_size(block_size, state, attention_token, mla);
        (tokens * attention_token, tokens, per_request)
    } else {
        (state, block_size, per_request)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mamba2(groups: u64) -> Ssm {
        Ssm {
            kind: SsmKind::Mamba2,
            conv_kernel: 4,
            inner: 10240,
            state: 128,
            dt_rank: 128,
            groups,
            conv_bias: true,
            norm: true,
            ranks: [0; 4],
        }
    }

    // mamba2_state_shape: conv (conv_dim / tp, k − 1), scan (heads / tp, head size, state);
    // groups that do not divide over the ranks become one a rank.
    #[test]
    fn state_pages_split_as_vllm_shards_them() {
        assert_eq!(
            state_page(&mamba2(8), (1, 0), 2, 4),
            Some(3 * 12288 * 2 + 10240 * 128 * 4)
        );
        assert_eq!(
            state_page(&mamba2(8), (2, 0), 2, 2),
            Some(3 * 12288 / 2 * 2 + 10240 * 128 / 2 * 2)
        );
        assert_eq!(
            state_page(&mamba2(1), (4, 0), 2, 2),
            Some(3 * (10240 + 2 * 4 * 128) / 4 * 2 + 10240 * 128 / 4 * 2)
        );
        let rwkv = Ssm {
            kind: SsmKind::Rwkv7,
            ..mamba2(1)
        };
        assert_eq!(state_page(&rwkv, (1, 0), 2, 2), None);
    }

    // Kimi-Linear's pages are planned; Kimi-K3's, whose own terms are not modelled, are not.
    #[test]
    fn kimi_k3_is_not_planned_as_kimi_linear() {
        let page = |name: &str| {
            let arch = crate::model::find_model(name).unwrap().arch;
            pages(&arch.ssm.unwrap(), &arch, (1, 2, 0), true, (16, 1152))
        };
        assert!(page("kimi-linear-48b-a3b").is_some());
        assert_eq!(page("kimi-k3"), None);
    }

    #[test]
    fn an_attention_block_grows_to_hold_a_state_page() {
        assert_eq!(hybrid_block_size(16, 5_316_608, 4096, false), 1312);
        // Already large enough: the block size asked for stays.
        assert_eq!(hybrid_block_size(2048, 5_316_608, 4096, false), 2048);
        // Kimi-Linear in bf16 on one rank: a 2,170,880-byte KDA state page over 1,152-byte
        // latent tokens, aligned to 128 beside latent attention: 128 × ⌈2,170,880 ÷ 147,456⌉.
        assert_eq!(hybrid_block_size(16, 2_170_880, 1152, true), 1920);
        assert_eq!(pages_per_request(&mamba2(8), true, 0), 3);
        assert_eq!(pages_per_request(&mamba2(8), false, 0), 1);
    }
}
