//! vLLM's launch: `vllm serve` with tensor parallelism inside a host and pipeline parallelism
//! across hosts (or over unequal GPUs), `--cpu-offload-gb` for offload, `--max-model-len` and
//! `--gpu-memory-utilization` from the policy, and the flags the plan was made under.

use crate::backend::BackendKind;
use crate::plan::launch::command::{
    gpus, visible, Engine, Launch, LaunchCommand, LaunchNote, LaunchSettings, NoLaunch, Role,
    VllmFlags,
};
use crate::plan::{Placement, Plan, PlanKind};

const RAY_PORT: u16 = 6379;

/// The flags beyond the layout, as `vllm serve` takes them.
fn flags_argv(f: &VllmFlags) -> Vec<String> {
    let mut argv: Vec<String> = Vec::new();
    if let Some((flag, value)) = f.dtype {
        argv.extend([flag.into(), value.into()]);
    }
    if f.fp8_cache {
        argv.extend(["--kv-cache-dtype".into(), "fp8".into()]);
    }
    let numbers = [
        ("--max-num-batched-tokens", f.max_num_batched_tokens),
        ("--max-num-seqs", f.max_num_seqs),
        ("--block-size", f.block_size),
    ];
    for (flag, value) in numbers {
        if let Some(n) = value {
            argv.extend([flag.into(), n.to_string()]);
        }
    }
    if f.enforce_eager {
        argv.push("--enforce-eager".into());
    }
    if let Some(json) = &f.speculative_config {
        argv.extend(["--speculative-config".into(), json.clone()]);
    }
    let multimodal = [
        ("--limit-mm-per-prompt", &f.limit_mm_per_prompt),
        ("--mm-processor-kwargs", &f.mm_processor_kwargs),
    ];
    for (flag, json) in multimodal {
        if let Some(json) = json {
            argv.extend([flag.into(), json.clone()]);
        }
    }
    if let Some(l) = f.lora {
        argv.extend([
            "--enable-lora".into(),
            "--max-loras".into(),
            l.max_loras.to_string(),
            "--max-lora-rank".into(),
            l.max_lora_rank.to_string(),
        ]);
        if let Some(cpu) = l.max_cpu_loras {
            argv.extend(["--max-cpu-loras".into(), cpu.to_string()]);
        }
    }
    argv
}

/// `vllm serve` on the plan's GPUs: tensor parallel inside a host, pipeline stages across hosts
/// (a Ray cluster) or over unequal GPUs, `--cpu-offload-gb` for offload.
pub(crate) fn launch(model: &str, plan: &Plan, s: &LaunchSettings) -> Result<Launch, NoLaunch> {
    let gpu = gpus(plan);
    if gpu.is_empty() {
        return Err(NoLaunch::NoGpu);
    }
    let mut hosts: Vec<&str> = Vec::new();
    for p in &gpu {
        if !hosts.contains(&p.host.as_str()) {
            hosts.push(&p.host);
        }
    }
    let per_host: Vec<usize> = hosts
        .iter()
        .map(|h| gpu.iter().filter(|p| p.host == *h).count())
        .collect();
    let mut notes = Vec::new();
    // Tensor parallel inside a host, pipeline stages across hosts; unequal GPUs (or unequal
    // hosts) become one stage per GPU.
    // vLLM's own plan names its layout; the generic rule's plan kinds map onto one.
    let engine_layout = plan
        .vllm()
        .filter(|_| plan.accounting == crate::plan::Accounting::Vllm)
        .and_then(|f| {
            Some((
                usize::try_from(f.tensor_parallel).ok()?,
                usize::try_from(f.pipeline_parallel).ok()?,
            ))
        });
    let (tp, pp) = engine_layout.unwrap_or(match plan.kind {
        PlanKind::TensorParallel => (gpu.len(), 1),
        PlanKind::LayerSplit => (1, gpu.len()),
        PlanKind::CrossHost if per_host.iter().all(|&n| n == per_host[0]) => {
            (per_host[0], hosts.len())
        }
        PlanKind::CrossHost => (1, gpu.len()),
        _ => (1, 1),
    });
    // Each GPU then holds layers_per_stage / tp layers' worth; the plan's split (by memory)
    // says what each GPU can hold.
    let layers_per_stage = s.layers.div_ceil(pp as u64);
    if pp > 1
        && engine_layout.is_none()
        && gpu
            .iter()
            .any(|p| layers_per_stage > p.layers.unwrap_or(0).saturating_mul(tp as u64))
    {
        return Err(NoLaunch::UnevenStages { layers_per_stage });
    }
    let mut argv: Vec<String> = vec![
        "vllm".into(),
        "serve".into(),
        model.to_string(),
        "--max-model-len".into(),
        s.context.to_string(),
        "--gpu-memory-utilization".into(),
        format!("{}", s.memory_fraction),
    ];
    if tp > 1 {
        argv.extend(["--tensor-parallel-size".into(), tp.to_string()]);
    }
    if pp > 1 {
        argv.extend(["--pipeline-parallel-size".into(), pp.to_string()]);
    }
    if let Some(gb) = cpu_offload_gb(plan, s) {
        argv.extend(["--cpu-offload-gb".into(), gb]);
    }
    argv.extend(flags_argv(&s.vllm));
    if s.vllm.stored_quantized {
        notes.push(LaunchNote::StoredQuantized);
    }
    let partition = layer_partition(plan, s);
    let mut commands = Vec::new();
    let head = plan.placements[0].host.clone();
    if hosts.len() > 1 {
        argv.extend(["--distributed-executor-backend".into(), "ray".into()]);
        commands.extend(ray_cluster(&head, &hosts));
        notes.push(LaunchNote::Network);
    }
    let local: Vec<&Placement> = gpu.iter().copied().filter(|p| p.host == head).collect();
    commands.push(LaunchCommand {
        host: head,
        role: Role::Server,
        env: if hosts.len() > 1 {
            partition.into_iter().collect()
        } else {
            visible(&local).into_iter().chain(partition).collect()
        },
        argv,
    });
    Ok(Launch {
        engine: Engine::Vllm,
        commands,
        notes,
    })
}

/// `--cpu-offload-gb`: what the user gave, or for a CPU-offload plan the GiB its RAM holds.
fn cpu_offload_gb(plan: &Plan, s: &LaunchSettings) -> Option<String> {
    if plan.kind != PlanKind::CpuOffload {
        return s.cpu_offload_gb.map(|gb| format!("{gb}"));
    }
    let cpu_bytes: u64 = plan
        .placements
        .iter()
        .filter(|p| p.backend == BackendKind::Cpu)
        .map(|p| p.bytes)
        .sum();
    Some(cpu_bytes.div_ceil(1 << 30).to_string())
}

/// `VLLM_PP_LAYER_PARTITION`, for stages other than vLLM's own even split.
fn layer_partition(plan: &Plan, s: &LaunchSettings) -> Option<(String, String)> {
    plan.vllm()
        .filter(|f| {
            f.pipeline_parallel > 1
                && f.stage_layers
                    != crate::plan::engines::vllm::stage_layers(s.layers, f.pipeline_parallel)
        })
        .map(|f| {
            let parts: Vec<String> = f.stage_layers.iter().map(u64::to_string).collect();
            ("VLLM_PP_LAYER_PARTITION".to_string(), parts.join(","))
        })
}

/// A Ray cluster over `hosts`: the head on `head`, a worker on each other host.
fn ray_cluster(head: &str, hosts: &[&str]) -> Vec<LaunchCommand> {
    let mut commands = vec![LaunchCommand {
        host: head.to_string(),
        role: Role::RayHead,
        env: Vec::new(),
        argv: vec![
            "ray".into(),
            "start".into(),
            "--head".into(),
            "--port".into(),
            RAY_PORT.to_string(),
        ],
    }];
    for h in hosts.iter().filter(|h| **h != head) {
        commands.push(LaunchCommand {
            host: h.to_string(),
            role: Role::RayWorker,
            env: Vec::new(),
            argv: vec![
                "ray".into(),
                "start".into(),
                "--address".into(),
                format!("{head}:{RAY_PORT}"),
            ],
        });
    }
    commands
}
