//! How vLLM is started (its flags, with vLLM's defaults), the GPU a rank runs on and the model as
//! vLLM loads it.

use serde::Serialize;

use super::defaults;
use crate::model::{ModelArch, Precision, WEIGHT_BF16, WEIGHT_F16, WEIGHT_F32, WEIGHT_FP8};

/// The precision vLLM loads a checkpoint's weights in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VllmDtype {
    /// `--dtype auto`: the checkpoint's own (16-bit for the models gpumem plans).
    Auto,
    /// `--dtype float32`.
    Float32,
    /// `--dtype float16`.
    Float16,
    /// `--dtype bfloat16`.
    Bfloat16,
    /// `--quantization fp8`: the linear layers' weights quantized on load, one byte each; the
    /// embeddings and the output head stay in 16 bits.
    Fp8,
    /// A precision vLLM cannot quantize to on load (a GGUF type, int4): only a checkpoint
    /// already stored so is served in it.
    Stored,
}

impl VllmDtype {
    /// The precision `--dtype` asked for.
    pub fn of(dtype: Option<Precision>) -> Self {
        match dtype {
            None => VllmDtype::Auto,
            Some(WEIGHT_F32) => VllmDtype::Float32,
            Some(WEIGHT_F16) => VllmDtype::Float16,
            Some(WEIGHT_BF16) => VllmDtype::Bfloat16,
            Some(WEIGHT_FP8) => VllmDtype::Fp8,
            Some(_) => VllmDtype::Stored,
        }
    }

    /// Bytes of an activation element, and of a KV element under `--kv-cache-dtype auto`.
    pub fn activation_bytes(self) -> u64 {
        match self {
            VllmDtype::Float32 => 4,
            _ => 2,
        }
    }

    /// The `vllm serve` flag and value that load weights so, where one does.
    pub fn flag(self) -> Option<(&'static str, &'static str)> {
        match self {
            VllmDtype::Float32 => Some(("--dtype", "float32")),
            VllmDtype::Float16 => Some(("--dtype", "float16")),
            VllmDtype::Bfloat16 => Some(("--dtype", "bfloat16")),
            VllmDtype::Fp8 => Some(("--quantization", "fp8")),
            VllmDtype::Auto | VllmDtype::Stored => None,
        }
    }
}

/// How vLLM is started (`vllm serve` flags).
#[derive(Debug, Clone, PartialEq)]
pub struct VllmConfig {
    /// `--gpu-memory-utilization`, in (0, 1].
    pub gpu_memory_utilization: f64,
    /// `--max-model-len`.
    pub max_model_len: u64,
    /// `--max-num-batched-tokens` (`None`: vLLM's default for the GPU).
    pub max_num_batched_tokens: Option<u64>,
    /// `--max-num-seqs` (`None`: vLLM's default for the GPU).
    pub max_num_seqs: Option<u64>,
    /// `--block-size`.
    pub block_size: u64,
    /// `--dtype` / `--quantization fp8`.
    pub dtype: VllmDtype,
    /// Bytes per KV-cache element (`--kv-cache-dtype`: auto is the model dtype's, fp8 one).
    pub kv_element_bytes: u64,
    /// `--enforce-eager`: no CUDA graphs, no graph pool.
    pub enforce_eager: bool,
    /// `VLLM_PP_LAYER_PARTITION`: each stage's layers (`None`: `get_pp_indices`' even split).
    pub pp_layer_partition: Option<Vec<u64>>,
    /// `--cpu-offload-gb`, in bytes: each rank keeps up to this much of its layers' weights in
    /// host memory.
    pub cpu_offload_bytes: u64,
    /// `--tensor-parallel-size`: only layouts of this many ranks a stage (`None`: any).
    pub tensor_parallel: Option<u64>,
    /// `--speculative-config`: the draft run beside the model.
    pub speculative: Option<VllmSpeculative>,
    /// `--enable-lora`: the adapter slots vLLM preallocates.
    pub lora: Option<VllmLora>,
    /// `--limit-mm-per-prompt` and `--mm-processor-kwargs`: the multimodal profile run.
    pub multimodal: super::encoder::VllmMultimodal,
    /// Batches in flight whose tokens a sliding layer's blocks must hold besides its window
    /// (`VllmConfig.max_in_flight_tokens` ÷ `max_num_batched_tokens`): 2 under vLLM 0.33's
    /// default asynchronous scheduling on one stage; 1 in vLLM up to 0.22, which reserved one
    /// batch (`--no-async-scheduling` reserves one too).
    pub in_flight_batches: u64,
}

/// `--enable-lora --max-loras K --max-lora-rank R [--max-cpu-loras C]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct VllmLora {
    /// `--max-loras`: adapters a batch may use at once (the GPU slots).
    pub max_loras: u64,
    /// `--max-lora-rank`.
    pub max_lora_rank: u64,
    /// `--max-cpu-loras`: adapters cached in host memory (`None`: `--max-loras`).
    pub max_cpu_loras: Option<u64>,
}

impl VllmLora {
    /// The bytes of LoRA slots one rank of `tp` holds for `layers` decoder layers at
    /// `element` bytes a value: for each linear layer vLLM wraps (q, k and v, the output, gate
    /// and up, down), `max_loras` A matrices of `rank` × its input and B matrices of its output
    /// × `rank` (`create_lora_weights` in `lora/layers/`), the column-parallel layers' outputs
    /// and the row-parallel layers' inputs split over the ranks.
    pub fn slot_bytes(&self, arch: &ModelArch, tp: u64, layers: u64, element: u64) -> u64 {
        let w = u128::from;
        let tp = w(tp.max(1));
        let (h, r) = (w(arch.hidden_size), w(self.max_lora_rank));
        let q = w(arch.num_heads) * w(arch.head_dim);
        let kv = w(arch.num_kv_heads) * w(arch.head_dim);
        let ffn = w(arch.intermediate_size);
        let gated = arch.mlp == crate::model::Mlp::Gated;
        let (col_in, col_out) = if gated {
            (5 * h, q + 2 * kv + 2 * ffn)
        } else {
            (4 * h, q + 2 * kv + ffn)
        };
        let a = r * (col_in + (q + ffn) / tp);
        let b = r * (col_out / tp + 2 * h);
        let bytes = (a + b) * w(self.max_loras) * w(layers) * w(element);
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }

    /// The bytes of the vocabulary's LoRA slots at one end of the model, at `element` bytes a
    /// value: where the model class declares `embedding_modules` (vLLM's Llama and Qwen3
    /// classes do, Mistral's and Qwen2's do not), the token embedding is wrapped on the first
    /// stage (A: vocabulary × rank, B: hidden × rank) and the output head's logits on the last
    /// (A: rank × hidden, B: vocabulary × rank), each for `max_loras` adapters and neither
    /// split over the ranks (`VocabParallelEmbeddingWithLoRA`, `LogitsProcessorWithLoRA`).
    pub fn vocab_slot_bytes(&self, arch: &ModelArch, element: u64) -> u64 {
        if !arch.family_kind().vllm_lora_wraps_vocab() {
            return 0;
        }
        let w = u128::from;
        let bytes = w(self.max_lora_rank)
            * (w(arch.vocab_size) + w(arch.hidden_size))
            * w(self.max_loras)
            * w(element);
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }
}

/// `--speculative-config`: the draft's kind, the tokens it proposes a step, and the JSON as
/// given (for the launch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VllmSpeculative {
    /// `method` (vLLM's MTP spellings, `deepseek_mtp`, `qwen3_next_mtp`…, are `Mtp`).
    pub method: crate::plan::engines::speculative::SpecAlgorithm,
    /// `num_speculative_tokens`.
    pub tokens: u64,
    /// The JSON as given.
    pub json: String,
}

impl VllmSpeculative {
    /// The draft's KV layers in the pool: an EAGLE or EAGLE-3 head's one decoder layer, or the
    /// checkpoint's multi-token-prediction layer (one in the published heads), none for n-gram.
    pub fn layers(&self) -> u64 {
        use crate::plan::engines::speculative::SpecAlgorithm as A;
        match self.method {
            A::Ngram => 0,
            A::Eagle | A::Eagle3 | A::Mtp => 1,
        }
    }
}

impl VllmConfig {
    /// vLLM's defaults for a model served at `max_model_len`.
    pub fn defaults(max_model_len: u64) -> Self {
        VllmConfig {
            gpu_memory_utilization: defaults::GPU_MEMORY_UTILIZATION,
            max_model_len,
            max_num_batched_tokens: None,
            max_num_seqs: None,
            block_size: defaults::BLOCK_SIZE,
            dtype: VllmDtype::Auto,
            kv_element_bytes: 2,
            enforce_eager: false,
            pp_layer_partition: None,
            cpu_offload_bytes: 0,
            tensor_parallel: None,
            speculative: None,
            lora: None,
            multimodal: super::encoder::VllmMultimodal::default(),
            in_flight_batches: defaults::IN_FLIGHT_BATCHES,
        }
    }
}

impl VllmConfig {
    /// vLLM's defaults for a model estimated under `settings`: its context as `max_model_len`,
    /// its weight precision, and its KV-cache precision as the element size (vLLM's fp8 cache is
    /// one byte; with none asked for, the model dtype's, as `--kv-cache-dtype auto` takes it).
    pub fn for_settings(settings: &crate::plan::engines::Settings) -> Self {
        let dtype = VllmDtype::of(settings.dtype);
        let kv = settings.kv_dtype;
        VllmConfig {
            dtype,
            kv_element_bytes: if settings.kv_dtype_auto {
                dtype.activation_bytes()
            } else {
                (kv.block_bytes / kv.block_elems.max(1)).max(1)
            },
            ..VllmConfig::defaults(settings.context)
        }
    }

    /// Whether `--kv-cache-dtype fp8` is asked for.
    pub fn fp8_cache(&self) -> bool {
        self.kv_element_bytes == 1
    }

    /// `--block-size` where it is not vLLM's default.
    pub fn block_size_flag(&self) -> Option<u64> {
        (self.block_size != defaults::BLOCK_SIZE).then_some(self.block_size)
    }
}

/// The GPU one rank runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VllmGpu {
    /// Total memory, as `cudaMemGetInfo` reports it.
    pub total_bytes: u64,
    /// Whether it is an A100 (vLLM keeps the small batch defaults there).
    pub is_a100: bool,
}

/// The model as vLLM loads it.
#[derive(Debug, Clone, Copy)]
pub struct VllmModel<'a> {
    /// Its shape.
    pub arch: &'a ModelArch,
    /// Bytes of all weights (the checkpoint's, or parameters × dtype).
    pub weights_bytes: u64,
    /// Bytes per activation element (the model dtype: 2 for bf16/fp16).
    pub activation_bytes: u64,
    /// The vision tower loaded beside the language model, if any.
    pub vision: Option<super::encoder::VllmVision>,
}
