//! The ways a requirement can be placed, tried in this order, the first that fits winning: one
//! device ([`single`]), tensor parallel over identical GPUs of a host ([`tensor_parallel`]),
//! layers split over the GPUs of a host ([`layer_split`]) or of several hosts ([`cross_host`]),
//! and partial CPU offload ([`offload`]). Each looks at the same [`Devices`] and says what it
//! would place where, or nothing.

mod cross_host;
mod layer_split;
mod layers;
mod offload;
mod single;
mod tensor_parallel;

pub use layers::split_layers;

use super::{Candidate, Placement, PlanKind, Policy, Requirement};
use crate::backend::BackendKind;

/// What every strategy looks at: the requirement, the policy and the devices, sorted once.
pub(super) struct Devices<'a> {
    pub req: &'a Requirement,
    pub policy: &'a Policy,
    pub candidates: &'a [Candidate],
    /// GPUs (and devices of the preferred backend), MIG slices included.
    pub gpus: Vec<&'a Candidate>,
    /// Whole GPUs only: MIG slices cannot form a tensor- or pipeline-parallel group.
    pub whole_gpus: Vec<&'a Candidate>,
    /// Devices a single-device plan may use, best first: the preferred backend, then GPUs by
    /// usable memory; the CPU only when asked for or when there is no GPU at all.
    pub singles: Vec<&'a Candidate>,
}

impl<'a> Devices<'a> {
    pub fn new(req: &'a Requirement, candidates: &'a [Candidate], policy: &'a Policy) -> Self {
        let gpus: Vec<&Candidate> = candidates
            .iter()
            .filter(|c| {
                c.is_gpu() || policy.prefer == Some(c.backend) && c.backend != BackendKind::Cpu
            })
            .collect();
        let mut singles = gpus.clone();
        if policy.prefer == Some(BackendKind::Cpu) || gpus.is_empty() {
            singles.extend(candidates.iter().find(|c| c.backend == BackendKind::Cpu));
        }
        singles.sort_by_key(|c| (rank(c, policy.prefer), std::cmp::Reverse(policy.usable(c))));
        let whole_gpus = gpus
            .iter()
            .copied()
            .filter(|c| c.mig_profile.is_none())
            .collect();
        Devices {
            req,
            policy,
            candidates,
            gpus,
            whole_gpus,
            singles,
        }
    }

    /// The system RAM of `host`, when the inventory lists it.
    fn cpu_of(&self, host: &str) -> Option<&'a Candidate> {
        self.candidates
            .iter()
            .find(|c| c.backend == BackendKind::Cpu && c.host == host)
    }
}

/// A placement a strategy found.
pub(super) struct Found {
    pub kind: PlanKind,
    pub placements: Vec<Placement>,
    /// Layers on GPUs, when the plan counts layers.
    pub gpu_layers: Option<u64>,
}

/// The first strategy, in order, that places the requirement.
pub(super) fn first_fit(d: &Devices<'_>) -> Option<Found> {
    single::plan(d)
        .or_else(|| tensor_parallel::plan(d))
        .or_else(|| layer_split::plan(d))
        .or_else(|| cross_host::plan(d))
        .or_else(|| offload::plan(d))
}

/// Single-device preference: the preferred backend, then hardware GPUs, then other devices,
/// the CPU last.
fn rank(c: &Candidate, prefer: Option<BackendKind>) -> u8 {
    match (prefer, c.backend) {
        (Some(p), b) if p == b => 0,
        _ if c.is_gpu() => 1,
        _ if c.backend == BackendKind::Cpu => 3,
        _ => 2,
    }
}

/// `c`'s whole share: `bytes` of it, with `layers` when the plan counts layers.
fn placement(c: &Candidate, bytes: u64, layers: Option<u64>) -> Placement {
    Placement {
        host: c.host.clone(),
        backend: c.backend,
        device: c.device,
        bytes,
        layers,
    }
}
