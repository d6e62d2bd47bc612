
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'gpumem' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'gpumem'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'gpumem' {
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour. `auto` colours a terminal unless NO_COLOR is set')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document on stdout instead of tables')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the result: no progress bars, no notes')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the result: no progress bars, no notes')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Print tables with every column and nothing wrapped, however wide. Without it tables fit the terminal, or $COLUMNS, or 80 columns when neither is known')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('discover', 'discover', [CompletionResultType]::ParameterValue, 'List every backend and device with total and free memory; unavailable backends say why')
            [CompletionResult]::new('estimate', 'estimate', [CompletionResultType]::ParameterValue, 'Compute the memory a model needs: weights, KV cache, activations and runtime overhead')
            [CompletionResult]::new('select', 'select', [CompletionResultType]::ParameterValue, 'Choose the device, split or CPU offload where a model fits, and say why others do not')
            [CompletionResult]::new('bench-alloc', 'bench-alloc', [CompletionResultType]::ParameterValue, 'Run the pool allocator against a real device and report hit rate, fragmentation, latency')
            [CompletionResult]::new('stress', 'stress', [CompletionResultType]::ParameterValue, 'Drive a device to memory pressure and prove recovery, fallback, integrity and no leaks')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'gpumem;discover' {
            [CompletionResult]::new('--backend', '--backend', [CompletionResultType]::ParameterName, 'Probe only this backend (repeatable). Default: all of them')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Give up on a backend that has not answered after this long (e.g. 5s, 500ms)')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format. --json is the same as --format json')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour. `auto` colours a terminal unless NO_COLOR is set')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document on stdout instead of tables')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the result: no progress bars, no notes')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the result: no progress bars, no notes')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Print tables with every column and nothing wrapped, however wide. Without it tables fit the terminal, or $COLUMNS, or 80 columns when neither is known')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'gpumem;estimate' {
            [CompletionResult]::new('-m', '-m', [CompletionResultType]::ParameterName, 'A model by its Hugging Face id, `ORG/NAME[@REVISION]` (e.g. Qwen/Qwen3-32B), or a GGUF repository with llama.cpp''s tag, ORG/NAME:QUANT (e.g. unsloth/Qwen3-8B-GGUF:Q4_K_M); a catalog name or alias (e.g. llama-3.1-8b); or `ollama:NAME[:TAG]` from Ollama''s store')
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'A model by its Hugging Face id, `ORG/NAME[@REVISION]` (e.g. Qwen/Qwen3-32B), or a GGUF repository with llama.cpp''s tag, ORG/NAME:QUANT (e.g. unsloth/Qwen3-8B-GGUF:Q4_K_M); a catalog name or alias (e.g. llama-3.1-8b); or `ollama:NAME[:TAG]` from Ollama''s store')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A Hugging Face config.json (Llama 2-4, Mistral, Mixtral, Qwen 2-3, Qwen3-Next, Gemma 1-3, Phi-3, Falcon, GPT-NeoX, DeepSeek-V2/V3, Kimi-K2, GLM-4.5, gpt-oss, Mamba, Mamba-2, Jamba, Granite-4.0-H, Nemotron-H, Falcon-H1; others with --allow-generic)')
            [CompletionResult]::new('--gguf', '--gguf', [CompletionResultType]::ParameterName, 'A GGUF file; only its header is read, never the tensor data')
            [CompletionResult]::new('--safetensors', '--safetensors', [CompletionResultType]::ParameterName, 'A .safetensors file, a directory of shards, or a model.safetensors.index.json')
            [CompletionResult]::new('--dtype', '--dtype', [CompletionResultType]::ParameterName, 'Weight precision: f32, f16, bf16, fp8, int8, int4, int4_g128 (GPTQ/AWQ: a 16-bit scale a group of 128), or a GGUF quantization such as q8_0, q4_k_m. Default: the file''s own types for GGUF/safetensors, bf16 otherwise')
            [CompletionResult]::new('--kv-dtype', '--kv-dtype', [CompletionResultType]::ParameterName, 'KV-cache precision: f32, f16, bf16, fp8, q8_0 or q4_0. Default: f16 (llama.cpp''s), or for vLLM the model''s dtype (its `--kv-cache-dtype auto`)')
            [CompletionResult]::new('-b', '-b', [CompletionResultType]::ParameterName, 'Sequences processed at once')
            [CompletionResult]::new('--batch', '--batch', [CompletionResultType]::ParameterName, 'Sequences processed at once')
            [CompletionResult]::new('-c', '-c', [CompletionResultType]::ParameterName, 'Tokens of context per sequence (prompt plus generated): 4096, or with k for 1,024 tokens (32k is 32,768; 128k is 131,072). Default: 4096. Past the model''s trained length it is refused unless --allow-longer-context')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'Tokens of context per sequence (prompt plus generated): 4096, or with k for 1,024 tokens (32k is 32,768; 128k is 131,072). Default: 4096. Past the model''s trained length it is refused unless --allow-longer-context')
            [CompletionResult]::new('--context-length', '--context-length', [CompletionResultType]::ParameterName, 'Tokens of context per sequence (prompt plus generated): 4096, or with k for 1,024 tokens (32k is 32,768; 128k is 131,072). Default: 4096. Past the model''s trained length it is refused unless --allow-longer-context')
            [CompletionResult]::new('--ubatch', '--ubatch', [CompletionResultType]::ParameterName, 'Prefill chunk (micro-batch) in tokens; sizes the activation scratch')
            [CompletionResult]::new('--mmproj', '--mmproj', [CompletionResultType]::ParameterName, 'A multimodal projector GGUF (llama.cpp''s mmproj) loaded beside the model: its weights are counted. An Ollama model''s own projector is found in its manifest without this')
            [CompletionResult]::new('--overhead', '--overhead', [CompletionResultType]::ParameterName, 'A reserve per device added to the figure (CUDA context, kernels, workspaces). Default: 500MiB (the CUDA context and PyTorch''s two cuBLAS workspaces beside a training step, and the generic rule''s reserve); none for `estimate`''s inference, whose figures are the engine''s own account')
            [CompletionResult]::new('--fragmentation-reserve', '--fragmentation-reserve', [CompletionResultType]::ParameterName, 'A percentage added for allocator fragmentation. Default: 10 (PyTorch''s caching allocator reserved up to 1.09x its peak on an H200''s training steps); none for `estimate`''s inference')
            [CompletionResult]::new('--mode', '--mode', [CompletionResultType]::ParameterName, 'Inference (weights, KV cache, activations) or training (plus gradients and optimizer)')
            [CompletionResult]::new('--optimizer', '--optimizer', [CompletionResultType]::ParameterName, 'Optimizer for --mode train')
            [CompletionResult]::new('--grad-accum', '--grad-accum', [CompletionResultType]::ParameterName, 'With --mode train: gradient accumulation over N micro-batches a step (HF Trainer''s gradient_accumulation_steps); from the second on, every gradient is held through the forward and backward')
            [CompletionResult]::new('--attn-implementation', '--attn-implementation', [CompletionResultType]::ParameterName, 'With --mode train: transformers'' attn_implementation [default: transformers'' own choice: sdpa, or eager for Gemma 2 and gpt-oss]')
            [CompletionResult]::new('--recipe', '--recipe', [CompletionResultType]::ParameterName, 'With --mode train: precision and copies [default: fp32-autocast for f32 weights, bf16 for 16-bit ones, mixed otherwise]')
            [CompletionResult]::new('--lora-rank', '--lora-rank', [CompletionResultType]::ParameterName, 'With --recipe lora or qlora: the adapters'' rank (r)')
            [CompletionResult]::new('--lora-targets', '--lora-targets', [CompletionResultType]::ParameterName, 'With --recipe lora or qlora: the projections adapted')
            [CompletionResult]::new('--fsdp', '--fsdp', [CompletionResultType]::ParameterName, 'With --mode train: shard the model with FSDP2 over N ranks (fully_shard on every decoder layer and the root); the figures are one rank''s')
            [CompletionResult]::new('--zero1', '--zero1', [CompletionResultType]::ParameterName, 'With --ddp: PyTorch''s ZeroRedundancyOptimizer over N ranks (ZeRO-1: each keeps the optimizer state of its share of the tensors); the figures are the fullest rank''s')
            [CompletionResult]::new('--deepspeed-zero1', '--deepspeed-zero1', [CompletionResultType]::ParameterName, 'With --mode train: DeepSpeed''s ZeRO stage 1 over N ranks (bf16, its default buckets): the weights and gradients whole on each rank, master weights and Adam''s moments partitioned; the figures are the fullest rank''s')
            [CompletionResult]::new('--deepspeed-zero2', '--deepspeed-zero2', [CompletionResultType]::ParameterName, 'With --mode train: DeepSpeed''s ZeRO stage 2 over N ranks (bf16, its default buckets): the weights whole on each rank, gradients, master weights and Adam''s moments partitioned; the figures are the fullest rank''s')
            [CompletionResult]::new('--deepspeed-zero3', '--deepspeed-zero3', [CompletionResultType]::ParameterName, 'With --mode train: DeepSpeed''s ZeRO stage 3 over N ranks (bf16, its defaults): the weights, gradients, master weights and Adam''s moments partitioned, each layer gathered whole while it runs; the figures are the fullest rank''s')
            [CompletionResult]::new('--mem-fraction-static', '--mem-fraction-static', [CompletionResultType]::ParameterName, 'SGLang: the share of the free memory its weights and KV pool take [default: by GPU memory, 0.83 on an H100]')
            [CompletionResult]::new('--tp-size', '--tp-size', [CompletionResultType]::ParameterName, 'SGLang: exactly N tensor-parallel ranks (--tp-size, --tp) [default: one GPU, else every GPU of the host]')
            [CompletionResult]::new('--tp', '--tp', [CompletionResultType]::ParameterName, 'SGLang: exactly N tensor-parallel ranks (--tp-size, --tp) [default: one GPU, else every GPU of the host]')
            [CompletionResult]::new('--max-running-requests', '--max-running-requests', [CompletionResultType]::ParameterName, 'SGLang: the most requests running at once [default: from the pool''s tokens]')
            [CompletionResult]::new('--chunked-prefill-size', '--chunked-prefill-size', [CompletionResultType]::ParameterName, 'SGLang: tokens a prefill chunk [default: by GPU memory, 8192 on an H100]')
            [CompletionResult]::new('--max-total-tokens', '--max-total-tokens', [CompletionResultType]::ParameterName, 'SGLang: a cap on the KV pool''s tokens')
            [CompletionResult]::new('--engine', '--engine', [CompletionResultType]::ParameterName, 'Inference by whose memory: llama.cpp''s buffers (as `select --engine llama.cpp` plans them), vLLM''s need on each GPU (as `select --engine vllm` plans it on --device, else this machine''s GPUs), or transformers'' `generate` (the context is then the prompt). Default: llama.cpp, the engine a GGUF implies; for a Hugging Face checkpoint the report says so and names `--engine vllm`')
            [CompletionResult]::new('--flash-attn', '--flash-attn', [CompletionResultType]::ParameterName, 'llama.cpp''s -fa: flash attention `on`, `off` (the full attention scores are computed), or `auto`, on where the backend supports it, as llama-server''s default (every backend gpumem models supports it)')
            [CompletionResult]::new('--device', '--device', [CompletionResultType]::ParameterName, 'The devices to plan for (repeatable), as `select --device`: sim:h100, sim:80GiB. With --engine vllm its need on each GPU (vLLM''s defaults and budget depend on the GPU); with llama.cpp its fit on them, buffer by device')
            [CompletionResult]::new('--new-tokens', '--new-tokens', [CompletionResultType]::ParameterName, 'With --engine transformers: tokens generated per sequence (max_new_tokens)')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour. `auto` colours a terminal unless NO_COLOR is set')
            [CompletionResult]::new('--allow-generic', '--allow-generic', [CompletionResultType]::ParameterName, 'Estimate a config.json whose model_type gpumem has no rules for with the generic decoder formula (gated MLP, RMSNorm, no biases) instead of refusing it')
            [CompletionResult]::new('--allow-longer-context', '--allow-longer-context', [CompletionResultType]::ParameterName, 'Take a --context past the model''s trained length (max_position_embeddings), which is refused otherwise: the engines then run it as they would (vLLM refuses it too, unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; llama.cpp warns)')
            [CompletionResult]::new('--offline', '--offline', [CompletionResultType]::ParameterName, 'Never ask the Hub: answer a Hub id from gpumem''s cache or the Hugging Face cache, or refuse it (as HF_HUB_OFFLINE=1 does)')
            [CompletionResult]::new('--swa-full', '--swa-full', [CompletionResultType]::ParameterName, 'Sliding-window layers cache the whole context, as llama.cpp''s --swa-full (and the llama-cpp-python default) does. Default: the window plus one micro-batch (llama-server)')
            [CompletionResult]::new('--flash-attention', '--flash-attention', [CompletionResultType]::ParameterName, 'Assume flash attention (no full attention-score matrix in memory)')
            [CompletionResult]::new('--checkpointing', '--checkpointing', [CompletionResultType]::ParameterName, 'With --mode train: activation checkpointing (keep one activation per layer). On by default with --recipe qlora, as PEFT''s prepare_model_for_kbit_training turns it on; off otherwise, as HF Trainer''s gradient_checkpointing=False')
            [CompletionResult]::new('--no-checkpointing', '--no-checkpointing', [CompletionResultType]::ParameterName, 'With --mode train: no activation checkpointing, even under --recipe qlora')
            [CompletionResult]::new('--no-reshard-after-forward', '--no-reshard-after-forward', [CompletionResultType]::ParameterName, 'With --fsdp: keep each layer''s parameters gathered from its forward to its backward (FSDP2''s reshard_after_forward=False)')
            [CompletionResult]::new('--ddp', '--ddp', [CompletionResultType]::ParameterName, 'With --mode train: one rank of DistributedDataParallel (its gradient buckets beside the gradients); --ddp-bucket-view for gradient_as_bucket_view=True')
            [CompletionResult]::new('--ddp-bucket-view', '--ddp-bucket-view', [CompletionResultType]::ParameterName, 'With --ddp: the gradients are views of DDP''s buckets (gradient_as_bucket_view=True)')
            [CompletionResult]::new('--offload-optimizer', '--offload-optimizer', [CompletionResultType]::ParameterName, 'With --deepspeed-zero1/2/3: ZeRO-Offload (offload_optimizer.device cpu, pinned): master weights, their gradients and Adam''s moments in host memory, the optimizer stepping there; the host''s bytes are reported beside the GPU''s')
            [CompletionResult]::new('--disable-cuda-graph', '--disable-cuda-graph', [CompletionResultType]::ParameterName, 'SGLang: no CUDA graphs (none reserved for in the default fraction)')
            [CompletionResult]::new('--list-models', '--list-models', [CompletionResultType]::ParameterName, 'List the built-in catalog and exit')
            [CompletionResult]::new('--fits', '--fits', [CompletionResultType]::ParameterName, 'Compare the total with every discovered device; exit 3 when none fits')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document on stdout instead of tables')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the result: no progress bars, no notes')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the result: no progress bars, no notes')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Print tables with every column and nothing wrapped, however wide. Without it tables fit the terminal, or $COLUMNS, or 80 columns when neither is known')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'gpumem;select' {
            [CompletionResult]::new('-m', '-m', [CompletionResultType]::ParameterName, 'A model by its Hugging Face id, `ORG/NAME[@REVISION]` (e.g. Qwen/Qwen3-32B), or a GGUF repository with llama.cpp''s tag, ORG/NAME:QUANT (e.g. unsloth/Qwen3-8B-GGUF:Q4_K_M); a catalog name or alias (e.g. llama-3.1-8b); or `ollama:NAME[:TAG]` from Ollama''s store')
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'A model by its Hugging Face id, `ORG/NAME[@REVISION]` (e.g. Qwen/Qwen3-32B), or a GGUF repository with llama.cpp''s tag, ORG/NAME:QUANT (e.g. unsloth/Qwen3-8B-GGUF:Q4_K_M); a catalog name or alias (e.g. llama-3.1-8b); or `ollama:NAME[:TAG]` from Ollama''s store')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'A Hugging Face config.json (Llama 2-4, Mistral, Mixtral, Qwen 2-3, Qwen3-Next, Gemma 1-3, Phi-3, Falcon, GPT-NeoX, DeepSeek-V2/V3, Kimi-K2, GLM-4.5, gpt-oss, Mamba, Mamba-2, Jamba, Granite-4.0-H, Nemotron-H, Falcon-H1; others with --allow-generic)')
            [CompletionResult]::new('--gguf', '--gguf', [CompletionResultType]::ParameterName, 'A GGUF file; only its header is read, never the tensor data')
            [CompletionResult]::new('--safetensors', '--safetensors', [CompletionResultType]::ParameterName, 'A .safetensors file, a directory of shards, or a model.safetensors.index.json')
            [CompletionResult]::new('--dtype', '--dtype', [CompletionResultType]::ParameterName, 'Weight precision: f32, f16, bf16, fp8, int8, int4, int4_g128 (GPTQ/AWQ: a 16-bit scale a group of 128), or a GGUF quantization such as q8_0, q4_k_m. Default: the file''s own types for GGUF/safetensors, bf16 otherwise')
            [CompletionResult]::new('--kv-dtype', '--kv-dtype', [CompletionResultType]::ParameterName, 'KV-cache precision: f32, f16, bf16, fp8, q8_0 or q4_0. Default: f16 (llama.cpp''s), or for vLLM the model''s dtype (its `--kv-cache-dtype auto`)')
            [CompletionResult]::new('-b', '-b', [CompletionResultType]::ParameterName, 'Sequences processed at once')
            [CompletionResult]::new('--batch', '--batch', [CompletionResultType]::ParameterName, 'Sequences processed at once')
            [CompletionResult]::new('-c', '-c', [CompletionResultType]::ParameterName, 'Tokens of context per sequence (prompt plus generated): 4096, or with k for 1,024 tokens (32k is 32,768; 128k is 131,072). Default: 4096. Past the model''s trained length it is refused unless --allow-longer-context')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'Tokens of context per sequence (prompt plus generated): 4096, or with k for 1,024 tokens (32k is 32,768; 128k is 131,072). Default: 4096. Past the model''s trained length it is refused unless --allow-longer-context')
            [CompletionResult]::new('--context-length', '--context-length', [CompletionResultType]::ParameterName, 'Tokens of context per sequence (prompt plus generated): 4096, or with k for 1,024 tokens (32k is 32,768; 128k is 131,072). Default: 4096. Past the model''s trained length it is refused unless --allow-longer-context')
            [CompletionResult]::new('--ubatch', '--ubatch', [CompletionResultType]::ParameterName, 'Prefill chunk (micro-batch) in tokens; sizes the activation scratch')
            [CompletionResult]::new('--mmproj', '--mmproj', [CompletionResultType]::ParameterName, 'A multimodal projector GGUF (llama.cpp''s mmproj) loaded beside the model: its weights are counted. An Ollama model''s own projector is found in its manifest without this')
            [CompletionResult]::new('--overhead', '--overhead', [CompletionResultType]::ParameterName, 'A reserve per device added to the figure (CUDA context, kernels, workspaces). Default: 500MiB (the CUDA context and PyTorch''s two cuBLAS workspaces beside a training step, and the generic rule''s reserve); none for `estimate`''s inference, whose figures are the engine''s own account')
            [CompletionResult]::new('--fragmentation-reserve', '--fragmentation-reserve', [CompletionResultType]::ParameterName, 'A percentage added for allocator fragmentation. Default: 10 (PyTorch''s caching allocator reserved up to 1.09x its peak on an H200''s training steps); none for `estimate`''s inference')
            [CompletionResult]::new('--mode', '--mode', [CompletionResultType]::ParameterName, 'Inference (weights, KV cache, activations) or training (plus gradients and optimizer)')
            [CompletionResult]::new('--optimizer', '--optimizer', [CompletionResultType]::ParameterName, 'Optimizer for --mode train')
            [CompletionResult]::new('--grad-accum', '--grad-accum', [CompletionResultType]::ParameterName, 'With --mode train: gradient accumulation over N micro-batches a step (HF Trainer''s gradient_accumulation_steps); from the second on, every gradient is held through the forward and backward')
            [CompletionResult]::new('--attn-implementation', '--attn-implementation', [CompletionResultType]::ParameterName, 'With --mode train: transformers'' attn_implementation [default: transformers'' own choice: sdpa, or eager for Gemma 2 and gpt-oss]')
            [CompletionResult]::new('--recipe', '--recipe', [CompletionResultType]::ParameterName, 'With --mode train: precision and copies [default: fp32-autocast for f32 weights, bf16 for 16-bit ones, mixed otherwise]')
            [CompletionResult]::new('--lora-rank', '--lora-rank', [CompletionResultType]::ParameterName, 'With --recipe lora or qlora: the adapters'' rank (r)')
            [CompletionResult]::new('--lora-targets', '--lora-targets', [CompletionResultType]::ParameterName, 'With --recipe lora or qlora: the projections adapted')
            [CompletionResult]::new('--fsdp', '--fsdp', [CompletionResultType]::ParameterName, 'With --mode train: shard the model with FSDP2 over N ranks (fully_shard on every decoder layer and the root); the figures are one rank''s')
            [CompletionResult]::new('--zero1', '--zero1', [CompletionResultType]::ParameterName, 'With --ddp: PyTorch''s ZeroRedundancyOptimizer over N ranks (ZeRO-1: each keeps the optimizer state of its share of the tensors); the figures are the fullest rank''s')
            [CompletionResult]::new('--deepspeed-zero1', '--deepspeed-zero1', [CompletionResultType]::ParameterName, 'With --mode train: DeepSpeed''s ZeRO stage 1 over N ranks (bf16, its default buckets): the weights and gradients whole on each rank, master weights and Adam''s moments partitioned; the figures are the fullest rank''s')
            [CompletionResult]::new('--deepspeed-zero2', '--deepspeed-zero2', [CompletionResultType]::ParameterName, 'With --mode train: DeepSpeed''s ZeRO stage 2 over N ranks (bf16, its default buckets): the weights whole on each rank, gradients, master weights and Adam''s moments partitioned; the figures are the fullest rank''s')
            [CompletionResult]::new('--deepspeed-zero3', '--deepspeed-zero3', [CompletionResultType]::ParameterName, 'With --mode train: DeepSpeed''s ZeRO stage 3 over N ranks (bf16, its defaults): the weights, gradients, master weights and Adam''s moments partitioned, each layer gathered whole while it runs; the figures are the fullest rank''s')
            [CompletionResult]::new('--mem-fraction-static', '--mem-fraction-static', [CompletionResultType]::ParameterName, 'SGLang: the share of the free memory its weights and KV pool take [default: by GPU memory, 0.83 on an H100]')
            [CompletionResult]::new('--tp-size', '--tp-size', [CompletionResultType]::ParameterName, 'SGLang: exactly N tensor-parallel ranks (--tp-size, --tp) [default: one GPU, else every GPU of the host]')
            [CompletionResult]::new('--tp', '--tp', [CompletionResultType]::ParameterName, 'SGLang: exactly N tensor-parallel ranks (--tp-size, --tp) [default: one GPU, else every GPU of the host]')
            [CompletionResult]::new('--max-running-requests', '--max-running-requests', [CompletionResultType]::ParameterName, 'SGLang: the most requests running at once [default: from the pool''s tokens]')
            [CompletionResult]::new('--chunked-prefill-size', '--chunked-prefill-size', [CompletionResultType]::ParameterName, 'SGLang: tokens a prefill chunk [default: by GPU memory, 8192 on an H100]')
            [CompletionResult]::new('--max-total-tokens', '--max-total-tokens', [CompletionResultType]::ParameterName, 'SGLang: a cap on the KV pool''s tokens')
            [CompletionResult]::new('--bytes', '--bytes', [CompletionResultType]::ParameterName, 'Place a plain byte count instead of a model (e.g. 28GiB)')
            [CompletionResult]::new('--inventory', '--inventory', [CompletionResultType]::ParameterName, 'Plan over inventory files instead of this machine: `gpumem discover --json` documents (only backend, device name and total required), `nvidia-smi --query-gpu=... --format=csv` output (one host per file; add `mig.mode.current` to leave out GPUs in MIG mode) or `kubectl get nodes -o json` (GPU Feature Discovery labels). Formats may be mixed')
            [CompletionResult]::new('--engine', '--engine', [CompletionResultType]::ParameterName, 'Engines to print launch commands for (repeatable). Default: every engine that can load the model as given (llama.cpp for a GGUF file, vLLM for a checkpoint or catalog model)')
            [CompletionResult]::new('--device', '--device', [CompletionResultType]::ParameterName, 'Plan for a device you do not have (repeatable): sim:SIZE with a unit (GiB binary, GB decimal: sim:80GB is 74.5 GiB), or a GPU by name with the total its driver reports (sim:h100 is 81,559 MiB; h200, a100-80gb, a100-40gb, l40s, l4, a10, t4, rtx5090, rtx4090, rtx3090, mi300x)')
            [CompletionResult]::new('--ram', '--ram', [CompletionResultType]::ParameterName, 'System RAM beside the --device sim GPUs, for CPU-offload plans (e.g. 64GiB)')
            [CompletionResult]::new('--gpu-memory-utilization', '--gpu-memory-utilization', [CompletionResultType]::ParameterName, 'vLLM: fraction of each GPU''s total memory vLLM may use [default: 0.92]')
            [CompletionResult]::new('--max-num-batched-tokens', '--max-num-batched-tokens', [CompletionResultType]::ParameterName, 'vLLM: tokens per scheduler step, which its profile run uses [default: by GPU memory]')
            [CompletionResult]::new('--max-num-seqs', '--max-num-seqs', [CompletionResultType]::ParameterName, 'vLLM: sequences per step, which its sampler is profiled over [default: by GPU memory]')
            [CompletionResult]::new('--block-size', '--block-size', [CompletionResultType]::ParameterName, 'vLLM: tokens per KV-cache block')
            [CompletionResult]::new('--cpu-offload-gb', '--cpu-offload-gb', [CompletionResultType]::ParameterName, 'vLLM: GiB of each GPU''s layer weights kept in host memory (--cpu-offload-gb)')
            [CompletionResult]::new('--pp-layer-partition', '--pp-layer-partition', [CompletionResultType]::ParameterName, 'vLLM: each pipeline stage''s layers, as VLLM_PP_LAYER_PARTITION gives them (e.g. 16,32); only layouts with that many stages are planned')
            [CompletionResult]::new('--tensor-parallel-size', '--tensor-parallel-size', [CompletionResultType]::ParameterName, 'vLLM: exactly N tensor-parallel ranks a stage (--tensor-parallel-size) [default: the fewest GPUs that serve]')
            [CompletionResult]::new('--fit-ctx-min', '--fit-ctx-min', [CompletionResultType]::ParameterName, 'llama.cpp: the shortest context --fit-context may choose (llama.cpp''s --fit-ctx)')
            [CompletionResult]::new('--llamacpp-device', '--llamacpp-device', [CompletionResultType]::ParameterName, 'llama.cpp: the ggml backend the GPUs run, for how their compute buffers are laid out [default: cuda for CUDA, ROCm and simulated GPUs, metal for Apple GPUs, vulkan for Vulkan GPUs, else cpu-rules]')
            [CompletionResult]::new('--flash-attn', '--flash-attn', [CompletionResultType]::ParameterName, 'llama.cpp: flash attention (-fa); auto turns it on where the backend has it, as every backend gpumem models does')
            [CompletionResult]::new('--split-mode', '--split-mode', [CompletionResultType]::ParameterName, 'llama.cpp: how a host''s GPUs share the model (-sm)')
            [CompletionResult]::new('--prefer', '--prefer', [CompletionResultType]::ParameterName, 'Backend to try first; others are still listed with their verdicts')
            [CompletionResult]::new('--memory-fraction', '--memory-fraction', [CompletionResultType]::ParameterName, 'Fraction of a device''s free memory gpumem may plan to use')
            [CompletionResult]::new('--min-free', '--min-free', [CompletionResultType]::ParameterName, 'Memory always left free on every device')
            [CompletionResult]::new('--driver-reserve', '--driver-reserve', [CompletionResultType]::ParameterName, 'Driver reserve in the usable-memory rule (driver + context + fraction of total, capped)')
            [CompletionResult]::new('--context-reserve', '--context-reserve', [CompletionResultType]::ParameterName, 'Context reserve in the usable-memory rule')
            [CompletionResult]::new('--reserve-fraction', '--reserve-fraction', [CompletionResultType]::ParameterName, 'Fraction of total memory kept as an emergency reserve in the usable-memory rule')
            [CompletionResult]::new('--reserve-cap', '--reserve-cap', [CompletionResultType]::ParameterName, 'Cap on the whole reserve')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Per-backend probe timeout when discovering this machine''s devices')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour. `auto` colours a terminal unless NO_COLOR is set')
            [CompletionResult]::new('--allow-generic', '--allow-generic', [CompletionResultType]::ParameterName, 'Estimate a config.json whose model_type gpumem has no rules for with the generic decoder formula (gated MLP, RMSNorm, no biases) instead of refusing it')
            [CompletionResult]::new('--allow-longer-context', '--allow-longer-context', [CompletionResultType]::ParameterName, 'Take a --context past the model''s trained length (max_position_embeddings), which is refused otherwise: the engines then run it as they would (vLLM refuses it too, unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; llama.cpp warns)')
            [CompletionResult]::new('--offline', '--offline', [CompletionResultType]::ParameterName, 'Never ask the Hub: answer a Hub id from gpumem''s cache or the Hugging Face cache, or refuse it (as HF_HUB_OFFLINE=1 does)')
            [CompletionResult]::new('--swa-full', '--swa-full', [CompletionResultType]::ParameterName, 'Sliding-window layers cache the whole context, as llama.cpp''s --swa-full (and the llama-cpp-python default) does. Default: the window plus one micro-batch (llama-server)')
            [CompletionResult]::new('--flash-attention', '--flash-attention', [CompletionResultType]::ParameterName, 'Assume flash attention (no full attention-score matrix in memory)')
            [CompletionResult]::new('--checkpointing', '--checkpointing', [CompletionResultType]::ParameterName, 'With --mode train: activation checkpointing (keep one activation per layer). On by default with --recipe qlora, as PEFT''s prepare_model_for_kbit_training turns it on; off otherwise, as HF Trainer''s gradient_checkpointing=False')
            [CompletionResult]::new('--no-checkpointing', '--no-checkpointing', [CompletionResultType]::ParameterName, 'With --mode train: no activation checkpointing, even under --recipe qlora')
            [CompletionResult]::new('--no-reshard-after-forward', '--no-reshard-after-forward', [CompletionResultType]::ParameterName, 'With --fsdp: keep each layer''s parameters gathered from its forward to its backward (FSDP2''s reshard_after_forward=False)')
            [CompletionResult]::new('--ddp', '--ddp', [CompletionResultType]::ParameterName, 'With --mode train: one rank of DistributedDataParallel (its gradient buckets beside the gradients); --ddp-bucket-view for gradient_as_bucket_view=True')
            [CompletionResult]::new('--ddp-bucket-view', '--ddp-bucket-view', [CompletionResultType]::ParameterName, 'With --ddp: the gradients are views of DDP''s buckets (gradient_as_bucket_view=True)')
            [CompletionResult]::new('--offload-optimizer', '--offload-optimizer', [CompletionResultType]::ParameterName, 'With --deepspeed-zero1/2/3: ZeRO-Offload (offload_optimizer.device cpu, pinned): master weights, their gradients and Adam''s moments in host memory, the optimizer stepping there; the host''s bytes are reported beside the GPU''s')
            [CompletionResult]::new('--disable-cuda-graph', '--disable-cuda-graph', [CompletionResultType]::ParameterName, 'SGLang: no CUDA graphs (none reserved for in the default fraction)')
            [CompletionResult]::new('--max-context', '--max-context', [CompletionResultType]::ParameterName, 'Plan the longest context that fits (a sequence''s, at --batch), found by the serving engine''s own rules, in place of --context')
            [CompletionResult]::new('--max-concurrency', '--max-concurrency', [CompletionResultType]::ParameterName, 'Plan the most sequences of --context that fit at once (llama.cpp''s -np, by planning; vLLM''s "Maximum concurrency"), in place of --batch')
            [CompletionResult]::new('--suggest-dtype', '--suggest-dtype', [CompletionResultType]::ParameterName, 'Plan the weight precision of least loss that fits, from the engine''s own (llama.cpp: f16, q8_0 … q2_k; vLLM: bf16, fp8), in place of --dtype')
            [CompletionResult]::new('--enforce-eager', '--enforce-eager', [CompletionResultType]::ParameterName, 'vLLM: no CUDA graphs (and no graph pool taken from the KV cache)')
            [CompletionResult]::new('--fit-context', '--fit-context', [CompletionResultType]::ParameterName, 'llama.cpp: no -c, so its fit chooses the context (the trained one, shortened to fit)')
            [CompletionResult]::new('--no-op-offload', '--no-op-offload', [CompletionResultType]::ParameterName, 'llama.cpp: the GPUs take no operator from host-resident weights (--no-op-offload)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document on stdout instead of tables')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the result: no progress bars, no notes')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the result: no progress bars, no notes')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Print tables with every column and nothing wrapped, however wide. Without it tables fit the terminal, or $COLUMNS, or 80 columns when neither is known')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'gpumem;bench-alloc' {
            [CompletionResult]::new('--device', '--device', [CompletionResultType]::ParameterName, 'Device: host, host:2GiB, sim:80GiB, opencl:0, vulkan:0, cuda:0, rocm:0. Default: the best available real device')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Give up on opening the device (and on discovering one, without --device) after this long. The driver is first tried in a child process, so one that hangs or crashes is reported instead of taking gpumem with it')
            [CompletionResult]::new('--workload', '--workload', [CompletionResultType]::ParameterName, 'Workload to run (ignored with --trace)')
            [CompletionResult]::new('--trace', '--trace', [CompletionResultType]::ParameterName, 'Replay a recorded trace: RMM logging CSV or a PyTorch memory snapshot pickle')
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Number of allocations (1 to 10,000,000; the sequence is built up front, about 120 bytes per allocation)')
            [CompletionResult]::new('--allocations', '--allocations', [CompletionResultType]::ParameterName, 'Number of allocations (1 to 10,000,000; the sequence is built up front, about 120 bytes per allocation)')
            [CompletionResult]::new('--max-size', '--max-size', [CompletionResultType]::ParameterName, 'Largest request of the synthetic workloads (random, same-size, mixed)')
            [CompletionResult]::new('--transfer-size', '--transfer-size', [CompletionResultType]::ParameterName, 'Bytes moved each way by --workload transfer')
            [CompletionResult]::new('--chunk', '--chunk', [CompletionResultType]::ParameterName, 'Chunk size of --workload transfer (one host buffer''s worth)')
            [CompletionResult]::new('--size', '--size', [CompletionResultType]::ParameterName, 'Request size for --workload same-size')
            [CompletionResult]::new('--size-dist', '--size-dist', [CompletionResultType]::ParameterName, 'Size distribution for --workload random')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'Seed; the same seed gives the same operation sequence')
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'Model for --workload transformer')
            [CompletionResult]::new('--batch', '--batch', [CompletionResultType]::ParameterName, 'Batch for --workload transformer')
            [CompletionResult]::new('--context', '--context', [CompletionResultType]::ParameterName, 'Context for --workload transformer')
            [CompletionResult]::new('--preset', '--preset', [CompletionResultType]::ParameterName, 'Pool configuration preset. `auto` uses `arena` for the synthetic RMM workloads (random, same-size, mixed: RMM''s benchmark runs them on a pool of half the free memory) and `inference` (PyTorch''s caching semantics) for --workload transformer and --trace')
            [CompletionResult]::new('--decode-steps', '--decode-steps', [CompletionResultType]::ParameterName, 'Decode steps for --workload transformer (after the prompt fills the rest of --context)')
            [CompletionResult]::new('--runs', '--runs', [CompletionResultType]::ParameterName, 'Measured runs, each on a fresh pool; the report gives each figure''s mean ± σ, median and range, and gates judge the median')
            [CompletionResult]::new('--warmup', '--warmup', [CompletionResultType]::ParameterName, 'Runs before the measured ones, not counted (caches, page faults, clocks)')
            [CompletionResult]::new('--save-baseline', '--save-baseline', [CompletionResultType]::ParameterName, 'Save the measured runs as a baseline (versioned JSON) for a later --baseline')
            [CompletionResult]::new('--baseline', '--baseline', [CompletionResultType]::ParameterName, 'Compare this run with a saved baseline of the same workload: a table of old, new, change and verdict')
            [CompletionResult]::new('--max-regression', '--max-regression', [CompletionResultType]::ParameterName, 'With --baseline: fail when METRIC is worse than the baseline''s median by more than PCT percent and by more than the noise of both runs (repeatable). METRIC: ops-per-sec, speedup, hit-rate, fragmentation, peak-reserved, alloc-p50-ns, alloc-p99-ns, free-p99-ns')
            [CompletionResult]::new('--timeline', '--timeline', [CompletionResultType]::ParameterName, 'Draw allocated and reserved bytes over the run as an SVG')
            [CompletionResult]::new('--export-markdown', '--export-markdown', [CompletionResultType]::ParameterName, 'Write a Markdown summary (verdict, figures, gates or phases) to FILE; without FILE, add it to $GITHUB_STEP_SUMMARY (the job page of a GitHub Actions step)')
            [CompletionResult]::new('--export-junit', '--export-junit', [CompletionResultType]::ParameterName, 'Write a JUnit XML report (a test case a gate or a phase, one for the run) to FILE')
            [CompletionResult]::new('--export-prometheus', '--export-prometheus', [CompletionResultType]::ParameterName, 'Write Prometheus gauges of the run to FILE (for node_exporter''s textfile collector; replaced atomically)')
            [CompletionResult]::new('--min-hit-rate', '--min-hit-rate', [CompletionResultType]::ParameterName, 'Fail (exit 1) when the pool''s hit rate is below this (0–1)')
            [CompletionResult]::new('--max-fragmentation', '--max-fragmentation', [CompletionResultType]::ParameterName, 'Fail when fragmentation when reserved memory peaked is above this (0–1): the free bytes in cached segments not usable as one block, over all cached bytes, at the moment the pool held the most. (At the end of a run an emptied cache reads as fragmented.)')
            [CompletionResult]::new('--min-speedup', '--min-speedup', [CompletionResultType]::ParameterName, 'Fail when the pool is less than this many times faster than raw device allocation')
            [CompletionResult]::new('--max-p99-ns', '--max-p99-ns', [CompletionResultType]::ParameterName, 'Fail when the pool''s p99 allocation latency is above this many nanoseconds')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour. `auto` colours a terminal unless NO_COLOR is set')
            [CompletionResult]::new('--no-raw', '--no-raw', [CompletionResultType]::ParameterName, 'Skip the raw replay straight on the device (no speedup is measured)')
            [CompletionResult]::new('--verify', '--verify', [CompletionResultType]::ParameterName, 'Write a signature into each buffer on a real device and check it on free (default)')
            [CompletionResult]::new('--no-verify', '--no-verify', [CompletionResultType]::ParameterName, 'Do not write and check bytes in each buffer')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document on stdout instead of tables')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the result: no progress bars, no notes')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the result: no progress bars, no notes')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Print tables with every column and nothing wrapped, however wide. Without it tables fit the terminal, or $COLUMNS, or 80 columns when neither is known')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'gpumem;stress' {
            [CompletionResult]::new('--device', '--device', [CompletionResultType]::ParameterName, 'Device: host:512MiB, opencl:0, vulkan:0, cuda:0, rocm:0. Default: the best real device')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Give up on opening the device (and on discovering one, without --device) after this long. The driver is first tried in a child process, so one that hangs or crashes is reported instead of taking gpumem with it')
            [CompletionResult]::new('--phase', '--phase', [CompletionResultType]::ParameterName, 'Run only these phases (repeatable). Default: all, in order')
            [CompletionResult]::new('--threads', '--threads', [CompletionResultType]::ParameterName, 'Churn threads. Default: the number of cores')
            [CompletionResult]::new('--duration', '--duration', [CompletionResultType]::ParameterName, 'How long the churn phase runs')
            [CompletionResult]::new('--ops', '--ops', [CompletionResultType]::ParameterName, 'Run the churn phase for this many operations instead of --duration')
            [CompletionResult]::new('--inject-failures', '--inject-failures', [CompletionResultType]::ParameterName, 'Make this fraction of raw device allocations fail (0–1) to prove they are survived')
            [CompletionResult]::new('--max-size', '--max-size', [CompletionResultType]::ParameterName, 'Largest request in the churn phase (at least 512 B: one block)')
            [CompletionResult]::new('--max-pool', '--max-pool', [CompletionResultType]::ParameterName, 'Stress within this budget instead of the whole device (the pool''s max_pool_bytes)')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'Seed for sizes and injected failures')
            [CompletionResult]::new('--export-markdown', '--export-markdown', [CompletionResultType]::ParameterName, 'Write a Markdown summary (verdict, figures, gates or phases) to FILE; without FILE, add it to $GITHUB_STEP_SUMMARY (the job page of a GitHub Actions step)')
            [CompletionResult]::new('--export-junit', '--export-junit', [CompletionResultType]::ParameterName, 'Write a JUnit XML report (a test case a gate or a phase, one for the run) to FILE')
            [CompletionResult]::new('--export-prometheus', '--export-prometheus', [CompletionResultType]::ParameterName, 'Write Prometheus gauges of the run to FILE (for node_exporter''s textfile collector; replaced atomically)')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'When to use colour. `auto` colours a terminal unless NO_COLOR is set')
            [CompletionResult]::new('--cpu-fallback', '--cpu-fallback', [CompletionResultType]::ParameterName, 'Serve requests the device cannot hold from CPU memory (default)')
            [CompletionResult]::new('--no-cpu-fallback', '--no-cpu-fallback', [CompletionResultType]::ParameterName, 'Fail such requests with the typed out-of-memory error instead')
            [CompletionResult]::new('--plant-corruption', '--plant-corruption', [CompletionResultType]::ParameterName, 'Test hook: damage one churn buffer behind the pool''s back, to prove detection works')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON document on stdout instead of tables')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print only the result: no progress bars, no notes')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print only the result: no progress bars, no notes')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows')
            [CompletionResult]::new('--wide', '--wide', [CompletionResultType]::ParameterName, 'Print tables with every column and nothing wrapped, however wide. Without it tables fit the terminal, or $COLUMNS, or 80 columns when neither is known')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'gpumem;help' {
            [CompletionResult]::new('discover', 'discover', [CompletionResultType]::ParameterValue, 'List every backend and device with total and free memory; unavailable backends say why')
            [CompletionResult]::new('estimate', 'estimate', [CompletionResultType]::ParameterValue, 'Compute the memory a model needs: weights, KV cache, activations and runtime overhead')
            [CompletionResult]::new('select', 'select', [CompletionResultType]::ParameterValue, 'Choose the device, split or CPU offload where a model fits, and say why others do not')
            [CompletionResult]::new('bench-alloc', 'bench-alloc', [CompletionResultType]::ParameterValue, 'Run the pool allocator against a real device and report hit rate, fragmentation, latency')
            [CompletionResult]::new('stress', 'stress', [CompletionResultType]::ParameterValue, 'Drive a device to memory pressure and prove recovery, fallback, integrity and no leaks')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'gpumem;help;discover' {
            break
        }
        'gpumem;help;estimate' {
            break
        }
        'gpumem;help;select' {
            break
        }
        'gpumem;help;bench-alloc' {
            break
        }
        'gpumem;help;stress' {
            break
        }
        'gpumem;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
