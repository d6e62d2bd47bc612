//! The launch commands for hand-made plans, as printed.

use super::*;
use crate::backend::BackendKind;
use crate::plan::Placement;

fn at(host: &str, backend: BackendKind, device: usize, layers: u64) -> Placement {
    Placement {
        host: host.into(),
        backend,
        device,
        bytes: 1 << 30,
        layers: Some(layers),
    }
}

fn plan(kind: PlanKind, placements: Vec<Placement>, gpu_layers: u64) -> Plan {
    Plan {
        kind,
        placements,
        gpu_layers: Some(gpu_layers),
        max_context: None,
        shortfall_bytes: None,
        capacity: None,
        account: None,
        accounting: crate::plan::Accounting::Generic,
    }
}

const S: LaunchSettings = LaunchSettings {
    context: 8192,
    batch: 4,
    layers: 80,
    memory_fraction: 0.9,
    cpu_offload_gb: None,
    pooling: None,
    vllm: VllmFlags {
        dtype: None,
        fp8_cache: false,
        enforce_eager: false,
        max_num_batched_tokens: None,
        max_num_seqs: None,
        block_size: None,
        stored_quantized: false,
        speculative_config: None,
        lora: None,
        limit_mm_per_prompt: None,
        mm_processor_kwargs: None,
    },
    llamacpp_cache_type: None,
};

fn argv(c: &LaunchCommand) -> String {
    c.argv.join(" ")
}

#[test]
fn llama_cpp_across_hosts_puts_rpc_devices_first() {
    let p = plan(
        PlanKind::CrossHost,
        vec![
            at("a", BackendKind::Cuda, 0, 30),
            at("a", BackendKind::Cuda, 1, 30),
            at("b", BackendKind::Cuda, 3, 20),
        ],
        80,
    );
    let l = launch(Engine::LlamaCpp, &ModelRef::Gguf("m.gguf".into()), &p, &S).unwrap();
    assert_eq!(l.commands.len(), 2);
    let worker = &l.commands[0];
    assert_eq!((worker.host.as_str(), worker.role), ("b", Role::RpcWorker));
    assert_eq!(worker.env, [("CUDA_VISIBLE_DEVICES".into(), "3".into())]);
    assert_eq!(argv(worker), "rpc-server -H 0.0.0.0 -p 50052");
    let server = &l.commands[1];
    assert_eq!((server.host.as_str(), server.role), ("a", Role::Server));
    assert_eq!(server.env, [("CUDA_VISIBLE_DEVICES".into(), "0,1".into())]);
    assert_eq!(
        argv(server),
        "llama-server -m m.gguf -c 32768 -np 4 -ngl 81 --tensor-split 20,30,30 \
         --rpc b:50052"
    );
}

// llama.cpp's own fit across hosts that leaves layers in the server's RAM: `-ngl` is the
// fit's, and an override to the RPC device names its buffer by the worker's endpoint, one to
// the server's GPU by its local index.
#[test]
fn llama_cpp_across_hosts_launches_the_fits_layers_and_overrides() {
    use crate::plan::engines::llamacpp::TensorOverride;
    let mut p = plan(
        PlanKind::CrossHost,
        vec![
            at("a", BackendKind::Cuda, 0, 27),
            at("b", BackendKind::Cuda, 2, 21),
            at("a", BackendKind::Cpu, 0, 32),
        ],
        49,
    );
    let pattern = |l: u64| crate::model::FfnMove::Experts.pattern(l);
    let account = crate::plan::engines::LlamaCppAccount {
        n_gpu_layers: 49,
        tensor_split: Some(vec![21, 28]),
        overrides: vec![
            TensorOverride {
                layer: 3,
                what: crate::model::FfnMove::Experts,
                to: Some(0),
                pattern: pattern(3),
            },
            TensorOverride {
                layer: 40,
                what: crate::model::FfnMove::Experts,
                to: Some(1),
                pattern: pattern(40),
            },
        ],
        repeating_layers: 80,
        margin_bytes: 1 << 30,
        context: 32768,
        context_fitted: false,
        devices: Vec::new(),
        host: Default::default(),
        flash_attention: true,
        op_offload: true,
        device_rules: crate::plan::engines::llamacpp::LlamaDevice::Cuda,
        vulkan_limits: None,
        device_rules_basis: crate::plan::engines::llamacpp::RulesBasis::Measured,
        unmeasured_rules: Vec::new(),
        kv_unified: false,
        one_gpu: false,
        rpc_devices: 1,
        rpc_device_rules: vec![crate::plan::engines::llamacpp::LlamaDevice::Cuda],
        projector: None,
        lora: None,
        draft: None,
    };
    p.account = Some(crate::plan::EngineAccount::LlamaCpp(account));
    let l = launch(Engine::LlamaCpp, &ModelRef::Gguf("m.gguf".into()), &p, &S).unwrap();
    assert_eq!(argv(&l.commands[0]), "rpc-server -H 0.0.0.0 -p 50052");
    assert_eq!(
        argv(&l.commands[1]),
        "llama-server -m m.gguf -c 32768 -np 4 -ngl 49 --tensor-split 21,28 \
         -ot blk\\.3\\.ffn_(up|down|gate_up|gate)_(ch|)exps=RPC0[b:50052],\
         blk\\.40\\.ffn_(up|down|gate_up|gate)_(ch|)exps=CUDA0 --rpc b:50052"
    );
}

#[test]
fn llama_cpp_offload_and_vllm_refusals() {
    let offload = plan(
        PlanKind::CpuOffload,
        vec![
            at("a", BackendKind::Cuda, 0, 50),
            at("a", BackendKind::Cpu, 0, 30),
        ],
        50,
    );
    let l = launch(
        Engine::LlamaCpp,
        &ModelRef::Gguf("m.gguf".into()),
        &offload,
        &S,
    )
    .unwrap();
    assert_eq!(
        argv(&l.commands[0]),
        "llama-server -m m.gguf -c 32768 -np 4 -ngl 50"
    );
    let v = launch(
        Engine::Vllm,
        &ModelRef::Checkpoint("org/m".into()),
        &offload,
        &S,
    )
    .unwrap();
    assert_eq!(
        argv(&v.commands[0]),
        "vllm serve org/m --max-model-len 8192 --gpu-memory-utilization 0.9 --cpu-offload-gb 1"
    );
    assert_eq!(
        launch(Engine::Vllm, &ModelRef::Gguf("m.gguf".into()), &offload, &S),
        Err(NoLaunch::NeedsCheckpoint)
    );
    assert_eq!(
        launch(
            Engine::LlamaCpp,
            &ModelRef::Checkpoint("org/m".into()),
            &offload,
            &S
        ),
        Err(NoLaunch::NeedsGguf)
    );
}

#[test]
fn vllm_tensor_parallel_inside_hosts_pipeline_across() {
    let p = plan(
        PlanKind::CrossHost,
        vec![
            at("a", BackendKind::Cuda, 0, 20),
            at("a", BackendKind::Cuda, 1, 20),
            at("b", BackendKind::Cuda, 0, 20),
            at("b", BackendKind::Cuda, 1, 20),
        ],
        80,
    );
    let l = launch(Engine::Vllm, &ModelRef::Checkpoint("org/m".into()), &p, &S).unwrap();
    let lines: Vec<(String, Role, String)> = l
        .commands
        .iter()
        .map(|c| (c.host.clone(), c.role, argv(c)))
        .collect();
    assert_eq!(
        lines,
        [
            (
                "a".into(),
                Role::RayHead,
                "ray start --head --port 6379".into()
            ),
            (
                "b".into(),
                Role::RayWorker,
                "ray start --address a:6379".into()
            ),
            (
                "a".into(),
                Role::Server,
                "vllm serve org/m --max-model-len 8192 --gpu-memory-utilization 0.9 \
                 --tensor-parallel-size 2 --pipeline-parallel-size 2 \
                 --distributed-executor-backend ray"
                    .into()
            ),
        ]
    );
    // Unequal shares vLLM cannot reproduce: refused, not printed.
    let uneven = plan(
        PlanKind::LayerSplit,
        vec![
            at("a", BackendKind::Cuda, 0, 60),
            at("a", BackendKind::Cuda, 1, 20),
        ],
        80,
    );
    assert_eq!(
        launch(
            Engine::Vllm,
            &ModelRef::Checkpoint("org/m".into()),
            &uneven,
            &S
        ),
        Err(NoLaunch::UnevenStages {
            layers_per_stage: 40
        })
    );
}
