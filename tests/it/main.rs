//! The integration tests, one binary with a module per area (linking each area on its own
//! cost minutes on two cores). `common` holds what the areas share: the binary under test,
//! fixtures, the stand-in driver libraries and backend gating.

mod common;

mod baselines;
mod bench_alloc;
mod bench_ci;
mod bench_outputs;
mod bench_runs;
mod bench_traces;
mod checkpoint_sizes;
mod ci_examples;
mod cli;
mod device_memory;
mod discover;
mod encoders;
mod estimate;
mod estimate_input;
mod generate_features;
mod generated_files;
mod hub;
mod llamacpp_devices;
mod llamacpp_draft;
mod llamacpp_fit_context;
mod llamacpp_gemma4;
mod llamacpp_gemma4_assistant;
mod llamacpp_hosts;
mod llamacpp_lora;
mod llamacpp_mmproj;
mod llamacpp_moe_select;
mod llamacpp_reference;
mod llamacpp_vulkan;
mod ollama;
mod ollama_logs;
mod parser_fuzz;
mod pickle_bounds;
mod pool_behaviour;
mod pool_properties;
mod pool_threads;
mod pytorch_gpu;
mod pytorch_reference;
mod regression_stats;
mod select;
mod select_inventory;
mod sglang;
mod sglang_reference;
mod stress;
mod training_fsdp;
mod transfers;
mod vllm_cuda_graphs;
mod vllm_feature_logs;
mod vllm_features;
mod vllm_gemma4;
mod vllm_pages_2026;
mod vllm_reference;
mod vllm_vlm_logs;
