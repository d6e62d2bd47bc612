
use builtin;
use str;

set edit:completion:arg-completer[gpumem] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'gpumem'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'gpumem'= {
            cand --color 'When to use colour. `auto` colours a terminal unless NO_COLOR is set'
            cand --json 'Print one JSON document on stdout instead of tables'
            cand -q 'Print only the result: no progress bars, no notes'
            cand --quiet 'Print only the result: no progress bars, no notes'
            cand -v 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace)'
            cand --verbose 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand discover 'List every backend and device with total and free memory; unavailable backends say why'
            cand estimate 'Compute the memory a model needs: weights, KV cache, activations and runtime overhead'
            cand select 'Choose the device, split or CPU offload where a model fits, and say why others do not'
            cand bench-alloc 'Run the pool allocator against a real device and report hit rate, fragmentation, latency'
            cand stress 'Drive a device to memory pressure and prove recovery, fallback, integrity and no leaks'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'gpumem;discover'= {
            cand --backend 'Probe only this backend (repeatable). Default: all of them'
            cand --timeout 'Give up on a backend that has not answered after this long (e.g. 5s, 500ms)'
            cand --format 'Output format. --json is the same as --format json'
            cand --color 'When to use colour. `auto` colours a terminal unless NO_COLOR is set'
            cand --json 'Print one JSON document on stdout instead of tables'
            cand -q 'Print only the result: no progress bars, no notes'
            cand --quiet 'Print only the result: no progress bars, no notes'
            cand -v 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace)'
            cand --verbose 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'gpumem;estimate'= {
            cand -m 'A model from the built-in catalog, by name or alias (e.g. mistral-7b, llama-3.1-70b), or where you keep models: ORG/NAME from the Hugging Face cache (HF_HUB_CACHE, HF_HOME), `ollama:NAME[:TAG]` from Ollama''s store (OLLAMA_MODELS)'
            cand --model 'A model from the built-in catalog, by name or alias (e.g. mistral-7b, llama-3.1-70b), or where you keep models: ORG/NAME from the Hugging Face cache (HF_HUB_CACHE, HF_HOME), `ollama:NAME[:TAG]` from Ollama''s store (OLLAMA_MODELS)'
            cand --config 'A Hugging Face config.json (Llama 2-4, Mistral, Mixtral, Qwen 2-3, Qwen3-Next, Gemma 1-3, Phi-3, Falcon, GPT-NeoX, DeepSeek-V2/V3, Kimi-K2, GLM-4.5, gpt-oss, Mamba, Mamba-2, Jamba, Granite-4.0-H, Nemotron-H, Falcon-H1; others with --allow-generic)'
            cand --gguf 'A GGUF file; only its header is read, never the tensor data'
            cand --safetensors 'A .safetensors file, a directory of shards, or a model.safetensors.index.json'
            cand --dtype 'Weight precision: f32, f16, bf16, fp8, int8, int4, or a GGUF quantization such as q8_0, q4_k_m. Default: the file''s own types for GGUF/safetensors, bf16 otherwise'
            cand --kv-dtype 'KV-cache precision: f32, f16, bf16, fp8, q8_0 or q4_0'
            cand -b 'Sequences processed at once'
            cand --batch 'Sequences processed at once'
            cand -c 'Tokens of context per sequence (prompt plus generated). Default: 4096'
            cand --context 'Tokens of context per sequence (prompt plus generated). Default: 4096'
            cand --ubatch 'Prefill chunk (micro-batch) in tokens; sizes the activation scratch'
            cand --mmproj 'A multimodal projector GGUF (llama.cpp''s mmproj) loaded beside the model: its weights are counted. An Ollama model''s own projector is found in its manifest without this'
            cand --overhead 'Runtime overhead per device (CUDA context, kernels, workspaces)'
            cand --fragmentation-reserve 'Extra percentage kept for allocator fragmentation'
            cand --mode 'Inference (weights, KV cache, activations) or training (plus gradients and optimizer)'
            cand --optimizer 'Optimizer for --mode train'
            cand --recipe 'With --mode train: precision and copies [default: fp32-autocast for f32 weights, bf16 for 16-bit ones, mixed otherwise]'
            cand --lora-rank 'With --recipe lora: the adapters'' rank (r)'
            cand --lora-targets 'With --recipe lora: the projections adapted'
            cand --engine 'Inference by whose memory: llama.cpp''s buffers, or transformers'' `generate` (the context is then the prompt)'
            cand --new-tokens 'With --engine transformers: tokens generated per sequence (max_new_tokens)'
            cand --color 'When to use colour. `auto` colours a terminal unless NO_COLOR is set'
            cand --allow-generic 'Estimate a config.json whose model_type gpumem has no rules for with the generic decoder formula (gated MLP, RMSNorm, no biases) instead of refusing it'
            cand --swa-full 'Sliding-window layers cache the whole context, as llama.cpp''s --swa-full (and the llama-cpp-python default) does. Default: the window plus one micro-batch (llama-server)'
            cand --flash-attention 'Assume flash attention (no full attention-score matrix in memory)'
            cand --checkpointing 'With --mode train: activation checkpointing (keep one activation per layer)'
            cand --list-models 'List the built-in catalog and exit'
            cand --fits 'Compare the total with every discovered device; exit 3 when none fits'
            cand --json 'Print one JSON document on stdout instead of tables'
            cand -q 'Print only the result: no progress bars, no notes'
            cand --quiet 'Print only the result: no progress bars, no notes'
            cand -v 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace)'
            cand --verbose 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'gpumem;select'= {
            cand -m 'A model from the built-in catalog, by name or alias (e.g. mistral-7b, llama-3.1-70b), or where you keep models: ORG/NAME from the Hugging Face cache (HF_HUB_CACHE, HF_HOME), `ollama:NAME[:TAG]` from Ollama''s store (OLLAMA_MODELS)'
            cand --model 'A model from the built-in catalog, by name or alias (e.g. mistral-7b, llama-3.1-70b), or where you keep models: ORG/NAME from the Hugging Face cache (HF_HUB_CACHE, HF_HOME), `ollama:NAME[:TAG]` from Ollama''s store (OLLAMA_MODELS)'
            cand --config 'A Hugging Face config.json (Llama 2-4, Mistral, Mixtral, Qwen 2-3, Qwen3-Next, Gemma 1-3, Phi-3, Falcon, GPT-NeoX, DeepSeek-V2/V3, Kimi-K2, GLM-4.5, gpt-oss, Mamba, Mamba-2, Jamba, Granite-4.0-H, Nemotron-H, Falcon-H1; others with --allow-generic)'
            cand --gguf 'A GGUF file; only its header is read, never the tensor data'
            cand --safetensors 'A .safetensors file, a directory of shards, or a model.safetensors.index.json'
            cand --dtype 'Weight precision: f32, f16, bf16, fp8, int8, int4, or a GGUF quantization such as q8_0, q4_k_m. Default: the file''s own types for GGUF/safetensors, bf16 otherwise'
            cand --kv-dtype 'KV-cache precision: f32, f16, bf16, fp8, q8_0 or q4_0'
            cand -b 'Sequences processed at once'
            cand --batch 'Sequences processed at once'
            cand -c 'Tokens of context per sequence (prompt plus generated). Default: 4096'
            cand --context 'Tokens of context per sequence (prompt plus generated). Default: 4096'
            cand --ubatch 'Prefill chunk (micro-batch) in tokens; sizes the activation scratch'
            cand --mmproj 'A multimodal projector GGUF (llama.cpp''s mmproj) loaded beside the model: its weights are counted. An Ollama model''s own projector is found in its manifest without this'
            cand --overhead 'Runtime overhead per device (CUDA context, kernels, workspaces)'
            cand --fragmentation-reserve 'Extra percentage kept for allocator fragmentation'
            cand --mode 'Inference (weights, KV cache, activations) or training (plus gradients and optimizer)'
            cand --optimizer 'Optimizer for --mode train'
            cand --recipe 'With --mode train: precision and copies [default: fp32-autocast for f32 weights, bf16 for 16-bit ones, mixed otherwise]'
            cand --lora-rank 'With --recipe lora: the adapters'' rank (r)'
            cand --lora-targets 'With --recipe lora: the projections adapted'
            cand --bytes 'Place a plain byte count instead of a model (e.g. 28GiB)'
            cand --inventory 'Plan over inventory files instead of this machine: `gpumem discover --json` documents (only backend, device name and total required), `nvidia-smi --query-gpu=... --format=csv` output (one host per file; add `mig.mode.current` to leave out GPUs in MIG mode) or `kubectl get nodes -o json` (GPU Feature Discovery labels). Formats may be mixed'
            cand --engine 'Engines to print launch commands for (repeatable). Default: every engine that can load the model as given (llama.cpp for a GGUF file, vLLM for a checkpoint or catalog model)'
            cand --device 'Plan for a device you do not have, e.g. sim:80GiB (repeatable)'
            cand --ram 'System RAM beside the --device sim GPUs, for CPU-offload plans (e.g. 64GiB)'
            cand --gpu-memory-utilization 'vLLM: fraction of each GPU''s total memory vLLM may use [default: 0.92]'
            cand --max-num-batched-tokens 'vLLM: tokens per scheduler step, which its profile run uses [default: by GPU memory]'
            cand --max-num-seqs 'vLLM: sequences per step, which its sampler is profiled over [default: by GPU memory]'
            cand --block-size 'vLLM: tokens per KV-cache block'
            cand --prefer 'Backend to try first; others are still listed with their verdicts'
            cand --memory-fraction 'Fraction of a device''s free memory gpumem may plan to use'
            cand --min-free 'Memory always left free on every device'
            cand --driver-reserve 'Driver reserve in the usable-memory rule (driver + context + fraction of total, capped)'
            cand --context-reserve 'Context reserve in the usable-memory rule'
            cand --reserve-fraction 'Fraction of total memory kept as an emergency reserve in the usable-memory rule'
            cand --reserve-cap 'Cap on the whole reserve'
            cand --timeout 'Per-backend probe timeout when discovering this machine''s devices'
            cand --color 'When to use colour. `auto` colours a terminal unless NO_COLOR is set'
            cand --allow-generic 'Estimate a config.json whose model_type gpumem has no rules for with the generic decoder formula (gated MLP, RMSNorm, no biases) instead of refusing it'
            cand --swa-full 'Sliding-window layers cache the whole context, as llama.cpp''s --swa-full (and the llama-cpp-python default) does. Default: the window plus one micro-batch (llama-server)'
            cand --flash-attention 'Assume flash attention (no full attention-score matrix in memory)'
            cand --checkpointing 'With --mode train: activation checkpointing (keep one activation per layer)'
            cand --enforce-eager 'vLLM: no CUDA graphs (and no graph pool taken from the KV cache)'
            cand --json 'Print one JSON document on stdout instead of tables'
            cand -q 'Print only the result: no progress bars, no notes'
            cand --quiet 'Print only the result: no progress bars, no notes'
            cand -v 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace)'
            cand --verbose 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'gpumem;bench-alloc'= {
            cand --device 'Device: host, host:2GiB, sim:80GiB, opencl:0, vulkan:0, cuda:0, rocm:0. Default: the best available real device'
            cand --timeout 'Give up on opening the device (and on discovering one, without --device) after this long. The driver is first tried in a child process, so one that hangs or crashes is reported instead of taking gpumem with it'
            cand --workload 'Workload to run (ignored with --trace)'
            cand --trace 'Replay a recorded trace: RMM logging CSV or a PyTorch memory snapshot pickle'
            cand -n 'Number of allocations (1 to 10,000,000; the sequence is built up front, about 120 bytes per allocation)'
            cand --allocations 'Number of allocations (1 to 10,000,000; the sequence is built up front, about 120 bytes per allocation)'
            cand --max-size 'Largest request of the synthetic workloads (random, same-size, mixed)'
            cand --transfer-size 'Bytes moved each way by --workload transfer'
            cand --chunk 'Chunk size of --workload transfer (one host buffer''s worth)'
            cand --size 'Request size for --workload same-size'
            cand --size-dist 'Size distribution for --workload random'
            cand --seed 'Seed; the same seed gives the same operation sequence'
            cand --model 'Model for --workload transformer'
            cand --batch 'Batch for --workload transformer'
            cand --context 'Context for --workload transformer'
            cand --preset 'Pool configuration preset. `auto` uses `arena` for the synthetic RMM workloads (random, same-size, mixed: RMM''s benchmark runs them on a pool of half the free memory) and `inference` (PyTorch''s caching semantics) for --workload transformer and --trace'
            cand --decode-steps 'Decode steps for --workload transformer (after the prompt fills the rest of --context)'
            cand --timeline 'Draw allocated and reserved bytes over the run as an SVG'
            cand --export-markdown 'Write a Markdown summary of the run and its gates to FILE; without FILE, add it to $GITHUB_STEP_SUMMARY (the job page of a GitHub Actions step)'
            cand --export-junit 'Write a JUnit XML report (a test case a gate, one for the run) to FILE'
            cand --min-hit-rate 'Fail (exit 1) when the pool''s hit rate is below this (0–1)'
            cand --max-fragmentation 'Fail when fragmentation when reserved memory peaked is above this (0–1): the free bytes in cached segments not usable as one block, over all cached bytes, at the moment the pool held the most. (At the end of a run an emptied cache reads as fragmented.)'
            cand --min-speedup 'Fail when the pool is less than this many times faster than raw device allocation'
            cand --max-p99-ns 'Fail when the pool''s p99 allocation latency is above this many nanoseconds'
            cand --color 'When to use colour. `auto` colours a terminal unless NO_COLOR is set'
            cand --no-baseline 'Skip the raw (pool-less) baseline run'
            cand --verify 'Write a signature into each buffer on a real device and check it on free (default)'
            cand --no-verify 'Do not write and check bytes in each buffer'
            cand --json 'Print one JSON document on stdout instead of tables'
            cand -q 'Print only the result: no progress bars, no notes'
            cand --quiet 'Print only the result: no progress bars, no notes'
            cand -v 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace)'
            cand --verbose 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'gpumem;stress'= {
            cand --device 'Device: host:512MiB, opencl:0, vulkan:0, cuda:0, rocm:0. Default: the best real device'
            cand --timeout 'Give up on opening the device (and on discovering one, without --device) after this long. The driver is first tried in a child process, so one that hangs or crashes is reported instead of taking gpumem with it'
            cand --phase 'Run only these phases (repeatable). Default: all, in order'
            cand --threads 'Churn threads. Default: the number of cores'
            cand --duration 'How long the churn phase runs'
            cand --ops 'Run the churn phase for this many operations instead of --duration'
            cand --inject-failures 'Make this fraction of raw device allocations fail (0–1) to prove they are survived'
            cand --max-size 'Largest request in the churn phase (at least 512 B: one block)'
            cand --max-pool 'Stress within this budget instead of the whole device (the pool''s max_pool_bytes)'
            cand --seed 'Seed for sizes and injected failures'
            cand --color 'When to use colour. `auto` colours a terminal unless NO_COLOR is set'
            cand --cpu-fallback 'Serve requests the device cannot hold from CPU memory (default)'
            cand --no-cpu-fallback 'Fail such requests with the typed out-of-memory error instead'
            cand --plant-corruption 'Test hook: damage one churn buffer behind the pool''s back, to prove detection works'
            cand --json 'Print one JSON document on stdout instead of tables'
            cand -q 'Print only the result: no progress bars, no notes'
            cand --quiet 'Print only the result: no progress bars, no notes'
            cand -v 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace)'
            cand --verbose 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'gpumem;help'= {
            cand discover 'List every backend and device with total and free memory; unavailable backends say why'
            cand estimate 'Compute the memory a model needs: weights, KV cache, activations and runtime overhead'
            cand select 'Choose the device, split or CPU offload where a model fits, and say why others do not'
            cand bench-alloc 'Run the pool allocator against a real device and report hit rate, fragmentation, latency'
            cand stress 'Drive a device to memory pressure and prove recovery, fallback, integrity and no leaks'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'gpumem;help;discover'= {
        }
        &'gpumem;help;estimate'= {
        }
        &'gpumem;help;select'= {
        }
        &'gpumem;help;bench-alloc'= {
        }
        &'gpumem;help;stress'= {
        }
        &'gpumem;help;help'= {
        }
    ]
    $completions[$command]
}
