//! llama.cpp's choice of context when `llama-server` is started without `-c` (`common/fit.cpp`,
//! step 2 of `llama_params_fit`): the model's trained context with every layer on the GPUs;
//! where that leaves a GPU short of its margin, a context interpolated linearly between the
//! minimum (`--fit-ctx`, 4096) and the trained one by what the GPUs can hold, rounded down to
//! a multiple of 256. On one GPU that ends the fit (every layer stays on it); on several, and
//! when even the minimum does not fit, the layers are fitted next at that context.

use super::placement::{device_uses, DeviceUse, Offload};
use crate::model::{LayerWeights, ModelArch};
use crate::plan::engines::Settings;

/// Where llama.cpp's context fit leaves the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextFit {
    /// The context (`-c`) to plan with.
    pub n_ctx: u64,
    /// The fit ends here with llama.cpp's default placement (every layer on the GPUs, split by
    /// free memory); otherwise it goes on to fit the layers at `n_ctx`.
    pub done: bool,
}

/// What a second model beside the target (a draft) takes of each GPU at a context: llama.cpp's
/// fit adds it to every projection, measured again whenever the context changes.
pub type Extra<'a> = &'a dyn Fn(u64) -> Option<Vec<DeviceUse>>;

/// llama.cpp's context for `arch` on GPUs with `free` bytes each, keeping `margins`, between
/// `n_ctx_min` and the trained `n_ctx_max`, with `extra` beside it; `None` where the graph is
/// not replayed.
pub fn fit_context(
    weights: &LayerWeights,
    arch: &ModelArch,
    settings: &Settings,
    (free, margins): (&[u64], &[u64]),
    (n_ctx_max, n_ctx_min): (u64, u64),
    extra: Option<Extra<'_>>,
) -> Option<ContextFit> {
    #[expect(
        clippy::cast_precision_loss,
        reason = "llama.cpp splits by free memory in f32"
    )]
    let default = Offload {
        n_gpu_layers: arch.num_layers + 1,
        tensor_split: free.iter().map(|&f| f as f32).collect(),
        kv_offload: true,
        moves: Vec::new(),
    };
    let nd = free.len();
    let at = |n_ctx: u64| {
        let s = Settings {
            context: n_ctx,
            ..settings.clone()
        };
        let mut u = device_uses(weights, arch, &s, &default)?;
        u.truncate(nd);
        if let Some(extra) = extra {
            super::draft::add_uses(&mut u, &extra(n_ctx)?);
        }
        Some(u)
    };
    let wide = |v: u64| i128::from(v);
    let full = at(n_ctx_max)?;
    let used: Vec<i128> = full.iter().map(|u| wide(u.total())).collect();
    let projected_free: Vec<i128> = free.iter().zip(&used).map(|(&f, &u)| wide(f) - u).collect();
    if projected_free
        .iter()
        .zip(margins)
        .all(|(&p, &m)| p >= wide(m))
    {
        return Some(ContextFit {
            n_ctx: n_ctx_max,
            done: true,
        });
    }
    let margin_sum: i128 = margins.iter().map(|&m| wide(m)).sum();
    let surplus = projected_free.iter().sum::<i128>() - margin_sum;
    if surplus >= 0 || n_ctx_max <= n_ctx_min {
        return Some(ContextFit {
            n_ctx: n_ctx_max,
            done: false,
        });
    }
    let mut target = free.iter().map(|&f| wide(f)).sum::<i128>() - margin_sum;
    if nd > 1 {
        // Several devices take whole layers (MoE: whole tensors, about a third of a layer), so
        // llama.cpp aims lower by about half a layer (tensor) a device.
        let model: i128 = full.iter().map(|u| wide(u.model)).sum();
        let per_layer = model / wide(arch.num_layers.max(1));
        let parts = if arch.moe.is_some() { 6 } else { 2 };
        target -= (wide(nd as u64) + 1) * per_layer / parts;
    }
    let used_full: i128 = used.iter().sum();
    let used_min: i128 = at(n_ctx_min)?.iter().map(|u| wide(u.total())).sum();
    if target <= used_min || used_full <= used_min {
        return Some(ContextFit {
            n_ctx: n_ctx_min,
            done: false,
        });
    }
    let span = wide(n_ctx_max - n_ctx_min);
    let n_ctx = wide(n_ctx_min) + span * (target - used_min) / (used_full - used_min);
    let n_ctx = u64::try_from(n_ctx).ok()?.min(n_ctx_max);
    Some(ContextFit {
        n_ctx: (n_ctx - n_ctx % 256).max(n_ctx_min),
        done: nd <= 1,
    })
}
