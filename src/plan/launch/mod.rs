//! Launch commands for the engines users serve with, built from a plan as data (program,
//! arguments, environment, host); the output layer renders them as shell lines.
//!
//! llama.cpp: `llama-server` with `-ngl` (layers on GPUs), `--tensor-split` (each device's
//! share, in llama.cpp's device order: RPC servers first, then local GPUs), `--rpc` for GPUs on
//! other hosts (each served by an `rpc-server`), `-c` as the whole KV cache shared by `-np`
//! slots. vLLM: `vllm serve` with tensor parallelism inside a host and pipeline parallelism
//! across hosts (or over unequal GPUs), `--cpu-offload-gb` for offload, `--max-model-len` and
//! `--gpu-memory-utilization` from the policy.
//!
//! The shared vocabulary is in [`command`]; each engine's command in its own folder
//! (`plan/engines/*/launch.rs`).

pub mod command;

pub use crate::plan::engines::pytorch::torchrun;
pub use command::{
    Engine, Fsdp2Precision, Launch, LaunchCommand, LaunchNote, LaunchSettings, ModelRef, NoLaunch,
    Role, VllmFlags,
};

use crate::plan::engines::{llamacpp, ollama, sglang, vllm};
use crate::plan::{Plan, PlanKind};

/// The launch of `engine` for `plan`, or why there is none.
pub fn launch(
    engine: Engine,
    model: &ModelRef,
    plan: &Plan,
    s: &LaunchSettings,
) -> Result<Launch, NoLaunch> {
    if plan.kind == PlanKind::None {
        return Err(NoLaunch::NoPlan);
    }
    if plan.gpu_layers.is_none() && plan.kind != PlanKind::Single {
        return Err(NoLaunch::NotAModel);
    }
    match (engine, model) {
        (Engine::LlamaCpp, ModelRef::Gguf(path) | ModelRef::OllamaStore { blob: path, .. }) => Ok(
            llamacpp::launch::launch(&["-m".into(), path.display().to_string()], plan, s),
        ),
        (Engine::LlamaCpp, ModelRef::HubGguf(id)) => Ok(llamacpp::launch::launch(
            &["-hf".into(), id.clone()],
            plan,
            s,
        )),
        (Engine::LlamaCpp, ModelRef::Registry(_)) => Err(NoLaunch::NotPulled),
        (Engine::LlamaCpp, _) => Err(NoLaunch::NeedsGguf),
        (Engine::Vllm, ModelRef::Checkpoint(id)) => vllm::launch::launch(id, plan, s),
        (Engine::Vllm, _) => Err(NoLaunch::NeedsCheckpoint),
        (Engine::Sglang, ModelRef::Checkpoint(id)) => sglang::launch::launch(id, plan),
        (Engine::Sglang, _) => Err(NoLaunch::NeedsCheckpoint),
        (Engine::Ollama, ModelRef::OllamaStore { name, .. }) => ollama::launch::launch(name, plan),
        (Engine::Ollama, ModelRef::Registry(repo)) => {
            ollama::launch::launch(repo.strip_prefix("ollama:").unwrap_or(repo), plan)
        }
        (Engine::Ollama, ModelRef::HubGguf(id)) => {
            ollama::launch::launch(&format!("hf.co/{id}"), plan)
        }
        (Engine::Ollama, ModelRef::Gguf(_)) => Err(NoLaunch::NotInOllama),
        (Engine::Ollama, ModelRef::Checkpoint(_)) => Err(NoLaunch::NotAnOllamaModel),
        (Engine::Torchrun, _) => Err(NoLaunch::NoPlan),
    }
}

#[cfg(test)]
mod tests;
