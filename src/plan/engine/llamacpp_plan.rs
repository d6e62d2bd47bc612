//! Planning for llama.cpp on one GPU and its host: `-ngl` as llama.cpp's own fit chooses it
//! (every layer when the GPU keeps its margin, else the most that do, the rest in system RAM),
//! each device's model, KV-cache and compute bytes as llama.cpp places them. Several GPUs and
//! experts on the CPU are not planned here yet (the generic rule plans those).

use serde::Serialize;

use super::llamacpp::{fit_one_device, one_device, DeviceUse};
use crate::backend::BackendKind;
use crate::model::{LayerWeights, ModelSource, Settings, DEFAULT_WEIGHT_PRECISION};
use crate::plan::{
    Accounting, Candidate, Capacity, Placement, Plan, PlanKind, Rank, Selection, Usable,
    UsableRule, Verdict, VerdictReason,
};

/// llama.cpp's own margin per device (`--fit-target`, 1024 MiB).
pub const FIT_MARGIN: u64 = 1 << 30;

/// What llama.cpp would hold on the GPU and the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LlamaCppAccount {
    /// `-ngl`: layers on the GPU, the output layer counted as one (`layers + 1`: all).
    pub n_gpu_layers: u64,
    /// The margin the fit keeps free on the GPU.
    pub margin_bytes: u64,
    /// The GPU's share.
    pub device: DeviceUse,
    /// The host's share (the token embeddings are always there).
    pub host: DeviceUse,
    /// llama.cpp's `-fa auto`: on, as on every GPU backend that has it.
    pub flash_attention: bool,
}

/// Plans `source` for llama.cpp over `candidates`; `None` when llama.cpp's graph for the
/// architecture is not replayed (the generic rule then plans it).
pub fn select_llamacpp(
    source: &ModelSource,
    settings: &Settings,
    candidates: &[Candidate],
) -> Option<Selection> {
    let arch = &source.arch;
    let weights = source.layer_weights.clone().unwrap_or_else(|| {
        LayerWeights::from_arch(arch, settings.dtype.unwrap_or(DEFAULT_WEIGHT_PRECISION))
    });
    // One KV cache for the batch's sequences (llama-server's -c is the total), and -fa auto.
    let s = Settings {
        context: settings.context.saturating_mul(settings.batch.max(1)),
        batch: 1,
        flash_attention: true,
        ..settings.clone()
    };
    let all = arch.num_layers + 1;
    let mut best: Option<(&Candidate, u64, Option<&Candidate>)> = None;
    for gpu in candidates
        .iter()
        .filter(|c| c.is_gpu() && c.mig_profile.is_none())
    {
        let free = gpu.free_bytes.unwrap_or(gpu.total_bytes);
        let ngl = fit_one_device(&weights, arch, &s, free, FIT_MARGIN)?.unwrap_or(all);
        let host = candidates
            .iter()
            .find(|c| c.backend == BackendKind::Cpu && c.host == gpu.host);
        let (_, host_use) = one_device(&weights, arch, &s, ngl)?;
        // Layers left on the CPU need system RAM that is known to hold them.
        let host_ok = ngl == all
            || host.is_some_and(|h| h.free_bytes.unwrap_or(h.total_bytes) >= host_use.total());
        if host_ok && best.as_ref().is_none_or(|(_, n, _)| ngl > *n) {
            best = Some((gpu, ngl, host));
        }
    }
    let (gpu_need, host_need) = match best {
        Some((g, ngl, h)) => {
            let (device, host) = one_device(&weights, arch, &s, ngl)?;
            (
                Some((g, device)),
                h.filter(|_| ngl < all).map(|h| (h, host)),
            )
        }
        None => (None, None),
    };
    let verdicts = verdicts(&weights, arch, &s, candidates, gpu_need, host_need)?;
    let Some((gpu, ngl, host)) = best else {
        return Some(none(verdicts, &weights, arch, &s, settings));
    };
    let (device, host_use) = one_device(&weights, arch, &s, ngl)?;
    let layers_on_gpu = ngl.min(arch.num_layers);
    let mut placements = vec![placement(gpu, device.total(), layers_on_gpu)];
    if ngl < all {
        placements
            .extend(host.map(|h| placement(h, host_use.total(), arch.num_layers - layers_on_gpu)));
    }
    Some(Selection {
        required_bytes: device.total(),
        plan: Plan {
            kind: if ngl < all {
                PlanKind::CpuOffload
            } else {
                PlanKind::Single
            },
            placements,
            gpu_layers: Some(ngl),
            max_context: None,
            shortfall_bytes: None,
            capacity: Some(Capacity {
                context: settings.context,
                batch: settings.batch,
                kv_tokens: s.context,
                max_concurrent_sequences: settings.batch,
                max_context_at_batch: settings.context,
                trained_context: arch.max_position_embeddings,
                max_concurrency_centi: None,
            }),
            engine: None,
            llamacpp: Some(LlamaCppAccount {
                n_gpu_layers: ngl,
                margin_bytes: FIT_MARGIN,
                device,
                host: host_use,
                flash_attention: true,
            }),
            accounting: Accounting::LlamaCpp,
        },
        candidates: verdicts,
    })
}

fn placement(c: &Candidate, bytes: u64, layers: u64) -> Placement {
    Placement {
        host: c.host.clone(),
        backend: c.backend,
        device: c.device,
        bytes,
        layers: Some(layers),
    }
}

/// No GPU holds even the output layer with its margin, or the layers left need system RAM no
/// inventory names: the shortfall is the best GPU's with every layer on it, and the longest
/// context (per sequence) with which every layer fits there.
fn none(
    verdicts: Vec<Verdict>,
    weights: &LayerWeights,
    arch: &crate::model::ModelArch,
    s: &Settings,
    asked: &Settings,
) -> Selection {
    let all = arch.num_layers + 1;
    let needed = one_device(weights, arch, s, all).map_or(0, |(d, _)| d.total());
    let best = verdicts
        .iter()
        .filter(|v| v.backend != BackendKind::Cpu)
        .map(|v| v.usable_bytes)
        .max();
    let shortfall = best.map(|u| needed.saturating_sub(u));
    let batch = asked.batch.max(1);
    let fits_at = |context: u64| {
        let at = Settings {
            context: context.saturating_mul(batch),
            ..s.clone()
        };
        one_device(weights, arch, &at, all)
            .is_some_and(|(d, _)| best.is_some_and(|u| d.total() <= u))
    };
    let (mut lo, mut hi) = (0u64, asked.context.saturating_sub(1));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits_at(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let max_context = (lo > 0 && fits_at(lo)).then_some(lo);
    Selection {
        required_bytes: needed,
        plan: Plan::none(max_context, shortfall, Accounting::LlamaCpp),
        candidates: verdicts,
    }
}

/// Each candidate: a GPU judged by what every layer needs on it against its free memory less
/// llama.cpp's margin; system RAM by what the chosen plan leaves there.
fn verdicts(
    weights: &LayerWeights,
    arch: &crate::model::ModelArch,
    s: &Settings,
    candidates: &[Candidate],
    chosen: Option<(&Candidate, DeviceUse)>,
    host: Option<(&Candidate, DeviceUse)>,
) -> Option<Vec<Verdict>> {
    let (full, _) = one_device(weights, arch, s, arch.num_layers + 1)?;
    Some(
        candidates
            .iter()
            .map(|c| {
                let base = c.free_bytes.unwrap_or(c.total_bytes);
                let gpu = c.is_gpu();
                let usable = if gpu {
                    base.saturating_sub(FIT_MARGIN)
                } else {
                    base
                };
                let same = |o: &Candidate| {
                    o.host == c.host && o.backend == c.backend && o.device == c.device
                };
                // A device the plan uses is judged by its share; another GPU by taking it all.
                let share = [chosen, host]
                    .into_iter()
                    .flatten()
                    .find(|(d, _)| same(d))
                    .map(|(_, u)| u.total());
                let needed = share.unwrap_or(if gpu { full.total() } else { 0 });
                let used = share.is_some();
                let reason = if !gpu {
                    VerdictReason::SystemRam
                } else if needed <= usable {
                    VerdictReason::Fits
                } else {
                    VerdictReason::TooSmall
                };
                let rule = UsableRule::FitMargin {
                    margin_bytes: if gpu { FIT_MARGIN } else { 0 },
                };
                Verdict::of(
                    c,
                    Usable {
                        bytes: usable,
                        base_bytes: base,
                        base_is_free: c.free_bytes.is_some(),
                        rule,
                    },
                    needed,
                    needed <= usable && (gpu || used),
                    reason,
                    used.then_some(Rank {
                        rank: 0,
                        of: 1,
                        stage: 0,
                        stages: 1,
                    }),
                )
            })
            .collect(),
    )
}
