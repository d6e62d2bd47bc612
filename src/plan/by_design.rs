//! The planner under the names the unified-pool design gives it (see [`crate::design`]):
//! pick the backend and device for a byte count on this machine, and open it with a check of
//! its free memory now. Unlike the rest of `plan`, these discover and open devices.

use thiserror::Error;

use super::engines::llamacpp::LlamaCppRun;
use super::engines::Settings;
use super::{candidates_from_discovery, plan, PlanKind, Policy, Requirement, VerdictReason};
use crate::backend::{BackendKind, DeviceSpec};
use crate::model::{
    design_shape, estimate_kv_cache_memory, estimate_model_memory, InferenceMemoryEstimate,
    Precision,
};
use crate::units::format_bytes;

/// Why `select_backend_for_model` or `init_backend_with_memory_check` found nothing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("no backend can hold {}: {}", format_bytes(*required), tried.iter().map(|(b, why)| format!("{b}: {why}")).collect::<Vec<_>>().join("; "))]
pub struct SelectError {
    /// Bytes the caller asked to fit.
    pub required: u64,
    /// Every backend (`cuda`) or device (`cuda:0`) tried, and why it was rejected.
    pub tried: Vec<(String, Rejected)>,
}

/// Why one backend or device was passed over by `select_backend_for_model` or `init_backend_with_memory_check`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Rejected {
    /// The backend is unavailable here (its discovery reason).
    #[error("{0}")]
    Unavailable(String),
    /// The device's usable (or free) memory is below the request.
    #[error("{} usable", format_bytes(*usable))]
    TooSmall {
        /// What could be used.
        usable: u64,
    },
    /// A GPU API implemented in software on the CPU; the cpu backend is the better choice.
    #[error("a software device on the CPU")]
    SoftwareDevice,
    /// The device could not be opened or queried.
    #[error("{0}")]
    Failed(String),
}

/// The unified-pool design: the backend and device that can hold `required_bytes` on this machine, under the
/// default policy.
pub fn select_backend_for_model(required_bytes: u64) -> Result<(BackendKind, usize), SelectError> {
    let found = crate::backend::discover_backends();
    let candidates = candidates_from_discovery(&found, "localhost");
    let selection = plan(
        &Requirement {
            total: required_bytes,
            model: None,
        },
        &candidates,
        &Policy::default(),
        None,
    );
    match selection.plan.kind {
        PlanKind::Single => {
            let p = &selection.plan.placements[0];
            Ok((p.backend, p.device))
        }
        _ => {
            let mut tried: Vec<(String, Rejected)> = unavailable_backends(&found);
            tried.extend(selection.candidates.iter().map(|v| {
                let why = match v.reason {
                    VerdictReason::SoftwareDevice
                    | VerdictReason::SoftwareDeviceSkipped
                    | VerdictReason::NotForEngine
                    | VerdictReason::SystemRam
                    | VerdictReason::SharedRam
                    | VerdictReason::OffloadedOptimizer => Rejected::SoftwareDevice,
                    VerdictReason::Fits | VerdictReason::TooSmall => Rejected::TooSmall {
                        usable: v.usable_bytes,
                    },
                };
                (format!("{}:{}", v.backend, v.device), why)
            }));
            Err(SelectError {
                required: required_bytes,
                tried,
            })
        }
    }
}

/// The unified-pool design: opens the preferred (or best) device that has `required_bytes` free right now.
/// The error lists every backend tried and why it failed.
pub fn init_backend_with_memory_check(
    preference: Option<BackendKind>,
    required_bytes: u64,
) -> Result<std::sync::Arc<dyn crate::device::DeviceMemory>, SelectError> {
    let found = crate::backend::discover_with(&crate::backend::DiscoverOptions::default());
    let mut tried: Vec<(String, Rejected)> = Vec::new();
    let mut order: Vec<(BackendKind, usize, u64)> = found
        .iter()
        .filter(|b| {
            b.available && b.backend != BackendKind::Nvml && b.backend != BackendKind::Metal
        })
        .flat_map(|b| {
            b.devices
                .iter()
                .map(move |d| (b.backend, d.index, d.free_or_total()))
        })
        .collect();
    order.sort_by_key(|(b, _, free)| {
        (
            preference != Some(*b),
            *b == BackendKind::Cpu,
            std::cmp::Reverse(*free),
        )
    });
    tried.extend(unavailable_backends(&found));
    for (backend, index, _) in order {
        let spec = DeviceSpec::Device { backend, index };
        match crate::backend::open_device(&spec) {
            Ok(dev) => match dev.mem_info() {
                Ok((free, _)) if free >= required_bytes => return Ok(dev),
                Ok((free, _)) => {
                    tried.push((spec.to_string(), Rejected::TooSmall { usable: free }))
                }
                Err(e) => tried.push((spec.to_string(), Rejected::Failed(e.to_string()))),
            },
            Err(e) => tried.push((spec.to_string(), Rejected::Failed(e.reason))),
        }
    }
    Err(SelectError {
        required: required_bytes,
        tried,
    })
}

fn unavailable_backends(found: &[crate::backend::BackendInfo]) -> Vec<(String, Rejected)> {
    found
        .iter()
        .filter(|b| !b.available)
        .map(|b| {
            let why = b.reason.clone().unwrap_or_default();
            (b.backend.to_string(), Rejected::Unavailable(why))
        })
        .collect()
}

/// The unified-pool design: weights, KV cache (one sequence) and activation scratch of a Llama-style model,
/// with activations in the same precision as the weights.
#[allow(clippy::too_many_arguments)]
pub fn estimate_inference_memory(
    hidden_size: usize,
    intermediate_size: usize,
    n_layers: usize,
    vocab_size: usize,
    n_heads: usize,
    n_kv_heads: usize,
    max_seq_len: usize,
    dtype_bytes: usize,
) -> InferenceMemoryEstimate {
    let arch = design_shape(
        hidden_size,
        intermediate_size,
        n_layers,
        vocab_size,
        n_heads,
        n_kv_heads,
    );
    let model_bytes = estimate_model_memory(
        hidden_size,
        intermediate_size,
        n_layers,
        vocab_size,
        n_heads,
        n_kv_heads,
        dtype_bytes,
    );
    let kv_cache_bytes = estimate_kv_cache_memory(
        n_layers,
        n_kv_heads,
        hidden_size / n_heads.max(1),
        max_seq_len,
        dtype_bytes,
    );
    let precision = Precision {
        name: "f32",
        block_bytes: 4,
        block_elems: 1,
    };
    // Settings::inference but for the weights' precision and llama-cpp-python's --swa-full.
    let settings = Settings {
        dtype: Some(precision),
        llamacpp: LlamaCppRun {
            swa_full: true,
            ..LlamaCppRun::default()
        },
        ..Settings::inference(max_seq_len as u64, precision)
    };
    let activation_bytes = usize::try_from(crate::plan::engines::llamacpp::inference_activations(
        &arch, &settings,
    ))
    .unwrap_or(usize::MAX);
    InferenceMemoryEstimate {
        model_bytes,
        kv_cache_bytes,
        activation_bytes,
        total_bytes: model_bytes
            .saturating_add(kv_cache_bytes)
            .saturating_add(activation_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_api_matches() {
        let est = estimate_inference_memory(4096, 14336, 32, 32000, 32, 8, 4096, 4);
        assert_eq!(est.model_bytes, 7_241_732_096 * 4);
        assert_eq!(est.kv_cache_bytes, 2 * 32 * 8 * 128 * 4096 * 4);
        assert_eq!(
            est.total_bytes,
            est.model_bytes + est.kv_cache_bytes + est.activation_bytes
        );
        assert!(est.total_gb() > 27.0);
    }
}
