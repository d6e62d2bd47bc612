//! Ollama 0.33's scheduling of a GGUF model: it starts llama.cpp's `llama-server` with the
//! context and parallel slots it chose (`-c num_ctx × parallel -np parallel`), the KV-cache type
//! and flash attention from its environment, and leaves the layer placement to llama-server's
//! own fit (`llm/llama_server.go`, `startLlamaServer`); what `ollama ps` shows is read back from
//! llama-server's buffer lines (`MemorySize`). So the placement is gpumem's llama.cpp fit, run
//! with Ollama's defaults: the default context by the GPUs' total memory (`server/routes.go`:
//! 262,144 tokens from 47 GiB, 32,768 from 23 GiB, else 4,096, never past the model's trained
//! length) and one parallel request (`OLLAMA_NUM_PARALLEL`).
//!
//! Ollama up to 0.12.10 estimated instead (`llm/memory.go`, deleted since); 0.12.11 to 0.29
//! measured by trial allocation in its own runner. gpumem models the release users run now.

pub(crate) mod launch;
mod plan;
mod processor;

/// The Ollama modelled: its Go source read at v0.33.0-rc2 (llama-server with llama.cpp's fit).
pub const VERSION: super::EngineVersion = super::EngineVersion {
    engine: "Ollama",
    version: "0.33",
    source: "its Go source (v0.33.0-rc2); llama-server's fit",
};

pub use plan::{NumCtxFrom, Ollama, OllamaAccount, OllamaRun};
pub use processor::Processor;
