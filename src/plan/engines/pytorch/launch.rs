//! PyTorch's launch: `torchrun` on the plan's GPUs, one rank a GPU, for the user's training
//! script, with what the script must do as the plan assumed (FSDP2, DDP, DeepSpeed).

use super::training::Recipe;
use crate::plan::engines::Settings;
use crate::plan::launch::command::{
    gpus, visible, Engine, Fsdp2Precision, Launch, LaunchCommand, LaunchNote, Role,
};
use crate::plan::Plan;

/// `torchrun` on the plan's GPUs, one FSDP2, DDP or DeepSpeed rank a GPU, for the user's
/// training script; `None` for a step on one GPU.
/// `recipe` is the one the step was planned with (the estimate's, which follows the
/// checkpoint's precision where none was asked).
pub fn torchrun(plan: &Plan, settings: &Settings, recipe: Option<Recipe>) -> Option<Launch> {
    let note = match (
        settings.pytorch.fsdp,
        settings.pytorch.ddp,
        settings.pytorch.deepspeed,
    ) {
        (Some(f), _, _) => LaunchNote::Fsdp2 {
            reshard_after_forward: f.reshard_after_forward,
            precision: recipe.map(Fsdp2Precision::of),
        },
        (None, Some(d), _) => LaunchNote::Ddp {
            bucket_view: d.bucket_view,
            zero1: d.zero1.is_some(),
        },
        (None, None, Some(d)) => LaunchNote::DeepSpeed {
            stage: d.stage.number(),
            micro_batch: settings.batch,
            offload_optimizer: d.offload_optimizer,
        },
        (None, None, None) => return None,
    };
    let gpu = gpus(plan);
    Some(Launch {
        engine: Engine::Torchrun,
        commands: vec![LaunchCommand {
            host: gpu.first().map_or_else(String::new, |p| p.host.clone()),
            role: Role::Trainer,
            env: visible(&gpu),
            argv: vec![
                "torchrun".into(),
                "--standalone".into(),
                "--nproc-per-node".into(),
                gpu.len().to_string(),
                "train.py".into(),
            ],
        }],
        notes: vec![note],
    })
}
