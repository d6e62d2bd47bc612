//! llama.cpp's launch: `llama-server` with `-ngl` (layers on GPUs), `--tensor-split` (each
//! device's share, in llama.cpp's device order: RPC servers first, then local GPUs), `--rpc` for
//! GPUs on other hosts (each served by an `rpc-server`), `-c` as the whole KV cache shared by
//! `-np` slots, and the fit's `-ot` overrides.

use crate::backend::BackendKind;
use crate::plan::launch::command::{
    gpus, visible, Engine, Launch, LaunchCommand, LaunchNote, LaunchSettings, Role,
};
use crate::plan::{Placement, Plan, PlanKind};

const RPC_PORT: u16 = 50052;

/// llama-server's mode: one KV cache for the `-np` sequences where the plan keeps them so
/// (llama-server's default is a stream each); an encoder's embeddings, or a reranker's scores.
fn server_mode(s: &LaunchSettings, unified: bool) -> Vec<String> {
    let mut flags = Vec::new();
    if unified {
        flags.push("--kv-unified".into());
    }
    match s.pooling {
        Some(crate::model::Pooling::Rank) => flags.push("--rerank".into()),
        Some(_) => flags.push("--embedding".into()),
        None => {}
    }
    flags
}

/// The port of the `i`-th other host's `rpc-server`.
fn rpc_port(i: usize) -> u16 {
    RPC_PORT.saturating_add(u16::try_from(i).unwrap_or(u16::MAX))
}

/// The name llama.cpp gives the `d`-th device's buffers of `backend` (what `-ot` names).
fn buffer_name(backend: BackendKind, d: usize) -> String {
    match backend {
        BackendKind::Cuda | BackendKind::Nvml => format!("CUDA{d}"),
        BackendKind::Rocm => format!("ROCm{d}"),
        BackendKind::Vulkan => format!("Vulkan{d}"),
        BackendKind::Metal => "Metal".into(),
        BackendKind::Opencl => "OpenCL".into(),
        BackendKind::Cpu => "CPU".into(),
    }
}

/// `llama-server` on the plan's devices, with an `rpc-server` on each other host's GPU;
/// `model` is how the server is told the model (`-m FILE`, `-hf ORG/NAME:QUANT`).
pub(crate) fn launch(model: &[String], plan: &Plan, s: &LaunchSettings) -> Launch {
    let gpu = gpus(plan);
    let server_host = plan.placements[0].host.clone();
    let (local, remote): (Vec<&Placement>, Vec<&Placement>) =
        gpu.iter().partition(|p| p.host == server_host);
    let mut commands = Vec::new();
    let mut rpc = Vec::new();
    for (i, p) in remote.iter().enumerate() {
        let port = rpc_port(i);
        commands.push(LaunchCommand {
            host: p.host.clone(),
            role: Role::RpcWorker,
            env: visible(&[p]),
            argv: vec![
                "rpc-server".into(),
                "-H".into(),
                "0.0.0.0".into(),
                "-p".into(),
                port.to_string(),
            ],
        });
        rpc.push(format!("{}:{port}", p.host));
    }
    // -ngl counts the output layer as one more: layers + 1 puts everything on the GPUs.
    let ngl = match plan.kind {
        PlanKind::CpuOffload => plan.gpu_layers.unwrap_or(0),
        // Across hosts llama.cpp's own fit may leave layers in the server's RAM too.
        PlanKind::CrossHost => plan.llamacpp().map_or(s.layers + 1, |f| f.n_gpu_layers),
        _ if gpu.is_empty() => 0,
        _ => s.layers + 1,
    };
    let mut argv: Vec<String> = vec!["llama-server".into()];
    argv.extend(model.iter().cloned());
    argv.extend([
        "-c".into(),
        plan.llamacpp()
            .map_or(s.context * s.batch, |f| f.context)
            .to_string(),
        "-np".into(),
        s.batch.to_string(),
        "-ngl".into(),
        ngl.to_string(),
    ]);
    argv.extend(server_mode(
        s,
        plan.llamacpp().is_some_and(|f| f.kv_unified),
    ));
    argv.extend(placement_args(plan, &gpu, (&local, &remote)));
    if let Some(t) = s.llamacpp_cache_type {
        argv.extend(["-ctk".into(), t.into(), "-ctv".into(), t.into()]);
    }
    if let Some(d) = plan.llamacpp().and_then(|f| f.draft.as_ref()) {
        argv.extend(draft_args(d));
    }
    // `-hf` fetches the repository's projector itself; a model file needs its own named.
    if let (Some(p), Some("-m")) = (
        plan.llamacpp().and_then(|f| f.projector.as_ref()),
        model.first().map(String::as_str),
    ) {
        argv.extend(["--mmproj".into(), p.path.display().to_string()]);
    }
    if let Some(n) = plan
        .llamacpp()
        .and_then(|f| f.projector.as_ref())
        .and_then(|p| p.image_max_tokens)
    {
        argv.extend(["--image-max-tokens".into(), n.to_string()]);
    }
    for file in plan
        .llamacpp()
        .and_then(|f| f.lora.as_ref())
        .map_or(&[][..], |l| &l.files[..])
    {
        argv.extend(["--lora".into(), file.display().to_string()]);
    }
    if !rpc.is_empty() {
        argv.extend(["--rpc".into(), rpc.join(",")]);
    }
    commands.push(LaunchCommand {
        host: server_host,
        role: Role::Server,
        env: visible(&local),
        argv,
    });
    Launch {
        engine: Engine::LlamaCpp,
        notes: if remote.is_empty() {
            Vec::new()
        } else {
            vec![LaunchNote::Network]
        },
        commands,
    }
}

/// `llama-server`'s flags for what the plan assumed and where it put the layers: `-fa off` and
/// `--no-op-offload` where they differ from llama-server's defaults, the fit's `-ts` (or the
/// plan's split over several GPUs, RPC devices first) and its `-ot` overrides.
/// The draft beside the model: llama-server drafts with it only when told the type
/// (`--spec-type draft-simple`, or `draft-mtp` for a Gemma 4 assistant; a plain `-md` loads it
/// and never drafts).
fn draft_args(d: &super::DraftAccount) -> Vec<String> {
    let (flag, name) = match &d.load {
        super::DraftRef::File(path) => ("-md", path.display().to_string()),
        super::DraftRef::Hub(id) => ("-hfd", id.clone()),
    };
    vec![
        flag.into(),
        name,
        "--spec-type".into(),
        d.spec_type.into(),
        "--spec-draft-n-max".into(),
        d.n_max.to_string(),
        "-ngld".into(),
        d.n_gpu_layers.to_string(),
    ]
}

fn placement_args(
    plan: &Plan,
    gpu: &[&Placement],
    (local, remote): (&[&Placement], &[&Placement]),
) -> Vec<String> {
    let mut argv: Vec<String> = Vec::new();
    let fitted = plan.llamacpp();
    // llama-server's defaults are -fa auto (on here) and operator offload on.
    if fitted.is_some_and(|f| !f.flash_attention) {
        argv.extend(["-fa".into(), "off".into()]);
    }
    if fitted.is_some_and(|f| f.device_rules.offloads_ops() && !f.op_offload) {
        argv.push("--no-op-offload".into());
    }
    if fitted.is_some_and(|f| f.one_gpu) {
        argv.extend(["-sm".into(), "none".into()]);
    }
    if let Some(ts) = fitted.and_then(|f| f.tensor_split.as_ref()) {
        // llama.cpp's fit counts the output layer on the last GPU; trailing zeros are dropped.
        let used = ts.len() - ts.iter().rev().take_while(|&&n| n == 0).count();
        if used > 1 {
            let ts: Vec<String> = ts[..used].iter().map(u64::to_string).collect();
            argv.extend(["--tensor-split".into(), ts.join(",")]);
        }
    } else if gpu.len() > 1 {
        // llama.cpp puts RPC devices before local GPUs.
        let shares: Vec<String> = remote
            .iter()
            .chain(local.iter())
            .map(|p| match plan.kind {
                PlanKind::TensorParallel => "1".to_string(),
                _ => p.layers.unwrap_or(1).to_string(),
            })
            .collect();
        argv.extend(["--tensor-split".into(), shares.join(",")]);
    }
    if let Some(f) = fitted.filter(|f| !f.overrides.is_empty()) {
        let ot: Vec<String> = f
            .overrides
            .iter()
            .filter_map(|o| {
                // The fit counts devices in llama.cpp's order: the RPC devices, then the
                // server's own GPUs.
                let to = match o.to {
                    None => "CPU".to_string(),
                    Some(d) => match remote.get(d) {
                        Some(r) => format!("RPC0[{}:{}]", r.host, rpc_port(d)),
                        None => {
                            let d = d - remote.len();
                            buffer_name(local.get(d)?.backend, d)
                        }
                    },
                };
                Some(format!("{}={to}", o.pattern.as_deref()?))
            })
            .collect();
        argv.extend(["-ot".into(), ot.join(",")]);
    }
    argv
}
