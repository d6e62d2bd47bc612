//! SGLang's launch: `python -m sglang.launch_server` on the plan's GPUs, with the tensor-parallel
//! size, static memory fraction and context length the plan was made under, and the flags asked.

use crate::plan::launch::command::{gpus, visible, Engine, Launch, LaunchCommand, NoLaunch, Role};
use crate::plan::Plan;

/// `launch_server` for `model` (a Hub id or a checkpoint folder) on the plan's GPUs.
pub(crate) fn launch(model: &str, plan: &Plan) -> Result<Launch, NoLaunch> {
    let gpu = gpus(plan);
    let Some(f) = plan.sglang() else {
        return Err(NoLaunch::NoPlan);
    };
    if gpu.is_empty() {
        return Err(NoLaunch::NoGpu);
    }
    let mut argv: Vec<String> = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        model,
        "--tp",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    argv.push(f.tensor_parallel.to_string());
    argv.extend([
        "--mem-fraction-static".into(),
        format!("{}", f.mem_fraction_static),
        "--context-length".into(),
        f.context_len.to_string(),
    ]);
    if f.kv_dtype == "torch.float8_e4m3fn" {
        argv.extend(["--kv-cache-dtype".into(), "fp8_e4m3".into()]);
    }
    if let Some(d) = &f.draft {
        argv.extend(["--speculative-algorithm".into(), d.algorithm.flag().into()]);
        if let Some(path) = &f.draft_model {
            argv.extend(["--speculative-draft-model-path".into(), path.clone()]);
        }
    }
    if f.cuda_graph_max_bs == 0 {
        argv.push("--disable-cuda-graph".into());
    }
    if let Some(n) = f.max_running_requests_asked {
        argv.extend(["--max-running-requests".into(), n.to_string()]);
    }
    if let Some(n) = f.max_total_tokens_asked {
        argv.extend(["--max-total-tokens".into(), n.to_string()]);
    }
    if let Some(n) = f.chunked_prefill_size_asked {
        argv.extend(["--chunked-prefill-size".into(), n.to_string()]);
    }
    Ok(Launch {
        engine: Engine::Sglang,
        commands: vec![LaunchCommand {
            host: gpu[0].host.clone(),
            role: Role::Server,
            env: visible(&gpu),
            argv,
        }],
        notes: Vec::new(),
    })
}
