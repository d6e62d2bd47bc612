//! PyTorch training on one GPU (`select --mode train`): the step's peak as
//! [`super::training`] walks it, with the estimate's `--overhead` (the CUDA context) and
//! `--fragmentation-reserve` (the caching allocator's slack), against each GPU's free (else
//! total) memory. No serving engine's rule applies, and no generic fraction is stacked on top.
//! With `--fsdp N` the step is one FSDP2 rank's, planned on the N GPUs of one host with the
//! most memory (`torchrun --nproc-per-node N`); with `--ddp` one DDP rank on every GPU of the
//! host where most hold one (with `--zero1 N`, on N GPUs of one host); with
//! `--deepspeed-zero1/2/3 N` one DeepSpeed rank on N GPUs of one host. A step that
//! fits nowhere gets no plan, with the closest GPU's shortfall.

use crate::backend::BackendKind;
use crate::model::ModelSource;
use crate::plan::engines::{EnginePlanner, EstimateOverflow, Planned, Settings};
use crate::plan::policy::{Usable, UsableRule};
use crate::plan::{
    Accounting, Candidate, Placement, Plan, PlanKind, Selection, Verdict, VerdictReason,
};

/// PyTorch's planner: one training step, on one GPU or its ranks.
#[derive(Debug, Clone, Copy)]
pub struct Pytorch;

impl EnginePlanner for Pytorch {
    fn plan(
        &self,
        source: &ModelSource,
        settings: &Settings,
        candidates: &[Candidate],
    ) -> Result<Planned, EstimateOverflow> {
        select_training(source, settings, candidates).map(|s| Planned::Own(Box::new(s)))
    }
}

/// The plan for one training step of `source` under `settings` over `candidates`.
pub fn select_training(
    source: &ModelSource,
    settings: &Settings,
    candidates: &[Candidate],
) -> Result<Selection, EstimateOverflow> {
    let estimate = source.estimate(settings)?;
    let need = estimate.total_bytes;
    // ZeRO-Offload: each rank's optimizer in its host's RAM.
    let host_rank = estimate.training_step.as_ref().map_or(0, |s| s.peak.host);
    let usable = |c: &Candidate| {
        let base = c.free_bytes.unwrap_or(c.total_bytes);
        Usable {
            bytes: base,
            base_bytes: base,
            base_is_free: c.free_bytes.is_some(),
            rule: UsableRule::WholeDevice,
        }
    };
    let gpu = |c: &Candidate| c.is_gpu() && c.mig_profile.is_none();
    let best = candidates
        .iter()
        .filter(|c| gpu(c))
        .max_by_key(|c| usable(c).bytes);
    if let Some(f) = settings.pytorch.fsdp {
        let ranks = (PlanKind::Sharded, f.world);
        return Ok(sharded((need, 0), ranks, candidates, &usable, &gpu));
    }
    // ZeRO-1 and DeepSpeed's stages share the optimizer state among their ranks: exactly that
    // many GPUs.
    if let Some(world) = settings
        .pytorch
        .ddp
        .and_then(|d| d.zero1)
        .or(settings.pytorch.deepspeed.map(|d| d.world))
    {
        let ranks = (PlanKind::DataParallel, world);
        let host_need = host_rank.saturating_mul(world);
        return Ok(sharded((need, host_need), ranks, candidates, &usable, &gpu));
    }
    if settings.pytorch.ddp.is_some() {
        return Ok(data_parallel(need, candidates, &usable, &gpu));
    }
    let chosen = best.filter(|c| usable(c).bytes >= need);
    let candidates: Vec<Verdict> = candidates
        .iter()
        .map(|c| {
            let u = usable(c);
            let fits = gpu(c) && u.bytes >= need;
            let reason = match (gpu(c), fits) {
                (false, _) => VerdictReason::NotForEngine,
                (true, true) => VerdictReason::Fits,
                (true, false) => VerdictReason::TooSmall,
            };
            Verdict::of(c, u, need, fits, reason, None)
        })
        .collect();
    let plan = match chosen {
        Some(c) => training_plan(PlanKind::Single, &[c], need),
        None => Plan::none(
            None,
            best.map(|c| need.saturating_sub(usable(c).bytes)),
            Accounting::PytorchTraining,
        ),
    };
    Ok(Selection {
        required_bytes: need,
        plan,
        candidates,
    })
}

/// One rank (FSDP2's, or DDP's under ZeRO-1: `kind`) on each of `world` GPUs of one host: the
/// host whose `world`-th largest GPU has the most memory; with none that holds a rank on
/// `world` GPUs, the closest's shortfall. A host must also have `host_need` bytes of RAM
/// (ZeRO-Offload's optimizers, all its ranks'; 0 for none).
fn sharded(
    (need, host_need): (u64, u64),
    (kind, world): (PlanKind, u64),
    candidates: &[Candidate],
    usable: &dyn Fn(&Candidate) -> Usable,
    gpu: &dyn Fn(&Candidate) -> bool,
) -> Selection {
    let n = usize::try_from(world).unwrap_or(usize::MAX);
    // The host's RAM short of `host_need`, if any.
    let ram_short = |h: &str| {
        let ram = candidates
            .iter()
            .filter(|c| c.host == h && c.backend == BackendKind::Cpu)
            .map(|c| usable(c).bytes)
            .max()
            .unwrap_or(0);
        host_need.saturating_sub(ram)
    };
    let mut hosts: Vec<&str> = candidates
        .iter()
        .filter(|c| gpu(c))
        .map(|c| c.host.as_str())
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    // Each host's `world` largest GPUs, the smallest of them deciding; a host whose RAM holds
    // the offloaded optimizers before one whose does not.
    let best = hosts
        .iter()
        .filter_map(|h| {
            let mut on: Vec<&Candidate> = candidates
                .iter()
                .filter(|c| gpu(c) && c.host == *h)
                .collect();
            on.sort_by_key(|c| std::cmp::Reverse(usable(c).bytes));
            on.truncate(n);
            (on.len() == n).then_some(on)
        })
        .max_by_key(|on| {
            let gpu_fits = on.last().is_some_and(|c| usable(c).bytes >= need);
            let ram_holds = on.first().is_some_and(|c| ram_short(&c.host) == 0);
            let smallest = on.last().map_or(0, |c| usable(c).bytes);
            (gpu_fits && ram_holds, smallest)
        });
    let fits = |c: &Candidate| gpu(c) && usable(c).bytes >= need;
    let gpus_fit = best.as_ref().filter(|on| on.iter().all(|c| fits(c)));
    let ram_shortfall = gpus_fit
        .and_then(|on| on.first())
        .map(|c| ram_short(&c.host));
    let chosen = gpus_fit.filter(|_| ram_shortfall == Some(0));
    let ranks = Ranks {
        on: chosen.map_or(&[][..], Vec::as_slice),
        world,
        host_need,
    };
    let verdicts = ranks.verdicts(candidates, need, usable, gpu);
    let plan = match chosen {
        Some(on) => training_plan(kind, on, need),
        // The GPUs hold the ranks but the host's RAM not their offloaded optimizers.
        None if gpus_fit.is_some() => Plan::none(None, ram_shortfall, Accounting::PytorchTraining),
        None => Plan::none(
            None,
            best.and_then(|on| on.last().map(|c| need.saturating_sub(usable(c).bytes))),
            Accounting::PytorchTraining,
        ),
    };
    Selection {
        required_bytes: need,
        plan,
        candidates: verdicts,
    }
}

/// One DDP rank on every GPU that holds one, of the host where most do (the whole model is on
/// each, so more ranks cost no rank more memory); with none, the largest GPU's shortfall.
fn data_parallel(
    need: u64,
    candidates: &[Candidate],
    usable: &dyn Fn(&Candidate) -> Usable,
    gpu: &dyn Fn(&Candidate) -> bool,
) -> Selection {
    let fits = |c: &Candidate| gpu(c) && usable(c).bytes >= need;
    let mut hosts: Vec<&str> = candidates
        .iter()
        .filter(|c| fits(c))
        .map(|c| c.host.as_str())
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    let on: Vec<&Candidate> = hosts
        .iter()
        .map(|h| {
            candidates
                .iter()
                .filter(|c| fits(c) && c.host == *h)
                .collect::<Vec<_>>()
        })
        .max_by_key(Vec::len)
        .unwrap_or_default();
    let ranks = Ranks {
        on: &on,
        world: u64::try_from(on.len()).unwrap_or(u64::MAX),
        host_need: 0,
    };
    let verdicts = ranks.verdicts(candidates, need, usable, gpu);
    let best = candidates
        .iter()
        .filter(|c| gpu(c))
        .map(|c| usable(c).bytes)
        .max();
    let plan = if on.is_empty() {
        Plan::none(
            None,
            best.map(|b| need.saturating_sub(b)),
            Accounting::PytorchTraining,
        )
    } else {
        training_plan(PlanKind::DataParallel, &on, need)
    };
    Selection {
        required_bytes: need,
        plan,
        candidates: verdicts,
    }
}

/// The GPUs a plan puts one rank each on, in rank order, of `world`, and the RAM their host
/// needs for ZeRO-Offload's optimizers (0 for none).
struct Ranks<'a, 'c> {
    on: &'a [&'c Candidate],
    world: u64,
    host_need: u64,
}

impl Ranks<'_, '_> {
    /// Every candidate's verdict: whether it holds a rank's `need`, and its rank in the plan.
    fn verdicts(
        &self,
        candidates: &[Candidate],
        need: u64,
        usable: &dyn Fn(&Candidate) -> Usable,
        gpu: &dyn Fn(&Candidate) -> bool,
    ) -> Vec<Verdict> {
        candidates
            .iter()
            .map(|c| {
                if self.host_need > 0 && c.backend == BackendKind::Cpu {
                    let fits = usable(c).bytes >= self.host_need;
                    let reason = VerdictReason::OffloadedOptimizer;
                    return Verdict::of(c, usable(c), self.host_need, fits, reason, None);
                }
                let fits = gpu(c) && usable(c).bytes >= need;
                let reason = match (gpu(c), fits) {
                    (false, _) => VerdictReason::NotForEngine,
                    (true, true) => VerdictReason::Fits,
                    (true, false) => VerdictReason::TooSmall,
                };
                let rank =
                    self.on
                        .iter()
                        .position(|o| std::ptr::eq(*o, c))
                        .map(|r| crate::plan::Rank {
                            rank: u64::try_from(r).unwrap_or(0),
                            of: self.world,
                            stage: 0,
                            stages: 1,
                        });
                Verdict::of(c, usable(c), need, fits, reason, rank)
            })
            .collect()
    }
}

/// A training plan of `kind`: `need` bytes on each of `on`.
fn training_plan(kind: PlanKind, on: &[&Candidate], need: u64) -> Plan {
    Plan {
        kind,
        placements: on
            .iter()
            .map(|c| Placement {
                host: c.host.clone(),
                backend: c.backend,
                device: c.device,
                bytes: need,
                layers: None,
            })
            .collect(),
        gpu_layers: None,
        max_context: None,
        shortfall_bytes: None,
        capacity: None,
        account: None,
        accounting: Accounting::PytorchTraining,
    }
}
