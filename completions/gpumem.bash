_gpumem() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="gpumem"
                ;;
            gpumem,bench-alloc)
                cmd="gpumem__subcmd__bench__subcmd__alloc"
                ;;
            gpumem,discover)
                cmd="gpumem__subcmd__discover"
                ;;
            gpumem,estimate)
                cmd="gpumem__subcmd__estimate"
                ;;
            gpumem,help)
                cmd="gpumem__subcmd__help"
                ;;
            gpumem,select)
                cmd="gpumem__subcmd__select"
                ;;
            gpumem,stress)
                cmd="gpumem__subcmd__stress"
                ;;
            gpumem__subcmd__help,bench-alloc)
                cmd="gpumem__subcmd__help__subcmd__bench__subcmd__alloc"
                ;;
            gpumem__subcmd__help,discover)
                cmd="gpumem__subcmd__help__subcmd__discover"
                ;;
            gpumem__subcmd__help,estimate)
                cmd="gpumem__subcmd__help__subcmd__estimate"
                ;;
            gpumem__subcmd__help,help)
                cmd="gpumem__subcmd__help__subcmd__help"
                ;;
            gpumem__subcmd__help,select)
                cmd="gpumem__subcmd__help__subcmd__select"
                ;;
            gpumem__subcmd__help,stress)
                cmd="gpumem__subcmd__help__subcmd__stress"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        gpumem)
            opts="-q -v -h -V --json --quiet --verbose --wide --color --help --version discover estimate select bench-alloc stress help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        gpumem__subcmd__bench__subcmd__alloc)
            opts="-n -q -v -h -V --device --timeout --workload --trace --allocations --max-size --transfer-size --chunk --size --size-dist --seed --model --batch --context --preset --decode-steps --no-raw --compare --runs --min-runs --max-runs --warmup --save-baseline --baseline --max-regression --confidence --allow-other-device --verify --no-verify --timeline --export-markdown --export-junit --export-prometheus --min-hit-rate --max-fragmentation --min-speedup --max-p99-ns --max-peak-reserved --json --quiet --verbose --wide --color --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --device)
                    COMPREPLY=($(compgen -W "host host:4GiB sim:8GiB sim:24GiB sim:48GiB sim:80GiB sim:141GiB sim:h100 sim:h200 sim:a100-80gb sim:l40s sim:rtx4090 sim:mi300x cuda:0 cuda:1 rocm:0 opencl:0 vulkan:0 metal:0" -- "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --workload)
                    COMPREPLY=($(compgen -W "random same-size mixed transformer transfer" -- "${cur}"))
                    return 0
                    ;;
                --trace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allocations)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --transfer-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --chunk)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --size-dist)
                    COMPREPLY=($(compgen -W "uniform normal lognormal geometric" -- "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model)
                    COMPREPLY=($(compgen -W "mistral-7b mistral-7b-v0.1 mistral mistral-7b-v0.3 mistral-7b-instruct-v0.3 mistral-nemo-12b mistral-nemo mixtral-8x7b mixtral mixtral-8x22b llama-2-7b llama2-7b llama-2-13b llama2-13b llama-2-70b llama2-70b codellama-7b llama-3-8b llama3-8b llama-3-70b llama3-70b llama-3.1-8b llama3.1-8b llama-3.1-70b llama3.1-70b llama-3.3-70b llama-3.1-405b llama3.1-405b llama-3.2-1b llama3.2-1b llama-3.2-3b llama3.2-3b tinyllama-1.1b tinyllama yi-34b qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b qwen2.5-7b qwen2-7b qwen2.5-14b qwen2.5-32b qwen2.5-72b qwen2-72b qwen3-0.6b qwen3-4b qwen3-8b qwen3-14b qwen3-32b qwen3-30b-a3b qwen3-moe gemma-2b gemma-7b gemma-2-2b gemma2-2b gemma-2-9b gemma2-9b gemma-2-27b gemma2-27b gemma-3-1b gemma3-1b phi-3-mini phi3-mini phi-3.5-mini phi-3-medium phi3-medium phi-4 phi4 deepseek-v2-lite deepseek-v2-lite-chat deepseek-v3 deepseek-r1 deepseek-v4-flash deepseek-v4 deepseek-v3.2 deepseek-v3.2-exp falcon-7b gpt-neox-20b neox-20b gpt-oss-20b gpt-oss gpt-oss-120b llama-4-scout llama-4-scout-17b-16e llama4-scout llama-4-maverick llama-4-maverick-17b-128e llama4-maverick qwen3-next-80b-a3b qwen3-next qwen3-next-80b qwen3.5-35b-a3b qwen3.5-35b qwen3.5-moe glm-5 glm5 gemma-4-31b gemma4-31b gemma-4-26b-a4b gemma4-26b-a4b gemma-4-26b gemma-4-e2b gemma4-e2b gemma-4-e4b gemma4-e4b minimax-m2 minimax-m2-230b-a10b minimax-m3 minimax-m3-428b-a23b kimi-k2 kimi-k2-instruct kimi-k3 kimi-linear-48b-a3b kimi-linear kimi-linear-48b nemotron-nano-9b-v2 nvidia-nemotron-nano-9b-v2 nemotron-h-9b mamba-codestral-7b mamba-codestral" -- "${cur}"))
                    return 0
                    ;;
                --batch)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --preset)
                    COMPREPLY=($(compgen -W "auto arena default inference training constrained pytorch expandable" -- "${cur}"))
                    return 0
                    ;;
                --decode-steps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compare)
                    COMPREPLY=($(compgen -W "native" -- "${cur}"))
                    return 0
                    ;;
                --runs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-runs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-runs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --warmup)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --save-baseline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --baseline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-regression)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --confidence)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --export-markdown)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --export-junit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --export-prometheus)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-hit-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-fragmentation)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-speedup)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-p99-ns)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-peak-reserved)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        gpumem__subcmd__discover)
            opts="-q -v -h -V --backend --timeout --format --json --quiet --verbose --wide --color --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --backend)
                    COMPREPLY=($(compgen -W "cpu cuda nvml rocm metal opencl vulkan" -- "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "table json prometheus" -- "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        gpumem__subcmd__estimate)
            opts="-m -b -c -q -v -h -V --model --config --gguf --safetensors --dtype --kv-dtype --batch --context-length --context --ubatch --allow-generic --allow-longer-context --offline --mmproj --image-max-tokens --swa-full --flash-attention --overhead --fragmentation-reserve --mode --optimizer --checkpointing --no-checkpointing --grad-accum --attn-implementation --recipe --lora-rank --lora-targets --fsdp --no-reshard-after-forward --ddp --ddp-bucket-view --zero1 --deepspeed-zero1 --deepspeed-zero2 --deepspeed-zero3 --offload-optimizer --mem-fraction-static --tp --tp-size --max-running-requests --chunked-prefill-size --max-total-tokens --disable-cuda-graph --speculative-algorithm --speculative-draft-model-path --parallel --gpu-overhead --list-models --fits --engine --flash-attn --device --new-tokens --assistant-model --num-assistant-tokens --adapter-rank --adapter-targets --adapter-config --gpu-memory-utilization --max-num-batched-tokens --max-num-seqs --block-size --enforce-eager --cpu-offload-gb --pp-layer-partition --tensor-parallel-size --speculative-config --enable-lora --max-loras --max-lora-rank --max-cpu-loras --limit-mm-per-prompt --mm-processor-kwargs --json --quiet --verbose --wide --color --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -W "mistral-7b mistral-7b-v0.1 mistral mistral-7b-v0.3 mistral-7b-instruct-v0.3 mistral-nemo-12b mistral-nemo mixtral-8x7b mixtral mixtral-8x22b llama-2-7b llama2-7b llama-2-13b llama2-13b llama-2-70b llama2-70b codellama-7b llama-3-8b llama3-8b llama-3-70b llama3-70b llama-3.1-8b llama3.1-8b llama-3.1-70b llama3.1-70b llama-3.3-70b llama-3.1-405b llama3.1-405b llama-3.2-1b llama3.2-1b llama-3.2-3b llama3.2-3b tinyllama-1.1b tinyllama yi-34b qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b qwen2.5-7b qwen2-7b qwen2.5-14b qwen2.5-32b qwen2.5-72b qwen2-72b qwen3-0.6b qwen3-4b qwen3-8b qwen3-14b qwen3-32b qwen3-30b-a3b qwen3-moe gemma-2b gemma-7b gemma-2-2b gemma2-2b gemma-2-9b gemma2-9b gemma-2-27b gemma2-27b gemma-3-1b gemma3-1b phi-3-mini phi3-mini phi-3.5-mini phi-3-medium phi3-medium phi-4 phi4 deepseek-v2-lite deepseek-v2-lite-chat deepseek-v3 deepseek-r1 deepseek-v4-flash deepseek-v4 deepseek-v3.2 deepseek-v3.2-exp falcon-7b gpt-neox-20b neox-20b gpt-oss-20b gpt-oss gpt-oss-120b llama-4-scout llama-4-scout-17b-16e llama4-scout llama-4-maverick llama-4-maverick-17b-128e llama4-maverick qwen3-next-80b-a3b qwen3-next qwen3-next-80b qwen3.5-35b-a3b qwen3.5-35b qwen3.5-moe glm-5 glm5 gemma-4-31b gemma4-31b gemma-4-26b-a4b gemma4-26b-a4b gemma-4-26b gemma-4-e2b gemma4-e2b gemma-4-e4b gemma4-e4b minimax-m2 minimax-m2-230b-a10b minimax-m3 minimax-m3-428b-a23b kimi-k2 kimi-k2-instruct kimi-k3 kimi-linear-48b-a3b kimi-linear kimi-linear-48b nemotron-nano-9b-v2 nvidia-nemotron-nano-9b-v2 nemotron-h-9b mamba-codestral-7b mamba-codestral" -- "${cur}"))
                    return 0
                    ;;
                -m)
                    COMPREPLY=($(compgen -W "mistral-7b mistral-7b-v0.1 mistral mistral-7b-v0.3 mistral-7b-instruct-v0.3 mistral-nemo-12b mistral-nemo mixtral-8x7b mixtral mixtral-8x22b llama-2-7b llama2-7b llama-2-13b llama2-13b llama-2-70b llama2-70b codellama-7b llama-3-8b llama3-8b llama-3-70b llama3-70b llama-3.1-8b llama3.1-8b llama-3.1-70b llama3.1-70b llama-3.3-70b llama-3.1-405b llama3.1-405b llama-3.2-1b llama3.2-1b llama-3.2-3b llama3.2-3b tinyllama-1.1b tinyllama yi-34b qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b qwen2.5-7b qwen2-7b qwen2.5-14b qwen2.5-32b qwen2.5-72b qwen2-72b qwen3-0.6b qwen3-4b qwen3-8b qwen3-14b qwen3-32b qwen3-30b-a3b qwen3-moe gemma-2b gemma-7b gemma-2-2b gemma2-2b gemma-2-9b gemma2-9b gemma-2-27b gemma2-27b gemma-3-1b gemma3-1b phi-3-mini phi3-mini phi-3.5-mini phi-3-medium phi3-medium phi-4 phi4 deepseek-v2-lite deepseek-v2-lite-chat deepseek-v3 deepseek-r1 deepseek-v4-flash deepseek-v4 deepseek-v3.2 deepseek-v3.2-exp falcon-7b gpt-neox-20b neox-20b gpt-oss-20b gpt-oss gpt-oss-120b llama-4-scout llama-4-scout-17b-16e llama4-scout llama-4-maverick llama-4-maverick-17b-128e llama4-maverick qwen3-next-80b-a3b qwen3-next qwen3-next-80b qwen3.5-35b-a3b qwen3.5-35b qwen3.5-moe glm-5 glm5 gemma-4-31b gemma4-31b gemma-4-26b-a4b gemma4-26b-a4b gemma-4-26b gemma-4-e2b gemma4-e2b gemma-4-e4b gemma4-e4b minimax-m2 minimax-m2-230b-a10b minimax-m3 minimax-m3-428b-a23b kimi-k2 kimi-k2-instruct kimi-k3 kimi-linear-48b-a3b kimi-linear kimi-linear-48b nemotron-nano-9b-v2 nvidia-nemotron-nano-9b-v2 nemotron-h-9b mamba-codestral-7b mamba-codestral" -- "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gguf)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --safetensors)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --dtype)
                    COMPREPLY=($(compgen -W "f32 f16 bf16 fp8 int8 int4 int4_g128 q8_0 q6_k q5_0 q5_1 q5_k q4_0 q4_1 q4_k q3_k q2_k iq4_nl iq4_xs iq3_s iq3_xxs iq2_s iq2_xs iq2_xxs iq1_m iq1_s tq2_0 tq1_0 mxfp4 q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m" -- "${cur}"))
                    return 0
                    ;;
                --kv-dtype)
                    COMPREPLY=($(compgen -W "f32 f16 bf16 fp8 q8_0 q4_0" -- "${cur}"))
                    return 0
                    ;;
                --batch)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -b)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context-length)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ubatch)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mmproj)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --image-max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --overhead)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fragmentation-reserve)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mode)
                    COMPREPLY=($(compgen -W "infer train" -- "${cur}"))
                    return 0
                    ;;
                --optimizer)
                    COMPREPLY=($(compgen -W "adam adamw sgd adamw8bit adafactor" -- "${cur}"))
                    return 0
                    ;;
                --grad-accum)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --attn-implementation)
                    COMPREPLY=($(compgen -W "sdpa eager" -- "${cur}"))
                    return 0
                    ;;
                --recipe)
                    COMPREPLY=($(compgen -W "bf16 fp32-autocast mixed lora qlora" -- "${cur}"))
                    return 0
                    ;;
                --lora-rank)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --lora-targets)
                    COMPREPLY=($(compgen -W "all-linear attention" -- "${cur}"))
                    return 0
                    ;;
                --fsdp)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --zero1)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deepspeed-zero1)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deepspeed-zero2)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deepspeed-zero3)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mem-fraction-static)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tp-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tp)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-running-requests)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --chunked-prefill-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-total-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculative-algorithm)
                    COMPREPLY=($(compgen -W "EAGLE EAGLE3 MTP NGRAM" -- "${cur}"))
                    return 0
                    ;;
                --speculative-draft-model-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --parallel)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gpu-overhead)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --engine)
                    COMPREPLY=($(compgen -W "llama.cpp transformers vllm sglang ollama all" -- "${cur}"))
                    return 0
                    ;;
                --flash-attn)
                    COMPREPLY=($(compgen -W "auto on off" -- "${cur}"))
                    return 0
                    ;;
                --device)
                    COMPREPLY=($(compgen -W "host host:4GiB sim:8GiB sim:24GiB sim:48GiB sim:80GiB sim:141GiB sim:h100 sim:h200 sim:a100-80gb sim:l40s sim:rtx4090 sim:mi300x cuda:0 cuda:1 rocm:0 opencl:0 vulkan:0 metal:0" -- "${cur}"))
                    return 0
                    ;;
                --new-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --assistant-model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --num-assistant-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --adapter-rank)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --adapter-targets)
                    COMPREPLY=($(compgen -W "q-v attention all-linear" -- "${cur}"))
                    return 0
                    ;;
                --adapter-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gpu-memory-utilization)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-num-batched-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-num-seqs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cpu-offload-gb)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pp-layer-partition)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tensor-parallel-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculative-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-loras)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-lora-rank)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-cpu-loras)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --limit-mm-per-prompt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mm-processor-kwargs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        gpumem__subcmd__help)
            opts="discover estimate select bench-alloc stress help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        gpumem__subcmd__help__subcmd__bench__subcmd__alloc)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        gpumem__subcmd__help__subcmd__discover)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        gpumem__subcmd__help__subcmd__estimate)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        gpumem__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        gpumem__subcmd__help__subcmd__select)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        gpumem__subcmd__help__subcmd__stress)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        gpumem__subcmd__select)
            opts="-m -b -c -q -v -h -V --model --config --gguf --safetensors --dtype --kv-dtype --batch --context-length --context --ubatch --allow-generic --allow-longer-context --offline --mmproj --image-max-tokens --swa-full --flash-attention --overhead --fragmentation-reserve --mode --optimizer --checkpointing --no-checkpointing --grad-accum --attn-implementation --recipe --lora-rank --lora-targets --fsdp --no-reshard-after-forward --ddp --ddp-bucket-view --zero1 --deepspeed-zero1 --deepspeed-zero2 --deepspeed-zero3 --offload-optimizer --mem-fraction-static --tp --tp-size --max-running-requests --chunked-prefill-size --max-total-tokens --disable-cuda-graph --speculative-algorithm --speculative-draft-model-path --parallel --gpu-overhead --max-context --max-concurrency --suggest-dtype --bytes --inventory --engine --device --ram --gpu-memory-utilization --max-num-batched-tokens --max-num-seqs --block-size --enforce-eager --cpu-offload-gb --pp-layer-partition --tensor-parallel-size --speculative-config --enable-lora --max-loras --max-lora-rank --max-cpu-loras --limit-mm-per-prompt --mm-processor-kwargs --fit-context --fit-ctx-min --llamacpp-device --flash-attn --no-op-offload --split-mode --spec-draft-model --model-draft --spec-draft-n-max --n-gpu-layers-draft --gpu-layers-draft --lora --fitt --fit-target --prefer --memory-fraction --min-free --driver-reserve --context-reserve --reserve-fraction --reserve-cap --timeout --json --quiet --verbose --wide --color --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -W "mistral-7b mistral-7b-v0.1 mistral mistral-7b-v0.3 mistral-7b-instruct-v0.3 mistral-nemo-12b mistral-nemo mixtral-8x7b mixtral mixtral-8x22b llama-2-7b llama2-7b llama-2-13b llama2-13b llama-2-70b llama2-70b codellama-7b llama-3-8b llama3-8b llama-3-70b llama3-70b llama-3.1-8b llama3.1-8b llama-3.1-70b llama3.1-70b llama-3.3-70b llama-3.1-405b llama3.1-405b llama-3.2-1b llama3.2-1b llama-3.2-3b llama3.2-3b tinyllama-1.1b tinyllama yi-34b qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b qwen2.5-7b qwen2-7b qwen2.5-14b qwen2.5-32b qwen2.5-72b qwen2-72b qwen3-0.6b qwen3-4b qwen3-8b qwen3-14b qwen3-32b qwen3-30b-a3b qwen3-moe gemma-2b gemma-7b gemma-2-2b gemma2-2b gemma-2-9b gemma2-9b gemma-2-27b gemma2-27b gemma-3-1b gemma3-1b phi-3-mini phi3-mini phi-3.5-mini phi-3-medium phi3-medium phi-4 phi4 deepseek-v2-lite deepseek-v2-lite-chat deepseek-v3 deepseek-r1 deepseek-v4-flash deepseek-v4 deepseek-v3.2 deepseek-v3.2-exp falcon-7b gpt-neox-20b neox-20b gpt-oss-20b gpt-oss gpt-oss-120b llama-4-scout llama-4-scout-17b-16e llama4-scout llama-4-maverick llama-4-maverick-17b-128e llama4-maverick qwen3-next-80b-a3b qwen3-next qwen3-next-80b qwen3.5-35b-a3b qwen3.5-35b qwen3.5-moe glm-5 glm5 gemma-4-31b gemma4-31b gemma-4-26b-a4b gemma4-26b-a4b gemma-4-26b gemma-4-e2b gemma4-e2b gemma-4-e4b gemma4-e4b minimax-m2 minimax-m2-230b-a10b minimax-m3 minimax-m3-428b-a23b kimi-k2 kimi-k2-instruct kimi-k3 kimi-linear-48b-a3b kimi-linear kimi-linear-48b nemotron-nano-9b-v2 nvidia-nemotron-nano-9b-v2 nemotron-h-9b mamba-codestral-7b mamba-codestral" -- "${cur}"))
                    return 0
                    ;;
                -m)
                    COMPREPLY=($(compgen -W "mistral-7b mistral-7b-v0.1 mistral mistral-7b-v0.3 mistral-7b-instruct-v0.3 mistral-nemo-12b mistral-nemo mixtral-8x7b mixtral mixtral-8x22b llama-2-7b llama2-7b llama-2-13b llama2-13b llama-2-70b llama2-70b codellama-7b llama-3-8b llama3-8b llama-3-70b llama3-70b llama-3.1-8b llama3.1-8b llama-3.1-70b llama3.1-70b llama-3.3-70b llama-3.1-405b llama3.1-405b llama-3.2-1b llama3.2-1b llama-3.2-3b llama3.2-3b tinyllama-1.1b tinyllama yi-34b qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b qwen2.5-7b qwen2-7b qwen2.5-14b qwen2.5-32b qwen2.5-72b qwen2-72b qwen3-0.6b qwen3-4b qwen3-8b qwen3-14b qwen3-32b qwen3-30b-a3b qwen3-moe gemma-2b gemma-7b gemma-2-2b gemma2-2b gemma-2-9b gemma2-9b gemma-2-27b gemma2-27b gemma-3-1b gemma3-1b phi-3-mini phi3-mini phi-3.5-mini phi-3-medium phi3-medium phi-4 phi4 deepseek-v2-lite deepseek-v2-lite-chat deepseek-v3 deepseek-r1 deepseek-v4-flash deepseek-v4 deepseek-v3.2 deepseek-v3.2-exp falcon-7b gpt-neox-20b neox-20b gpt-oss-20b gpt-oss gpt-oss-120b llama-4-scout llama-4-scout-17b-16e llama4-scout llama-4-maverick llama-4-maverick-17b-128e llama4-maverick qwen3-next-80b-a3b qwen3-next qwen3-next-80b qwen3.5-35b-a3b qwen3.5-35b qwen3.5-moe glm-5 glm5 gemma-4-31b gemma4-31b gemma-4-26b-a4b gemma4-26b-a4b gemma-4-26b gemma-4-e2b gemma4-e2b gemma-4-e4b gemma4-e4b minimax-m2 minimax-m2-230b-a10b minimax-m3 minimax-m3-428b-a23b kimi-k2 kimi-k2-instruct kimi-k3 kimi-linear-48b-a3b kimi-linear kimi-linear-48b nemotron-nano-9b-v2 nvidia-nemotron-nano-9b-v2 nemotron-h-9b mamba-codestral-7b mamba-codestral" -- "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gguf)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --safetensors)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --dtype)
                    COMPREPLY=($(compgen -W "f32 f16 bf16 fp8 int8 int4 int4_g128 q8_0 q6_k q5_0 q5_1 q5_k q4_0 q4_1 q4_k q3_k q2_k iq4_nl iq4_xs iq3_s iq3_xxs iq2_s iq2_xs iq2_xxs iq1_m iq1_s tq2_0 tq1_0 mxfp4 q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m" -- "${cur}"))
                    return 0
                    ;;
                --kv-dtype)
                    COMPREPLY=($(compgen -W "f32 f16 bf16 fp8 q8_0 q4_0" -- "${cur}"))
                    return 0
                    ;;
                --batch)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -b)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context-length)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ubatch)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mmproj)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --image-max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --overhead)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fragmentation-reserve)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mode)
                    COMPREPLY=($(compgen -W "infer train" -- "${cur}"))
                    return 0
                    ;;
                --optimizer)
                    COMPREPLY=($(compgen -W "adam adamw sgd adamw8bit adafactor" -- "${cur}"))
                    return 0
                    ;;
                --grad-accum)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --attn-implementation)
                    COMPREPLY=($(compgen -W "sdpa eager" -- "${cur}"))
                    return 0
                    ;;
                --recipe)
                    COMPREPLY=($(compgen -W "bf16 fp32-autocast mixed lora qlora" -- "${cur}"))
                    return 0
                    ;;
                --lora-rank)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --lora-targets)
                    COMPREPLY=($(compgen -W "all-linear attention" -- "${cur}"))
                    return 0
                    ;;
                --fsdp)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --zero1)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deepspeed-zero1)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deepspeed-zero2)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deepspeed-zero3)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mem-fraction-static)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tp-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tp)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-running-requests)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --chunked-prefill-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-total-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculative-algorithm)
                    COMPREPLY=($(compgen -W "EAGLE EAGLE3 MTP NGRAM" -- "${cur}"))
                    return 0
                    ;;
                --speculative-draft-model-path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --parallel)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gpu-overhead)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inventory)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --engine)
                    COMPREPLY=($(compgen -W "llama.cpp vllm sglang ollama" -- "${cur}"))
                    return 0
                    ;;
                --device)
                    COMPREPLY=($(compgen -W "host host:4GiB sim:8GiB sim:24GiB sim:48GiB sim:80GiB sim:141GiB sim:h100 sim:h200 sim:a100-80gb sim:l40s sim:rtx4090 sim:mi300x cuda:0 cuda:1 rocm:0 opencl:0 vulkan:0 metal:0" -- "${cur}"))
                    return 0
                    ;;
                --ram)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gpu-memory-utilization)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-num-batched-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-num-seqs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --block-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cpu-offload-gb)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pp-layer-partition)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tensor-parallel-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculative-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-loras)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-lora-rank)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-cpu-loras)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --limit-mm-per-prompt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mm-processor-kwargs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fit-ctx-min)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --llamacpp-device)
                    COMPREPLY=($(compgen -W "cuda cpu-rules vulkan metal" -- "${cur}"))
                    return 0
                    ;;
                --flash-attn)
                    COMPREPLY=($(compgen -W "auto on off" -- "${cur}"))
                    return 0
                    ;;
                --split-mode)
                    COMPREPLY=($(compgen -W "layer none row" -- "${cur}"))
                    return 0
                    ;;
                --model-draft)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spec-draft-model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spec-draft-n-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gpu-layers-draft)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --n-gpu-layers-draft)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --lora)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fit-target)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fitt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefer)
                    COMPREPLY=($(compgen -W "auto cuda rocm metal opencl vulkan cpu" -- "${cur}"))
                    return 0
                    ;;
                --memory-fraction)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-free)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --driver-reserve)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context-reserve)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reserve-fraction)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reserve-cap)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        gpumem__subcmd__stress)
            opts="-q -v -h -V --device --timeout --phase --cpu-fallback --no-cpu-fallback --threads --duration --ops --inject-failures --max-size --max-pool --seed --export-markdown --export-junit --export-prometheus --plant-corruption --json --quiet --verbose --wide --color --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --device)
                    COMPREPLY=($(compgen -W "host host:4GiB sim:8GiB sim:24GiB sim:48GiB sim:80GiB sim:141GiB sim:h100 sim:h200 sim:a100-80gb sim:l40s sim:rtx4090 sim:mi300x cuda:0 cuda:1 rocm:0 opencl:0 vulkan:0 metal:0" -- "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --phase)
                    COMPREPLY=($(compgen -W "ramp exhaust churn recover" -- "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --duration)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ops)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inject-failures)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-pool)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --export-markdown)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --export-junit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --export-prometheus)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _gpumem -o nosort -o bashdefault -o default gpumem
else
    complete -F _gpumem -o bashdefault -o default gpumem
fi
