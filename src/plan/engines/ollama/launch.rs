//! Ollama's launch: the server with the environment the plan was made under, then `ollama run`,
//! whose first request loads the model with `num_ctx` as planned.

use crate::plan::launch::command::{Engine, Launch, LaunchCommand, NoLaunch, Role};
use crate::plan::Plan;

/// `ollama serve` with `OLLAMA_CONTEXT_LENGTH` (and the other settings asked), then `ollama run
/// NAME`.
pub(crate) fn launch(name: &str, plan: &Plan) -> Result<Launch, NoLaunch> {
    let Some(a) = plan.ollama() else {
        return Err(NoLaunch::NoPlan);
    };
    let host = plan
        .placements
        .first()
        .map_or_else(|| "localhost".to_string(), |p| p.host.clone());
    let mut env = vec![("OLLAMA_CONTEXT_LENGTH".to_string(), a.num_ctx.to_string())];
    if a.num_parallel != 1 {
        env.push(("OLLAMA_NUM_PARALLEL".into(), a.num_parallel.to_string()));
    }
    match a.flash_attn {
        "on" => env.push(("OLLAMA_FLASH_ATTENTION".into(), "1".into())),
        "off" => env.push(("OLLAMA_FLASH_ATTENTION".into(), "0".into())),
        _ => {}
    }
    if let Some(kv) = a.kv_cache_type {
        env.push(("OLLAMA_KV_CACHE_TYPE".into(), kv.to_string()));
    }
    // The runner Ollama starts is llama-server, which reads its fit margin from here.
    if a.llamacpp.margin_bytes != crate::plan::engines::FIT_MARGIN {
        env.push((
            "LLAMA_ARG_FIT_TARGET".into(),
            (a.llamacpp.margin_bytes >> 20).to_string(),
        ));
    }
    Ok(Launch {
        engine: Engine::Ollama,
        commands: vec![
            LaunchCommand {
                host: host.clone(),
                role: Role::Server,
                env,
                argv: vec!["ollama".into(), "serve".into()],
            },
            LaunchCommand {
                host,
                role: Role::Client,
                env: Vec::new(),
                argv: vec!["ollama".into(), "run".into(), name.to_string()],
            },
        ],
        notes: Vec::new(),
    })
}
