# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_gpumem_global_optspecs
    string join \n json q/quiet v/verbose wide color= h/help V/version
end

function __fish_gpumem_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_gpumem_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_gpumem_using_subcommand
    set -l cmd (__fish_gpumem_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c gpumem -n "__fish_gpumem_needs_command" -l color -d 'When to use colour. `auto` colours a terminal unless NO_COLOR is set' -r -f -a "auto\t'Colour when stdout is a terminal and NO_COLOR is not set'
always\t'Colour even when stdout is a pipe or NO_COLOR is set'
never\t'Plain text, whatever the terminal'"
complete -c gpumem -n "__fish_gpumem_needs_command" -l json -d 'Print one JSON document on stdout instead of tables'
complete -c gpumem -n "__fish_gpumem_needs_command" -s q -l quiet -d 'Print only the result: no progress bars, no notes'
complete -c gpumem -n "__fish_gpumem_needs_command" -s v -l verbose -d 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows'
complete -c gpumem -n "__fish_gpumem_needs_command" -l wide -d 'Print tables with every column and nothing wrapped, however wide. Without it tables fit the terminal, or $COLUMNS, or 80 columns when neither is known'
complete -c gpumem -n "__fish_gpumem_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c gpumem -n "__fish_gpumem_needs_command" -s V -l version -d 'Print version'
complete -c gpumem -n "__fish_gpumem_needs_command" -f -a "discover" -d 'List every backend and device with total and free memory; unavailable backends say why'
complete -c gpumem -n "__fish_gpumem_needs_command" -f -a "estimate" -d 'Compute the memory a model needs: weights, KV cache, activations and runtime overhead'
complete -c gpumem -n "__fish_gpumem_needs_command" -f -a "select" -d 'Choose the device, split or CPU offload where a model fits, and say why others do not'
complete -c gpumem -n "__fish_gpumem_needs_command" -f -a "bench-alloc" -d 'Run the pool allocator against a real device and report hit rate, fragmentation, latency'
complete -c gpumem -n "__fish_gpumem_needs_command" -f -a "stress" -d 'Drive a device to memory pressure and prove recovery, fallback, integrity and no leaks'
complete -c gpumem -n "__fish_gpumem_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c gpumem -n "__fish_gpumem_using_subcommand discover" -l backend -d 'Probe only this backend (repeatable). Default: all of them' -r -f -a "cpu\t'System RAM, via sysinfo'
cuda\t'NVIDIA CUDA driver API (libcuda), loaded at run time'
nvml\t'NVIDIA Management Library (libnvidia-ml), loaded at run time'
rocm\t'AMD ROCm: amdgpu sysfs and HIP (libamdhip64), loaded at run time'
metal\t'Apple Metal (macOS only)'
opencl\t'OpenCL through the ICD loader (libOpenCL), loaded at run time'
vulkan\t'Vulkan through the loader (libvulkan), loaded at run time'"
complete -c gpumem -n "__fish_gpumem_using_subcommand discover" -l timeout -d 'Give up on a backend that has not answered after this long (e.g. 5s, 500ms)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand discover" -l format -d 'Output format. --json is the same as --format json' -r -f -a "table\t'Human-readable tables (comfy-table), one per backend'
json\t'The JSON document (same as --json)'
prometheus\t'Prometheus text exposition, for node_exporter\'s textfile collector'"
complete -c gpumem -n "__fish_gpumem_using_subcommand discover" -l color -d 'When to use colour. `auto` colours a terminal unless NO_COLOR is set' -r -f -a "auto\t'Colour when stdout is a terminal and NO_COLOR is not set'
always\t'Colour even when stdout is a pipe or NO_COLOR is set'
never\t'Plain text, whatever the terminal'"
complete -c gpumem -n "__fish_gpumem_using_subcommand discover" -l json -d 'Print one JSON document on stdout instead of tables'
complete -c gpumem -n "__fish_gpumem_using_subcommand discover" -s q -l quiet -d 'Print only the result: no progress bars, no notes'
complete -c gpumem -n "__fish_gpumem_using_subcommand discover" -s v -l verbose -d 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows'
complete -c gpumem -n "__fish_gpumem_using_subcommand discover" -l wide -d 'Print tables with every column and nothing wrapped, however wide. Without it tables fit the terminal, or $COLUMNS, or 80 columns when neither is known'
complete -c gpumem -n "__fish_gpumem_using_subcommand discover" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c gpumem -n "__fish_gpumem_using_subcommand discover" -s V -l version -d 'Print version'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -s m -l model -d 'A model by its Hugging Face id, `ORG/NAME[@REVISION]` (e.g. Qwen/Qwen3-32B), or a GGUF repository with llama.cpp\'s tag, ORG/NAME:QUANT (e.g. unsloth/Qwen3-8B-GGUF:Q4_K_M); a catalog name or alias (e.g. llama-3.1-8b); or `ollama:NAME[:TAG]` from Ollama\'s store' -r -f -a "mistral-7b\t''
mistral-7b-v0.1\t''
mistral\t''
mistral-7b-v0.3\t''
mistral-7b-instruct-v0.3\t''
mistral-nemo-12b\t''
mistral-nemo\t''
mixtral-8x7b\t''
mixtral\t''
mixtral-8x22b\t''
llama-2-7b\t''
llama2-7b\t''
llama-2-13b\t''
llama2-13b\t''
llama-2-70b\t''
llama2-70b\t''
codellama-7b\t''
llama-3-8b\t''
llama3-8b\t''
llama-3-70b\t''
llama3-70b\t''
llama-3.1-8b\t''
llama3.1-8b\t''
llama-3.1-70b\t''
llama3.1-70b\t''
llama-3.3-70b\t''
llama-3.1-405b\t''
llama3.1-405b\t''
llama-3.2-1b\t''
llama3.2-1b\t''
llama-3.2-3b\t''
llama3.2-3b\t''
tinyllama-1.1b\t''
tinyllama\t''
yi-34b\t''
qwen2.5-0.5b\t''
qwen2.5-1.5b\t''
qwen2.5-3b\t''
qwen2.5-7b\t''
qwen2-7b\t''
qwen2.5-14b\t''
qwen2.5-32b\t''
qwen2.5-72b\t''
qwen2-72b\t''
qwen3-0.6b\t''
qwen3-4b\t''
qwen3-8b\t''
qwen3-14b\t''
qwen3-32b\t''
qwen3-30b-a3b\t''
qwen3-moe\t''
gemma-2b\t''
gemma-7b\t''
gemma-2-2b\t''
gemma2-2b\t''
gemma-2-9b\t''
gemma2-9b\t''
gemma-2-27b\t''
gemma2-27b\t''
gemma-3-1b\t''
gemma3-1b\t''
phi-3-mini\t''
phi3-mini\t''
phi-3.5-mini\t''
phi-3-medium\t''
phi3-medium\t''
phi-4\t''
phi4\t''
deepseek-v2-lite\t''
deepseek-v2-lite-chat\t''
deepseek-v3\t''
deepseek-r1\t''
deepseek-v4-flash\t''
deepseek-v4\t''
deepseek-v3.2\t''
deepseek-v3.2-exp\t''
falcon-7b\t''
gpt-neox-20b\t''
neox-20b\t''
gpt-oss-20b\t''
gpt-oss\t''
gpt-oss-120b\t''
llama-4-scout\t''
llama-4-scout-17b-16e\t''
llama4-scout\t''
llama-4-maverick\t''
llama-4-maverick-17b-128e\t''
llama4-maverick\t''
qwen3-next-80b-a3b\t''
qwen3-next\t''
qwen3-next-80b\t''
qwen3.5-35b-a3b\t''
qwen3.5-35b\t''
qwen3.5-moe\t''
glm-5\t''
glm5\t''
gemma-4-31b\t''
gemma4-31b\t''
gemma-4-26b-a4b\t''
gemma4-26b-a4b\t''
gemma-4-26b\t''
gemma-4-e2b\t''
gemma4-e2b\t''
gemma-4-e4b\t''
gemma4-e4b\t''
minimax-m2\t''
minimax-m2-230b-a10b\t''
minimax-m3\t''
minimax-m3-428b-a23b\t''
kimi-k2\t''
kimi-k2-instruct\t''
kimi-k3\t''
kimi-linear-48b-a3b\t''
kimi-linear\t''
kimi-linear-48b\t''
nemotron-nano-9b-v2\t''
nvidia-nemotron-nano-9b-v2\t''
nemotron-h-9b\t''
mamba-codestral-7b\t''
mamba-codestral\t''"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l config -d 'A Hugging Face config.json (Llama 2-4, Mistral, Mixtral, Qwen 2-3, Qwen3-Next, Gemma 1-3, Phi-3, Falcon, GPT-NeoX, DeepSeek-V2/V3, Kimi-K2, GLM-4.5, gpt-oss, Mamba, Mamba-2, Jamba, Granite-4.0-H, Nemotron-H, Falcon-H1; others with --allow-generic)' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l gguf -d 'A GGUF file; only its header is read, never the tensor data' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l safetensors -d 'A .safetensors file, a directory of shards, or a model.safetensors.index.json' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l dtype -d 'Weight precision: f32, f16, bf16, fp8, int8, int4, int4_g128 (GPTQ/AWQ: a 16-bit scale a group of 128), or a GGUF quantization such as q8_0, q4_k_m. Default: the file\'s own types for GGUF/safetensors, bf16 otherwise' -r -f -a "f32\t''
f16\t''
bf16\t''
fp8\t''
int8\t''
int4\t''
int4_g128\t''
q8_0\t''
q6_k\t''
q5_0\t''
q5_1\t''
q5_k\t''
q4_0\t''
q4_1\t''
q4_k\t''
q3_k\t''
q2_k\t''
iq4_nl\t''
iq4_xs\t''
iq3_s\t''
iq3_xxs\t''
iq2_s\t''
iq2_xs\t''
iq2_xxs\t''
iq1_m\t''
iq1_s\t''
tq2_0\t''
tq1_0\t''
mxfp4\t''
q3_k_s\t''
q3_k_m\t''
q3_k_l\t''
q4_k_s\t''
q4_k_m\t''
q5_k_s\t''
q5_k_m\t''"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l kv-dtype -d 'KV-cache precision: f32, f16, bf16, fp8, q8_0 or q4_0. Default: f16 (llama.cpp\'s), or for vLLM the model\'s dtype (its `--kv-cache-dtype auto`)' -r -f -a "f32\t''
f16\t''
bf16\t''
fp8\t''
q8_0\t''
q4_0\t''"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -s b -l batch -d 'Sequences processed at once' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -s c -l context -l context-length -d 'Tokens of context per sequence (prompt plus generated): 4096, or with k for 1,024 tokens (32k is 32,768; 128k is 131,072). Default: 4096. Past the model\'s trained length it is refused unless --allow-longer-context' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l ubatch -d 'Prefill chunk (micro-batch) in tokens; sizes the activation scratch' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l mmproj -d 'A multimodal projector GGUF (llama.cpp\'s mmproj) loaded beside the model: its weights are counted. An Ollama model\'s own projector is found in its manifest without this' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l image-max-tokens -d 'llama.cpp: the most tokens an image may take (llama-server\'s --image-max-tokens): a Qwen-VL or Gemma 4 projector\'s largest image, whose compute buffer is kept free [default: the projector\'s own limit, 4096 for Qwen-VL, 1120 for Gemma 4]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l overhead -d 'A reserve per device added to the figure (CUDA context, kernels, workspaces). Default: 500MiB (the CUDA context and PyTorch\'s two cuBLAS workspaces beside a training step, and the generic rule\'s reserve); none for `estimate`\'s inference, whose figures are the engine\'s own account' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l fragmentation-reserve -d 'A percentage added for allocator fragmentation. Default: 10 (PyTorch\'s caching allocator reserved up to 1.09x its peak on an H200\'s training steps); none for `estimate`\'s inference' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l mode -d 'Inference (weights, KV cache, activations) or training (plus gradients and optimizer)' -r -f -a "infer\t'Inference: weights, KV cache, activations'
train\t'Mixed-precision training: adds gradients, optimizer states and fp32 master weights'"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l optimizer -d 'Optimizer for --mode train' -r -f -a "adam\t'Adam: two fp32 moments per parameter'
adamw\t'AdamW: two fp32 moments per parameter'
sgd\t'SGD with momentum: one fp32 buffer per parameter'
adamw8bit\t'bitsandbytes\' AdamW8bit: two uint8 moments with a f32 scale per 256 (f32 moments for tensors under 4,096 elements)'
adafactor\t'transformers\' Adafactor as HF Trainer runs it: factored f32 second moments'"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l grad-accum -d 'With --mode train: gradient accumulation over N micro-batches a step (HF Trainer\'s gradient_accumulation_steps); from the second on, every gradient is held through the forward and backward' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l attn-implementation -d 'With --mode train: transformers\' attn_implementation [default: transformers\' own choice: sdpa, or eager for Gemma 2 and gpt-oss]' -r -f -a "sdpa\t'PyTorch\'s scaled_dot_product_attention'
eager\t'transformers\' eager attention: the scores and their softmax are kept for backward'"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l recipe -d 'With --mode train: precision and copies [default: fp32-autocast for f32 weights, bf16 for 16-bit ones, mixed otherwise]' -r -f -a "bf16\t'Weights, gradients and optimizer state in bf16 (a bf16 checkpoint as loaded)'
fp32-autocast\t'f32 weights, gradients and state, the forward under bf16 autocast (HF Trainer\'s bf16=True on an f32 model)'
mixed\t'An f32 master copy computed in bf16: FSDP2\'s mixed precision (f32 shards gathered in bf16, gradients reduced in f32), over --fsdp N GPUs or, alone, over one'
lora\t'LoRA (PEFT): f32 adapters on the frozen bf16 model (--lora-rank, --lora-targets)'
qlora\t'QLoRA (bitsandbytes NF4, PEFT\'s prepare_model_for_kbit_training): f32 adapters on the layers frozen in 4 bits, the other weights in f32 (--lora-rank, --lora-targets)'"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l lora-rank -d 'With --recipe lora or qlora: the adapters\' rank (r)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l lora-targets -d 'With --recipe lora or qlora: the projections adapted' -r -f -a "all-linear\t'Every projection of the layers (PEFT\'s all-linear)'
attention\t'q, k, v and o'"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l fsdp -d 'With --mode train: shard the model with FSDP2 over N ranks (fully_shard on every decoder layer and the root); the figures are one rank\'s' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l zero1 -d 'With --ddp: PyTorch\'s ZeroRedundancyOptimizer over N ranks (ZeRO-1: each keeps the optimizer state of its share of the tensors); the figures are the fullest rank\'s' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l deepspeed-zero1 -d 'With --mode train: DeepSpeed\'s ZeRO stage 1 over N ranks (bf16, its default buckets): the weights and gradients whole on each rank, master weights and Adam\'s moments partitioned; the figures are the fullest rank\'s' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l deepspeed-zero2 -d 'With --mode train: DeepSpeed\'s ZeRO stage 2 over N ranks (bf16, its default buckets): the weights whole on each rank, gradients, master weights and Adam\'s moments partitioned; the figures are the fullest rank\'s' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l deepspeed-zero3 -d 'With --mode train: DeepSpeed\'s ZeRO stage 3 over N ranks (bf16, its defaults): the weights, gradients, master weights and Adam\'s moments partitioned, each layer gathered whole while it runs; the figures are the fullest rank\'s' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l mem-fraction-static -d 'SGLang: the share of the free memory its weights and KV pool take [default: by GPU memory, 0.83 on an H100]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l tp-size -l tp -d 'SGLang: exactly N tensor-parallel ranks (--tp-size, --tp) [default: one GPU, else every GPU of the host]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l max-running-requests -d 'SGLang: the most requests running at once [default: from the pool\'s tokens]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l chunked-prefill-size -d 'SGLang: tokens a prefill chunk [default: by GPU memory, 8192 on an H100]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l max-total-tokens -d 'SGLang: a cap on the KV pool\'s tokens' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l speculative-algorithm -d 'SGLang: speculative decoding; an EAGLE, EAGLE3 or MTP draft\'s weights and KV layers are counted (modelled from the target\'s shape), and 48 running requests by default' -r -f -a "EAGLE\t'EAGLE: one decoder layer over the target\'s features'
EAGLE3\t'EAGLE-3: one decoder layer over three of the target\'s layers, its own head'
MTP\t'Multi-token prediction: the checkpoint\'s own next-token layer'
NGRAM\t'N-gram lookup: no draft model'"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l speculative-draft-model-path -d 'SGLang: the draft model (a Hub id or folder), passed to the launch command' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l parallel -d 'Ollama: parallel requests, each with `num_ctx` tokens (OLLAMA_NUM_PARALLEL) [default: 1]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l gpu-overhead -d 'Ollama: memory a GPU kept out of the total its default context follows (OLLAMA_GPU_OVERHEAD) [default: 0]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l engine -d 'Inference by whose memory: llama.cpp\'s buffers (as `select --engine llama.cpp` plans them), vLLM\'s need on each GPU (as `select --engine vllm` plans it on --device, else this machine\'s GPUs), or transformers\' `generate` (the context is then the prompt). Default: llama.cpp, the engine a GGUF implies; for a Hugging Face checkpoint the report says so and names `--engine vllm`' -r -f -a "llama.cpp\t'llama.cpp: its model, KV-cache and compute buffers'
transformers\t'transformers\' generate: weights, the dynamic cache and the prefill\'s activations'
vllm\t'vLLM: one rank\'s budget, weights, profile peak, CUDA graphs and KV blocks on a GPU'
sglang\t'SGLang: one rank\'s static fraction, weights and KV pool (max_total_num_tokens) on a GPU'
ollama\t'Ollama: its default context and parallel requests, then llama-server\'s fit'
all\t'Every engine that takes the model, side by side on the same devices'"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l flash-attn -d 'llama.cpp\'s -fa: flash attention `on`, `off` (the full attention scores are computed), or `auto`, on where the backend supports it, as llama-server\'s default (every backend gpumem models supports it)' -r -f -a "auto\t'On where the backend supports it'
on\t'On'
off\t'Off: the full attention scores are computed'"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l device -d 'The devices to plan for (repeatable), as `select --device`: sim:h100, sim:80GiB. With --engine vllm its need on each GPU (vLLM\'s defaults and budget depend on the GPU); with llama.cpp its fit on them, buffer by device' -r -f -a "host\t''
host:4GiB\t''
sim:8GiB\t''
sim:24GiB\t''
sim:48GiB\t''
sim:80GiB\t''
sim:141GiB\t''
sim:h100\t''
sim:h200\t''
sim:a100-80gb\t''
sim:l40s\t''
sim:rtx4090\t''
sim:mi300x\t''
cuda:0\t''
cuda:1\t''
rocm:0\t''
opencl:0\t''
vulkan:0\t''
metal:0\t''"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l new-tokens -d 'With --engine transformers: tokens generated per sequence (max_new_tokens)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l assistant-model -d 'With --engine transformers: assisted generation (`generate(assistant_model=...)`), by this draft model: a catalog name, a config.json, or ORG/NAME on the Hub, read like --model. One sequence (transformers refuses more)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l num-assistant-tokens -d 'With --assistant-model: candidates the assistant proposes a round (num_assistant_tokens; transformers\' default 20)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l adapter-rank -d 'With --engine transformers: a PEFT LoRA adapter of rank R on the model (f32, PEFT\'s default), on the projections --adapter-targets names' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l adapter-targets -d 'With --adapter-rank: which projections carry the adapter (`q-v`: PEFT\'s default for Llama, Mistral and Qwen)' -r -f -a "q-v\t'q_proj and v_proj (PEFT\'s default for Llama, Mistral and Qwen)'
attention\t'q, k, v and o'
all-linear\t'Every projection of the layers (PEFT\'s `all-linear`)'"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l adapter-config -d 'With --engine transformers: a PEFT adapter\'s adapter_config.json (its `r` and `target_modules`)' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l gpu-memory-utilization -d 'vLLM: fraction of each GPU\'s total memory vLLM may use [default: 0.92]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l max-num-batched-tokens -d 'vLLM: tokens per scheduler step, which its profile run uses [default: by GPU memory]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l max-num-seqs -d 'vLLM: sequences per step, which its sampler is profiled over [default: by GPU memory]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l block-size -d 'vLLM: tokens per KV-cache block' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l cpu-offload-gb -d 'vLLM: GiB of each GPU\'s layer weights kept in host memory (--cpu-offload-gb)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l pp-layer-partition -d 'vLLM: each pipeline stage\'s layers, as VLLM_PP_LAYER_PARTITION gives them (e.g. 16,32); only layouts with that many stages are planned' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l tensor-parallel-size -d 'vLLM: exactly N tensor-parallel ranks a stage (--tensor-parallel-size) [default: the fewest GPUs that serve]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l speculative-config -d 'vLLM: speculative decoding, as vLLM takes it (JSON: `method` eagle, eagle3, mtp or ngram, `num_speculative_tokens`): the draft\'s weights (modelled from the model\'s shape) and KV layer join the plan; a draft model of its own is refused' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l max-loras -d 'vLLM: adapters a batch may use at once (GPU slots) [default: 1]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l max-lora-rank -d 'vLLM: the largest adapter rank: 1, 8, 16, 32, 64, 128, 256, 320 or 512 [default: 16]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l max-cpu-loras -d 'vLLM: adapters cached in host memory, at least --max-loras [default: --max-loras]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l limit-mm-per-prompt -d 'vLLM: items of each modality a prompt may carry, as vLLM takes it (JSON: {"image": 2, "video": 0} or {"image": {"count": 2}}); the vision encoder is profiled with the largest input they allow [default: 999 of each]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l mm-processor-kwargs -d 'vLLM: the multimodal processor\'s settings, as vLLM takes them (JSON: {"max_pixels": N, "min_pixels": N}); max_pixels sizes the largest image (Qwen2-VL, Qwen2.5-VL) [default: the processor\'s, 12845056]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l color -d 'When to use colour. `auto` colours a terminal unless NO_COLOR is set' -r -f -a "auto\t'Colour when stdout is a terminal and NO_COLOR is not set'
always\t'Colour even when stdout is a pipe or NO_COLOR is set'
never\t'Plain text, whatever the terminal'"
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l allow-generic -d 'Estimate a config.json whose model_type gpumem has no rules for with the generic decoder formula (gated MLP, RMSNorm, no biases) instead of refusing it'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l allow-longer-context -d 'Take a --context past the model\'s trained length (max_position_embeddings), which is refused otherwise: the engines then run it as they would (vLLM refuses it too, unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; llama.cpp warns)'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l offline -d 'Never ask the Hub: answer a Hub id from gpumem\'s cache or the Hugging Face cache, or refuse it (as HF_HUB_OFFLINE=1 does)'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l swa-full -d 'Sliding-window layers cache the whole context, as llama.cpp\'s --swa-full (and the llama-cpp-python default) does. Default: the window plus one micro-batch (llama-server)'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l flash-attention -d 'Assume flash attention (no full attention-score matrix in memory)'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l checkpointing -d 'With --mode train: activation checkpointing (keep one activation per layer). On by default with --recipe qlora, as PEFT\'s prepare_model_for_kbit_training turns it on; off otherwise, as HF Trainer\'s gradient_checkpointing=False'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l no-checkpointing -d 'With --mode train: no activation checkpointing, even under --recipe qlora'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l no-reshard-after-forward -d 'With --fsdp: keep each layer\'s parameters gathered from its forward to its backward (FSDP2\'s reshard_after_forward=False)'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l ddp -d 'With --mode train: one rank of DistributedDataParallel (its gradient buckets beside the gradients); --ddp-bucket-view for gradient_as_bucket_view=True'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l ddp-bucket-view -d 'With --ddp: the gradients are views of DDP\'s buckets (gradient_as_bucket_view=True)'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l offload-optimizer -d 'With --deepspeed-zero1/2/3: ZeRO-Offload (offload_optimizer.device cpu, pinned): master weights, their gradients and Adam\'s moments in host memory, the optimizer stepping there; the host\'s bytes are reported beside the GPU\'s'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l disable-cuda-graph -d 'SGLang: no CUDA graphs (none reserved for in the default fraction)'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l list-models -d 'List the built-in catalog and exit'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l fits -d 'Compare the total with every discovered device; exit 3 when none fits'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l enforce-eager -d 'vLLM: no CUDA graphs (and no graph pool taken from the KV cache)'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l enable-lora -d 'vLLM: LoRA adapters served; the slots vLLM preallocates on each GPU join the weights'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l json -d 'Print one JSON document on stdout instead of tables'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -s q -l quiet -d 'Print only the result: no progress bars, no notes'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -s v -l verbose -d 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -l wide -d 'Print tables with every column and nothing wrapped, however wide. Without it tables fit the terminal, or $COLUMNS, or 80 columns when neither is known'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c gpumem -n "__fish_gpumem_using_subcommand estimate" -s V -l version -d 'Print version'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -s m -l model -d 'A model by its Hugging Face id, `ORG/NAME[@REVISION]` (e.g. Qwen/Qwen3-32B), or a GGUF repository with llama.cpp\'s tag, ORG/NAME:QUANT (e.g. unsloth/Qwen3-8B-GGUF:Q4_K_M); a catalog name or alias (e.g. llama-3.1-8b); or `ollama:NAME[:TAG]` from Ollama\'s store' -r -f -a "mistral-7b\t''
mistral-7b-v0.1\t''
mistral\t''
mistral-7b-v0.3\t''
mistral-7b-instruct-v0.3\t''
mistral-nemo-12b\t''
mistral-nemo\t''
mixtral-8x7b\t''
mixtral\t''
mixtral-8x22b\t''
llama-2-7b\t''
llama2-7b\t''
llama-2-13b\t''
llama2-13b\t''
llama-2-70b\t''
llama2-70b\t''
codellama-7b\t''
llama-3-8b\t''
llama3-8b\t''
llama-3-70b\t''
llama3-70b\t''
llama-3.1-8b\t''
llama3.1-8b\t''
llama-3.1-70b\t''
llama3.1-70b\t''
llama-3.3-70b\t''
llama-3.1-405b\t''
llama3.1-405b\t''
llama-3.2-1b\t''
llama3.2-1b\t''
llama-3.2-3b\t''
llama3.2-3b\t''
tinyllama-1.1b\t''
tinyllama\t''
yi-34b\t''
qwen2.5-0.5b\t''
qwen2.5-1.5b\t''
qwen2.5-3b\t''
qwen2.5-7b\t''
qwen2-7b\t''
qwen2.5-14b\t''
qwen2.5-32b\t''
qwen2.5-72b\t''
qwen2-72b\t''
qwen3-0.6b\t''
qwen3-4b\t''
qwen3-8b\t''
qwen3-14b\t''
qwen3-32b\t''
qwen3-30b-a3b\t''
qwen3-moe\t''
gemma-2b\t''
gemma-7b\t''
gemma-2-2b\t''
gemma2-2b\t''
gemma-2-9b\t''
gemma2-9b\t''
gemma-2-27b\t''
gemma2-27b\t''
gemma-3-1b\t''
gemma3-1b\t''
phi-3-mini\t''
phi3-mini\t''
phi-3.5-mini\t''
phi-3-medium\t''
phi3-medium\t''
phi-4\t''
phi4\t''
deepseek-v2-lite\t''
deepseek-v2-lite-chat\t''
deepseek-v3\t''
deepseek-r1\t''
deepseek-v4-flash\t''
deepseek-v4\t''
deepseek-v3.2\t''
deepseek-v3.2-exp\t''
falcon-7b\t''
gpt-neox-20b\t''
neox-20b\t''
gpt-oss-20b\t''
gpt-oss\t''
gpt-oss-120b\t''
llama-4-scout\t''
llama-4-scout-17b-16e\t''
llama4-scout\t''
llama-4-maverick\t''
llama-4-maverick-17b-128e\t''
llama4-maverick\t''
qwen3-next-80b-a3b\t''
qwen3-next\t''
qwen3-next-80b\t''
qwen3.5-35b-a3b\t''
qwen3.5-35b\t''
qwen3.5-moe\t''
glm-5\t''
glm5\t''
gemma-4-31b\t''
gemma4-31b\t''
gemma-4-26b-a4b\t''
gemma4-26b-a4b\t''
gemma-4-26b\t''
gemma-4-e2b\t''
gemma4-e2b\t''
gemma-4-e4b\t''
gemma4-e4b\t''
minimax-m2\t''
minimax-m2-230b-a10b\t''
minimax-m3\t''
minimax-m3-428b-a23b\t''
kimi-k2\t''
kimi-k2-instruct\t''
kimi-k3\t''
kimi-linear-48b-a3b\t''
kimi-linear\t''
kimi-linear-48b\t''
nemotron-nano-9b-v2\t''
nvidia-nemotron-nano-9b-v2\t''
nemotron-h-9b\t''
mamba-codestral-7b\t''
mamba-codestral\t''"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l config -d 'A Hugging Face config.json (Llama 2-4, Mistral, Mixtral, Qwen 2-3, Qwen3-Next, Gemma 1-3, Phi-3, Falcon, GPT-NeoX, DeepSeek-V2/V3, Kimi-K2, GLM-4.5, gpt-oss, Mamba, Mamba-2, Jamba, Granite-4.0-H, Nemotron-H, Falcon-H1; others with --allow-generic)' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l gguf -d 'A GGUF file; only its header is read, never the tensor data' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l safetensors -d 'A .safetensors file, a directory of shards, or a model.safetensors.index.json' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l dtype -d 'Weight precision: f32, f16, bf16, fp8, int8, int4, int4_g128 (GPTQ/AWQ: a 16-bit scale a group of 128), or a GGUF quantization such as q8_0, q4_k_m. Default: the file\'s own types for GGUF/safetensors, bf16 otherwise' -r -f -a "f32\t''
f16\t''
bf16\t''
fp8\t''
int8\t''
int4\t''
int4_g128\t''
q8_0\t''
q6_k\t''
q5_0\t''
q5_1\t''
q5_k\t''
q4_0\t''
q4_1\t''
q4_k\t''
q3_k\t''
q2_k\t''
iq4_nl\t''
iq4_xs\t''
iq3_s\t''
iq3_xxs\t''
iq2_s\t''
iq2_xs\t''
iq2_xxs\t''
iq1_m\t''
iq1_s\t''
tq2_0\t''
tq1_0\t''
mxfp4\t''
q3_k_s\t''
q3_k_m\t''
q3_k_l\t''
q4_k_s\t''
q4_k_m\t''
q5_k_s\t''
q5_k_m\t''"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l kv-dtype -d 'KV-cache precision: f32, f16, bf16, fp8, q8_0 or q4_0. Default: f16 (llama.cpp\'s), or for vLLM the model\'s dtype (its `--kv-cache-dtype auto`)' -r -f -a "f32\t''
f16\t''
bf16\t''
fp8\t''
q8_0\t''
q4_0\t''"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -s b -l batch -d 'Sequences processed at once' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -s c -l context -l context-length -d 'Tokens of context per sequence (prompt plus generated): 4096, or with k for 1,024 tokens (32k is 32,768; 128k is 131,072). Default: 4096. Past the model\'s trained length it is refused unless --allow-longer-context' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l ubatch -d 'Prefill chunk (micro-batch) in tokens; sizes the activation scratch' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l mmproj -d 'A multimodal projector GGUF (llama.cpp\'s mmproj) loaded beside the model: its weights are counted. An Ollama model\'s own projector is found in its manifest without this' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l image-max-tokens -d 'llama.cpp: the most tokens an image may take (llama-server\'s --image-max-tokens): a Qwen-VL or Gemma 4 projector\'s largest image, whose compute buffer is kept free [default: the projector\'s own limit, 4096 for Qwen-VL, 1120 for Gemma 4]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l overhead -d 'A reserve per device added to the figure (CUDA context, kernels, workspaces). Default: 500MiB (the CUDA context and PyTorch\'s two cuBLAS workspaces beside a training step, and the generic rule\'s reserve); none for `estimate`\'s inference, whose figures are the engine\'s own account' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l fragmentation-reserve -d 'A percentage added for allocator fragmentation. Default: 10 (PyTorch\'s caching allocator reserved up to 1.09x its peak on an H200\'s training steps); none for `estimate`\'s inference' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l mode -d 'Inference (weights, KV cache, activations) or training (plus gradients and optimizer)' -r -f -a "infer\t'Inference: weights, KV cache, activations'
train\t'Mixed-precision training: adds gradients, optimizer states and fp32 master weights'"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l optimizer -d 'Optimizer for --mode train' -r -f -a "adam\t'Adam: two fp32 moments per parameter'
adamw\t'AdamW: two fp32 moments per parameter'
sgd\t'SGD with momentum: one fp32 buffer per parameter'
adamw8bit\t'bitsandbytes\' AdamW8bit: two uint8 moments with a f32 scale per 256 (f32 moments for tensors under 4,096 elements)'
adafactor\t'transformers\' Adafactor as HF Trainer runs it: factored f32 second moments'"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l grad-accum -d 'With --mode train: gradient accumulation over N micro-batches a step (HF Trainer\'s gradient_accumulation_steps); from the second on, every gradient is held through the forward and backward' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l attn-implementation -d 'With --mode train: transformers\' attn_implementation [default: transformers\' own choice: sdpa, or eager for Gemma 2 and gpt-oss]' -r -f -a "sdpa\t'PyTorch\'s scaled_dot_product_attention'
eager\t'transformers\' eager attention: the scores and their softmax are kept for backward'"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l recipe -d 'With --mode train: precision and copies [default: fp32-autocast for f32 weights, bf16 for 16-bit ones, mixed otherwise]' -r -f -a "bf16\t'Weights, gradients and optimizer state in bf16 (a bf16 checkpoint as loaded)'
fp32-autocast\t'f32 weights, gradients and state, the forward under bf16 autocast (HF Trainer\'s bf16=True on an f32 model)'
mixed\t'An f32 master copy computed in bf16: FSDP2\'s mixed precision (f32 shards gathered in bf16, gradients reduced in f32), over --fsdp N GPUs or, alone, over one'
lora\t'LoRA (PEFT): f32 adapters on the frozen bf16 model (--lora-rank, --lora-targets)'
qlora\t'QLoRA (bitsandbytes NF4, PEFT\'s prepare_model_for_kbit_training): f32 adapters on the layers frozen in 4 bits, the other weights in f32 (--lora-rank, --lora-targets)'"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l lora-rank -d 'With --recipe lora or qlora: the adapters\' rank (r)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l lora-targets -d 'With --recipe lora or qlora: the projections adapted' -r -f -a "all-linear\t'Every projection of the layers (PEFT\'s all-linear)'
attention\t'q, k, v and o'"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l fsdp -d 'With --mode train: shard the model with FSDP2 over N ranks (fully_shard on every decoder layer and the root); the figures are one rank\'s' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l zero1 -d 'With --ddp: PyTorch\'s ZeroRedundancyOptimizer over N ranks (ZeRO-1: each keeps the optimizer state of its share of the tensors); the figures are the fullest rank\'s' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l deepspeed-zero1 -d 'With --mode train: DeepSpeed\'s ZeRO stage 1 over N ranks (bf16, its default buckets): the weights and gradients whole on each rank, master weights and Adam\'s moments partitioned; the figures are the fullest rank\'s' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l deepspeed-zero2 -d 'With --mode train: DeepSpeed\'s ZeRO stage 2 over N ranks (bf16, its default buckets): the weights whole on each rank, gradients, master weights and Adam\'s moments partitioned; the figures are the fullest rank\'s' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l deepspeed-zero3 -d 'With --mode train: DeepSpeed\'s ZeRO stage 3 over N ranks (bf16, its defaults): the weights, gradients, master weights and Adam\'s moments partitioned, each layer gathered whole while it runs; the figures are the fullest rank\'s' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l mem-fraction-static -d 'SGLang: the share of the free memory its weights and KV pool take [default: by GPU memory, 0.83 on an H100]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l tp-size -l tp -d 'SGLang: exactly N tensor-parallel ranks (--tp-size, --tp) [default: one GPU, else every GPU of the host]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l max-running-requests -d 'SGLang: the most requests running at once [default: from the pool\'s tokens]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l chunked-prefill-size -d 'SGLang: tokens a prefill chunk [default: by GPU memory, 8192 on an H100]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l max-total-tokens -d 'SGLang: a cap on the KV pool\'s tokens' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l speculative-algorithm -d 'SGLang: speculative decoding; an EAGLE, EAGLE3 or MTP draft\'s weights and KV layers are counted (modelled from the target\'s shape), and 48 running requests by default' -r -f -a "EAGLE\t'EAGLE: one decoder layer over the target\'s features'
EAGLE3\t'EAGLE-3: one decoder layer over three of the target\'s layers, its own head'
MTP\t'Multi-token prediction: the checkpoint\'s own next-token layer'
NGRAM\t'N-gram lookup: no draft model'"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l speculative-draft-model-path -d 'SGLang: the draft model (a Hub id or folder), passed to the launch command' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l parallel -d 'Ollama: parallel requests, each with `num_ctx` tokens (OLLAMA_NUM_PARALLEL) [default: 1]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l gpu-overhead -d 'Ollama: memory a GPU kept out of the total its default context follows (OLLAMA_GPU_OVERHEAD) [default: 0]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l bytes -d 'Place a plain byte count instead of a model (e.g. 28GiB)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l inventory -d 'Plan over inventory files instead of this machine: `gpumem discover --json` documents (only backend, device name and total required), `nvidia-smi --query-gpu=... --format=csv` output (one host per file; add `mig.mode.current` to leave out GPUs in MIG mode) or `kubectl get nodes -o json` (GPU Feature Discovery labels). Formats may be mixed' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l engine -d 'Engines to print launch commands for (repeatable). Default: every engine that can load the model as given (llama.cpp for a GGUF file, vLLM for a checkpoint or catalog model)' -r -f -a "llama.cpp\t'llama.cpp\'s llama-server (GGUF files; --rpc for other hosts)'
vllm\t'vLLM\'s vllm serve (Hugging Face checkpoints; Ray across hosts)'
sglang\t'SGLang\'s launch_server (Hugging Face checkpoints; tensor parallel in one host)'
ollama\t'Ollama (GGUF models by name: its store, its registry, or hf.co/ORG/NAME:QUANT)'"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l device -d 'Plan for a device you do not have (repeatable): sim:SIZE with a unit (GiB binary, GB decimal: sim:80GB is 74.5 GiB), or a GPU by name with the total its driver reports (sim:h100 is 81,559 MiB; h200, a100-80gb, a100-40gb, l40s, l4, a10, t4, rtx5090, rtx4090, rtx3090, mi300x)' -r -f -a "host\t''
host:4GiB\t''
sim:8GiB\t''
sim:24GiB\t''
sim:48GiB\t''
sim:80GiB\t''
sim:141GiB\t''
sim:h100\t''
sim:h200\t''
sim:a100-80gb\t''
sim:l40s\t''
sim:rtx4090\t''
sim:mi300x\t''
cuda:0\t''
cuda:1\t''
rocm:0\t''
opencl:0\t''
vulkan:0\t''
metal:0\t''"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l ram -d 'System RAM beside the --device sim GPUs, for CPU-offload plans (e.g. 64GiB)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l gpu-memory-utilization -d 'vLLM: fraction of each GPU\'s total memory vLLM may use [default: 0.92]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l max-num-batched-tokens -d 'vLLM: tokens per scheduler step, which its profile run uses [default: by GPU memory]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l max-num-seqs -d 'vLLM: sequences per step, which its sampler is profiled over [default: by GPU memory]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l block-size -d 'vLLM: tokens per KV-cache block' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l cpu-offload-gb -d 'vLLM: GiB of each GPU\'s layer weights kept in host memory (--cpu-offload-gb)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l pp-layer-partition -d 'vLLM: each pipeline stage\'s layers, as VLLM_PP_LAYER_PARTITION gives them (e.g. 16,32); only layouts with that many stages are planned' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l tensor-parallel-size -d 'vLLM: exactly N tensor-parallel ranks a stage (--tensor-parallel-size) [default: the fewest GPUs that serve]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l speculative-config -d 'vLLM: speculative decoding, as vLLM takes it (JSON: `method` eagle, eagle3, mtp or ngram, `num_speculative_tokens`): the draft\'s weights (modelled from the model\'s shape) and KV layer join the plan; a draft model of its own is refused' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l max-loras -d 'vLLM: adapters a batch may use at once (GPU slots) [default: 1]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l max-lora-rank -d 'vLLM: the largest adapter rank: 1, 8, 16, 32, 64, 128, 256, 320 or 512 [default: 16]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l max-cpu-loras -d 'vLLM: adapters cached in host memory, at least --max-loras [default: --max-loras]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l limit-mm-per-prompt -d 'vLLM: items of each modality a prompt may carry, as vLLM takes it (JSON: {"image": 2, "video": 0} or {"image": {"count": 2}}); the vision encoder is profiled with the largest input they allow [default: 999 of each]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l mm-processor-kwargs -d 'vLLM: the multimodal processor\'s settings, as vLLM takes them (JSON: {"max_pixels": N, "min_pixels": N}); max_pixels sizes the largest image (Qwen2-VL, Qwen2.5-VL) [default: the processor\'s, 12845056]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l fit-ctx-min -d 'llama.cpp: the shortest context --fit-context may choose (llama.cpp\'s --fit-ctx)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l llamacpp-device -d 'llama.cpp: the ggml backend the GPUs run, for how their compute buffers are laid out [default: cuda for CUDA, ROCm and simulated GPUs, metal for Apple GPUs, vulkan for Vulkan GPUs, else cpu-rules]' -r -f -a "cuda\t'ggml-cuda (CUDA, ROCm; measured on an H200): 128-byte alignment, operator offload, its fused MoE kernels\' tensors kept alive, flash attention where it has a kernel for the head size (with f16 copies of a quantized KV cache)'
cpu-rules\t'The CPU backend\'s layout: an rpc-server on a CPU (as the RPC references were measured)'
vulkan\t'ggml-vulkan: the Vulkan device\'s limits (a discovered one\'s, else the widest a driver reports), operator offload, ops on larger tensors on the CPU'
metal\t'ggml-metal (Apple silicon; read from its source): scratch beside flash attention, expert products and argsorts, operator offload of matrix products, each split reordered for concurrency'"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l flash-attn -d 'llama.cpp: flash attention (-fa); auto turns it on where the backend has it, as every backend gpumem models does' -r -f -a "auto\t'On where the backend supports it'
on\t'On'
off\t'Off: the full attention scores are computed'"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l split-mode -d 'llama.cpp: how a host\'s GPUs share the model (-sm)' -r -f -a "layer\t'Whole layers (and their KV cache) spread over the GPUs, as llama.cpp\'s fit splits them'
none\t'The first GPU only (-mg 0); the rest of the model in system RAM'
row\t'Each weight\'s rows over the GPUs: refused, as llama.cpp refuses it on CUDA, ROCm, Vulkan, Metal and RPC devices ("does not support split buffers")'"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l model-draft -l spec-draft-model -d 'llama.cpp: a draft model for speculative decoding (-md), a GGUF file or a Hub GGUF (ORG/NAME:QUANT): its weights, KV cache and compute buffers are fitted beside the model\'s, as llama-server\'s fit counts them' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l spec-draft-n-max -d 'llama.cpp: the most tokens the draft proposes a step (--spec-draft-n-max); the model keeps logits for that many more tokens a sequence' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l gpu-layers-draft -l n-gpu-layers-draft -d 'llama.cpp: the draft\'s layers on the GPUs, the output layer counted as one (-ngld) [default: all]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l lora -d 'llama.cpp: a LoRA adapter GGUF applied to the model (--lora; repeatable): each factor is loaded beside the matrix it adapts, on that matrix\'s device, and counted in the fit (llama.cpp\'s own fit does not count it)' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l fit-target -l fitt -d 'llama.cpp: the memory its fit keeps free on each GPU, in MiB (-fitt, --fit-target; else LLAMA_ARG_FIT_TARGET, as llama-server and Ollama\'s runner read it) [default: 1024]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l prefer -d 'Backend to try first; others are still listed with their verdicts' -r -f -a "auto\t'GPU backends with the most usable memory first, CPU last'
cuda\t'NVIDIA GPUs through the CUDA driver'
rocm\t'AMD GPUs through HIP'
metal\t'Apple GPUs (macOS only)'
opencl\t'Any OpenCL device, including CPU implementations such as PoCL'
vulkan\t'Any Vulkan device, including software ones such as lavapipe'
cpu\t'System RAM: the fallback that always exists'"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l memory-fraction -d 'Fraction of a device\'s free memory gpumem may plan to use' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l min-free -d 'Memory always left free on every device' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l driver-reserve -d 'Driver reserve in the usable-memory rule (driver + context + fraction of total, capped)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l context-reserve -d 'Context reserve in the usable-memory rule' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l reserve-fraction -d 'Fraction of total memory kept as an emergency reserve in the usable-memory rule' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l reserve-cap -d 'Cap on the whole reserve' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l timeout -d 'Per-backend probe timeout when discovering this machine\'s devices' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l color -d 'When to use colour. `auto` colours a terminal unless NO_COLOR is set' -r -f -a "auto\t'Colour when stdout is a terminal and NO_COLOR is not set'
always\t'Colour even when stdout is a pipe or NO_COLOR is set'
never\t'Plain text, whatever the terminal'"
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l allow-generic -d 'Estimate a config.json whose model_type gpumem has no rules for with the generic decoder formula (gated MLP, RMSNorm, no biases) instead of refusing it'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l allow-longer-context -d 'Take a --context past the model\'s trained length (max_position_embeddings), which is refused otherwise: the engines then run it as they would (vLLM refuses it too, unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; llama.cpp warns)'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l offline -d 'Never ask the Hub: answer a Hub id from gpumem\'s cache or the Hugging Face cache, or refuse it (as HF_HUB_OFFLINE=1 does)'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l swa-full -d 'Sliding-window layers cache the whole context, as llama.cpp\'s --swa-full (and the llama-cpp-python default) does. Default: the window plus one micro-batch (llama-server)'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l flash-attention -d 'Assume flash attention (no full attention-score matrix in memory)'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l checkpointing -d 'With --mode train: activation checkpointing (keep one activation per layer). On by default with --recipe qlora, as PEFT\'s prepare_model_for_kbit_training turns it on; off otherwise, as HF Trainer\'s gradient_checkpointing=False'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l no-checkpointing -d 'With --mode train: no activation checkpointing, even under --recipe qlora'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l no-reshard-after-forward -d 'With --fsdp: keep each layer\'s parameters gathered from its forward to its backward (FSDP2\'s reshard_after_forward=False)'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l ddp -d 'With --mode train: one rank of DistributedDataParallel (its gradient buckets beside the gradients); --ddp-bucket-view for gradient_as_bucket_view=True'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l ddp-bucket-view -d 'With --ddp: the gradients are views of DDP\'s buckets (gradient_as_bucket_view=True)'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l offload-optimizer -d 'With --deepspeed-zero1/2/3: ZeRO-Offload (offload_optimizer.device cpu, pinned): master weights, their gradients and Adam\'s moments in host memory, the optimizer stepping there; the host\'s bytes are reported beside the GPU\'s'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l disable-cuda-graph -d 'SGLang: no CUDA graphs (none reserved for in the default fraction)'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l max-context -d 'Plan the longest context that fits (a sequence\'s, at --batch), found by the serving engine\'s own rules, in place of --context'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l max-concurrency -d 'Plan the most sequences of --context that fit at once (llama.cpp\'s -np, by planning; vLLM\'s "Maximum concurrency"), in place of --batch'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l suggest-dtype -d 'Plan the weight precision of least loss that fits, from the engine\'s own (llama.cpp: f16, q8_0 … q2_k; vLLM: bf16, fp8), in place of --dtype'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l enforce-eager -d 'vLLM: no CUDA graphs (and no graph pool taken from the KV cache)'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l enable-lora -d 'vLLM: LoRA adapters served; the slots vLLM preallocates on each GPU join the weights'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l fit-context -d 'llama.cpp: no -c, so its fit chooses the context (the trained one, shortened to fit)'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l no-op-offload -d 'llama.cpp: the GPUs take no operator from host-resident weights (--no-op-offload)'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l json -d 'Print one JSON document on stdout instead of tables'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -s q -l quiet -d 'Print only the result: no progress bars, no notes'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -s v -l verbose -d 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -l wide -d 'Print tables with every column and nothing wrapped, however wide. Without it tables fit the terminal, or $COLUMNS, or 80 columns when neither is known'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c gpumem -n "__fish_gpumem_using_subcommand select" -s V -l version -d 'Print version'
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l device -d 'Device: host, host:2GiB, sim:80GiB, opencl:0, vulkan:0, cuda:0, rocm:0. Default: the best available real device' -r -f -a "host\t''
host:4GiB\t''
sim:8GiB\t''
sim:24GiB\t''
sim:48GiB\t''
sim:80GiB\t''
sim:141GiB\t''
sim:h100\t''
sim:h200\t''
sim:a100-80gb\t''
sim:l40s\t''
sim:rtx4090\t''
sim:mi300x\t''
cuda:0\t''
cuda:1\t''
rocm:0\t''
opencl:0\t''
vulkan:0\t''
metal:0\t''"
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l timeout -d 'Give up on opening the device (and on discovering one, without --device) after this long. The driver is first tried in a child process, so one that hangs or crashes is reported instead of taking gpumem with it' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l workload -d 'Workload to run (ignored with --trace)' -r -f -a "random\t'RMM\'s random_allocations: allocate with probability 0.73, else free a random live block'
same-size\t'Every request the same size (--size)'
mixed\t'A mix of small (<1 MiB) and large requests'
transformer\t'A layer-by-layer inference step of --model over several decode steps'
transfer\t'Move --transfer-size bytes host↔device in --chunk pieces, blocking versus double-buffered, a host consumer on every chunk, every byte verified'"
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l trace -d 'Replay a recorded trace: RMM logging CSV or a PyTorch memory snapshot pickle' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -s n -l allocations -d 'Number of allocations (1 to 10,000,000; the sequence is built up front, about 120 bytes per allocation)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l max-size -d 'Largest request of the synthetic workloads (random, same-size, mixed)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l transfer-size -d 'Bytes moved each way by --workload transfer' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l chunk -d 'Chunk size of --workload transfer (one host buffer\'s worth)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l size -d 'Request size for --workload same-size' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l size-dist -d 'Size distribution for --workload random' -r -f -a "uniform\t'Uniform in [1 B, --max-size]'
normal\t'Normal around half of --max-size'
lognormal\t'Log-normal: many small, few large'
geometric\t'Geometric: powers of two, smaller ones more likely'"
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l seed -d 'Seed; the same seed gives the same operation sequence' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l model -d 'Model for --workload transformer' -r -f -a "mistral-7b\t''
mistral-7b-v0.1\t''
mistral\t''
mistral-7b-v0.3\t''
mistral-7b-instruct-v0.3\t''
mistral-nemo-12b\t''
mistral-nemo\t''
mixtral-8x7b\t''
mixtral\t''
mixtral-8x22b\t''
llama-2-7b\t''
llama2-7b\t''
llama-2-13b\t''
llama2-13b\t''
llama-2-70b\t''
llama2-70b\t''
codellama-7b\t''
llama-3-8b\t''
llama3-8b\t''
llama-3-70b\t''
llama3-70b\t''
llama-3.1-8b\t''
llama3.1-8b\t''
llama-3.1-70b\t''
llama3.1-70b\t''
llama-3.3-70b\t''
llama-3.1-405b\t''
llama3.1-405b\t''
llama-3.2-1b\t''
llama3.2-1b\t''
llama-3.2-3b\t''
llama3.2-3b\t''
tinyllama-1.1b\t''
tinyllama\t''
yi-34b\t''
qwen2.5-0.5b\t''
qwen2.5-1.5b\t''
qwen2.5-3b\t''
qwen2.5-7b\t''
qwen2-7b\t''
qwen2.5-14b\t''
qwen2.5-32b\t''
qwen2.5-72b\t''
qwen2-72b\t''
qwen3-0.6b\t''
qwen3-4b\t''
qwen3-8b\t''
qwen3-14b\t''
qwen3-32b\t''
qwen3-30b-a3b\t''
qwen3-moe\t''
gemma-2b\t''
gemma-7b\t''
gemma-2-2b\t''
gemma2-2b\t''
gemma-2-9b\t''
gemma2-9b\t''
gemma-2-27b\t''
gemma2-27b\t''
gemma-3-1b\t''
gemma3-1b\t''
phi-3-mini\t''
phi3-mini\t''
phi-3.5-mini\t''
phi-3-medium\t''
phi3-medium\t''
phi-4\t''
phi4\t''
deepseek-v2-lite\t''
deepseek-v2-lite-chat\t''
deepseek-v3\t''
deepseek-r1\t''
deepseek-v4-flash\t''
deepseek-v4\t''
deepseek-v3.2\t''
deepseek-v3.2-exp\t''
falcon-7b\t''
gpt-neox-20b\t''
neox-20b\t''
gpt-oss-20b\t''
gpt-oss\t''
gpt-oss-120b\t''
llama-4-scout\t''
llama-4-scout-17b-16e\t''
llama4-scout\t''
llama-4-maverick\t''
llama-4-maverick-17b-128e\t''
llama4-maverick\t''
qwen3-next-80b-a3b\t''
qwen3-next\t''
qwen3-next-80b\t''
qwen3.5-35b-a3b\t''
qwen3.5-35b\t''
qwen3.5-moe\t''
glm-5\t''
glm5\t''
gemma-4-31b\t''
gemma4-31b\t''
gemma-4-26b-a4b\t''
gemma4-26b-a4b\t''
gemma-4-26b\t''
gemma-4-e2b\t''
gemma4-e2b\t''
gemma-4-e4b\t''
gemma4-e4b\t''
minimax-m2\t''
minimax-m2-230b-a10b\t''
minimax-m3\t''
minimax-m3-428b-a23b\t''
kimi-k2\t''
kimi-k2-instruct\t''
kimi-k3\t''
kimi-linear-48b-a3b\t''
kimi-linear\t''
kimi-linear-48b\t''
nemotron-nano-9b-v2\t''
nvidia-nemotron-nano-9b-v2\t''
nemotron-h-9b\t''
mamba-codestral-7b\t''
mamba-codestral\t''"
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l batch -d 'Batch for --workload transformer' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l context -d 'Context for --workload transformer' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l preset -d 'Pool configuration preset. `auto` uses `arena` for the synthetic RMM workloads (random, same-size, mixed: RMM\'s benchmark runs them on a pool of half the free memory) and `inference` (PyTorch\'s caching semantics) for --workload transformer and --trace' -r -f -a "auto\t'`arena` for random/same-size/mixed, `inference` for transformer and traces, `expandable` for PyTorch snapshots recorded with expandable segments'
arena\t'RMM-style: one arena of half the usable limit carved for every size, grown when full'
default\t'MemoryConfig::default(): keeps at most 8 idle segments of each size'
inference\t'MemoryConfig::for_inference(): keeps every idle segment'
training\t'MemoryConfig::for_training(): conservative limit, keeps every idle segment'
constrained\t'MemoryConfig::for_constrained(): few idle segments, big blocks never split'
pytorch\t'PyTorch\'s caching allocator: fixed size classes (2 MiB, 20 MiB, exact), every idle segment kept; the other presets grow segments with demand'
expandable\t'Expandable segments (PyTorch\'s expandable_segments:True): one address range per stream grown by mapping memory (host, sim and CUDA; ordinary segments elsewhere)'"
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l decode-steps -d 'Decode steps for --workload transformer (after the prompt fills the rest of --context)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l compare -d 'Also report the pool beside the device\'s own allocator on the same replay (`native`: on CUDA the driver\'s stream-ordered pool, cuMemAllocAsync/cuMemFreeAsync on the device\'s default pool; elsewhere the raw replay, one device allocation per request, freed on release): ops/s, allocate p50/p99, peak reserved, peak live and reserved/live, each with its pool ÷ native ratio' -r -f -a "native\t'The device\'s own allocator: one allocation per request through the backend\'s raw API'"
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l runs -d 'Measured runs, each on a fresh pool; the report gives each figure\'s mean ± σ, median and range, and gates judge the median' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l min-runs -d 'Instead of --runs, with --max-regression: make N measured runs, then one more at a time while a gate is undecided at --confidence, until every gate is decided or --max-runs are made [default: 3, or --max-runs when fewer]' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l max-runs -d 'Instead of --runs, with --max-regression: at most M measured runs (see --min-runs); a gate still undecided then exits 6. The baseline\'s runs bound the confidence too: against m of them, n runs give a p-value of at least 1/C(m+n, m), and when M runs cannot reach --confidence the command stops at once and says how many could' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l warmup -d 'Runs before the measured ones, not counted (caches, page faults, clocks)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l save-baseline -d 'Save the measured runs as a baseline (versioned JSON) for a later --baseline' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l baseline -d 'Compare this run with a saved baseline of the same workload: a table of old, new, change and verdict' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l max-regression -d 'With --baseline: fail when METRIC\'s median is worse than the baseline\'s by more than PCT percent and a one-sided Mann-Whitney U test of the two sets of runs calls the shift significant at --confidence (repeatable); when it cannot (too few or too noisy runs), the gate is undecided and the run exits 6. METRIC: ops-per-sec, speedup, hit-rate, fragmentation, peak-reserved, alloc-p50-ns, alloc-p99-ns, free-p99-ns' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l confidence -d 'With --baseline: the confidence the comparison decides at, from 0.5 to 0.9999 [default: 0.95]. Higher asks for more runs: at 0.95, 3 runs on each side can decide; at 0.99, 5' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l timeline -d 'Draw allocated and reserved bytes over the run as an SVG' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l export-markdown -d 'Write a Markdown summary (verdict, figures, gates or phases) to FILE; without FILE, add it to $GITHUB_STEP_SUMMARY (the job page of a GitHub Actions step)' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l export-junit -d 'Write a JUnit XML report (a test case a gate or a phase, one for the run) to FILE' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l export-prometheus -d 'Write Prometheus gauges of the run to FILE (for node_exporter\'s textfile collector; replaced atomically)' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l min-hit-rate -d 'Fail (exit 1) when the pool\'s hit rate is below this (0–1)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l max-fragmentation -d 'Fail when fragmentation when reserved memory peaked is above this (0–1): the free bytes in cached segments not usable as one block, over all cached bytes, at the moment the pool held the most. (At the end of a run an emptied cache reads as fragmented.)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l min-speedup -d 'Fail when the pool is less than this many times faster than raw device allocation' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l max-p99-ns -d 'Fail when the pool\'s p99 allocation latency is above this many nanoseconds' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l max-peak-reserved -d 'Fail when the pool reserved more than this at its peak (e.g. 40GiB): an absolute memory gate, for a recorded trace whose job\'s memory must not grow' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l color -d 'When to use colour. `auto` colours a terminal unless NO_COLOR is set' -r -f -a "auto\t'Colour when stdout is a terminal and NO_COLOR is not set'
always\t'Colour even when stdout is a pipe or NO_COLOR is set'
never\t'Plain text, whatever the terminal'"
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l no-raw -d 'Skip the raw replay straight on the device (no speedup is measured)'
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l allow-other-device -d 'With --baseline: compare with a baseline recorded on another device (the report labels the comparison as one between different devices). Without it, such a baseline is refused (exit 2)'
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l verify -d 'Write a signature into each buffer on a real device and check it on free (default)'
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l no-verify -d 'Do not write and check bytes in each buffer'
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l json -d 'Print one JSON document on stdout instead of tables'
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -s q -l quiet -d 'Print only the result: no progress bars, no notes'
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -s v -l verbose -d 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows'
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -l wide -d 'Print tables with every column and nothing wrapped, however wide. Without it tables fit the terminal, or $COLUMNS, or 80 columns when neither is known'
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c gpumem -n "__fish_gpumem_using_subcommand bench-alloc" -s V -l version -d 'Print version'
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l device -d 'Device: host:512MiB, opencl:0, vulkan:0, cuda:0, rocm:0. Default: the best real device' -r -f -a "host\t''
host:4GiB\t''
sim:8GiB\t''
sim:24GiB\t''
sim:48GiB\t''
sim:80GiB\t''
sim:141GiB\t''
sim:h100\t''
sim:h200\t''
sim:a100-80gb\t''
sim:l40s\t''
sim:rtx4090\t''
sim:mi300x\t''
cuda:0\t''
cuda:1\t''
rocm:0\t''
opencl:0\t''
vulkan:0\t''
metal:0\t''"
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l timeout -d 'Give up on opening the device (and on discovering one, without --device) after this long. The driver is first tried in a child process, so one that hangs or crashes is reported instead of taking gpumem with it' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l phase -d 'Run only these phases (repeatable). Default: all, in order' -r -f -a "ramp\t'Allocate until pressure is Critical, seeing every level in order'
exhaust\t'Allocate past the device limit: retry, then CPU fallback or a typed OOM error'
churn\t'Threads allocate, fill, verify and free near High pressure'
recover\t'Free everything, empty the cache and check nothing leaked'"
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l threads -d 'Churn threads. Default: the number of cores' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l duration -d 'How long the churn phase runs' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l ops -d 'Run the churn phase for this many operations instead of --duration' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l inject-failures -d 'Make this fraction of raw device allocations fail (0–1) to prove they are survived' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l max-size -d 'Largest request in the churn phase (at least 512 B: one block)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l max-pool -d 'Stress within this budget instead of the whole device (the pool\'s max_pool_bytes)' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l seed -d 'Seed for sizes and injected failures' -r
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l export-markdown -d 'Write a Markdown summary (verdict, figures, gates or phases) to FILE; without FILE, add it to $GITHUB_STEP_SUMMARY (the job page of a GitHub Actions step)' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l export-junit -d 'Write a JUnit XML report (a test case a gate or a phase, one for the run) to FILE' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l export-prometheus -d 'Write Prometheus gauges of the run to FILE (for node_exporter\'s textfile collector; replaced atomically)' -r -F
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l color -d 'When to use colour. `auto` colours a terminal unless NO_COLOR is set' -r -f -a "auto\t'Colour when stdout is a terminal and NO_COLOR is not set'
always\t'Colour even when stdout is a pipe or NO_COLOR is set'
never\t'Plain text, whatever the terminal'"
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l cpu-fallback -d 'Serve requests the device cannot hold from CPU memory (default)'
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l no-cpu-fallback -d 'Fail such requests with the typed out-of-memory error instead'
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l plant-corruption -d 'Test hook: damage one churn buffer behind the pool\'s back, to prove detection works'
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l json -d 'Print one JSON document on stdout instead of tables'
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -s q -l quiet -d 'Print only the result: no progress bars, no notes'
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -s v -l verbose -d 'Log what gpumem does to stderr (-v: info, -vv: debug, -vvv: trace); with --version, list the engine releases each estimate follows'
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -l wide -d 'Print tables with every column and nothing wrapped, however wide. Without it tables fit the terminal, or $COLUMNS, or 80 columns when neither is known'
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c gpumem -n "__fish_gpumem_using_subcommand stress" -s V -l version -d 'Print version'
complete -c gpumem -n "__fish_gpumem_using_subcommand help; and not __fish_seen_subcommand_from discover estimate select bench-alloc stress help" -f -a "discover" -d 'List every backend and device with total and free memory; unavailable backends say why'
complete -c gpumem -n "__fish_gpumem_using_subcommand help; and not __fish_seen_subcommand_from discover estimate select bench-alloc stress help" -f -a "estimate" -d 'Compute the memory a model needs: weights, KV cache, activations and runtime overhead'
complete -c gpumem -n "__fish_gpumem_using_subcommand help; and not __fish_seen_subcommand_from discover estimate select bench-alloc stress help" -f -a "select" -d 'Choose the device, split or CPU offload where a model fits, and say why others do not'
complete -c gpumem -n "__fish_gpumem_using_subcommand help; and not __fish_seen_subcommand_from discover estimate select bench-alloc stress help" -f -a "bench-alloc" -d 'Run the pool allocator against a real device and report hit rate, fragmentation, latency'
complete -c gpumem -n "__fish_gpumem_using_subcommand help; and not __fish_seen_subcommand_from discover estimate select bench-alloc stress help" -f -a "stress" -d 'Drive a device to memory pressure and prove recovery, fallback, integrity and no leaks'
complete -c gpumem -n "__fish_gpumem_using_subcommand help; and not __fish_seen_subcommand_from discover estimate select bench-alloc stress help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
