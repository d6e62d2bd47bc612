//! What `--help` and the man pages print after the options: examples, the environment gpumem
//! reads, and the exit codes (the one table in `crate::exit`).

/// The text after a command's long help: its examples, the environment it reads, the exit
/// codes (the same tables the man pages print).
pub(super) fn after_help(command: Option<&str>) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    let examples: Vec<&(&str, &str, &str)> = EXAMPLES
        .iter()
        .filter(|(c, _, _)| command.is_none_or(|want| *c == want))
        .collect();
    if !examples.is_empty() {
        text.push_str("Examples:\n");
        for (_, what, line) in examples {
            let _ = writeln!(text, "  # {what}\n  {line}\n");
        }
    }
    text.push_str("Exit codes:\n");
    for (code, meaning) in crate::exit::TABLE {
        // Wrapped here with a hanging indent: clap would wrap at its width without one.
        let mut line = format!("  {code:<9}");
        for word in meaning.replace('`', "").split(' ') {
            if line.len() + 1 + word.len() > 96 {
                let _ = writeln!(text, "{}", line.trim_end());
                line = " ".repeat(11);
            }
            line.push_str(word);
            line.push(' ');
        }
        let _ = writeln!(text, "{}", line.trim_end());
    }
    let _ = write!(text, "\n{}", crate::exit::NOTE.replace('`', ""));
    text
}

/// Examples for `--help` and the man pages: (subcommand, what it shows, the command line).
pub const EXAMPLES: &[(&str, &str, &str)] = &[
    ("discover", "every backend and device, with free memory", "gpumem discover"),
    ("discover", "gauges for node_exporter's textfile collector", "gpumem discover --format prometheus > /var/lib/node_exporter/gpumem.prom"),
    ("estimate", "a catalog model at 8k tokens", "gpumem estimate --model llama-3.1-8b --context 8192"),
    ("estimate", "a GGUF file; exit 3 unless a device here holds it", "gpumem estimate --gguf model.Q4_K_M.gguf --fits"),
    ("estimate", "one PyTorch training step with LoRA", "gpumem estimate --model llama-3.2-1b --mode train --recipe lora --lora-rank 16"),
    ("select", "vLLM on one 24 GiB card at 32k tokens", "gpumem select --model llama-3.1-8b --context 32768 --device sim:24GiB"),
    ("select", "llama.cpp with part of the model in RAM", "gpumem select --model llama-3.1-8b --dtype q8_0 --engine llama.cpp --device sim:8GiB --ram 32GiB"),
    ("select", "a fleet from kubectl and nvidia-smi", "gpumem select --model llama-3.1-70b --inventory cluster.json --inventory gpu-box.csv"),
    ("bench-alloc", "the pool on the best device, with a CI gate", "gpumem bench-alloc -n 20000 --min-hit-rate 0.95"),
    ("bench-alloc", "keep a baseline, then fail on a 10 % slowdown", "gpumem bench-alloc --device cuda:0 --runs 5 --save-baseline base.json\n  gpumem bench-alloc --device cuda:0 --runs 5 --baseline base.json --max-regression ops-per-sec:10"),
    ("bench-alloc", "add runs until the gate is decided, 5 to 20", "gpumem bench-alloc --device cuda:0 --min-runs 5 --max-runs 20 --baseline base.json --max-regression ops-per-sec:10"),
    ("bench-alloc", "replay a PyTorch memory snapshot", "gpumem bench-alloc --trace snapshot.pickle --timeline peak.svg"),
    ("stress", "pressure, recovery and integrity for 30 s", "gpumem stress --device vulkan:0 --duration 30s"),
    ("stress", "with 10 % of device allocations failing on purpose", "gpumem stress --device cuda:0 --inject-failures 0.1 --export-junit stress.xml"),
];

/// Environment variables gpumem reads, for `--help` and the man pages: (name, meaning).
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "GPUMEM_MEMORY_FRACTION",
        "fraction of device memory the pool may reserve, (0, 1]",
    ),
    (
        "GPUMEM_MIN_FREE",
        "bytes always left free on the device, e.g. 512MiB",
    ),
    ("GPUMEM_MAX_POOL", "absolute cap on what the pool reserves"),
    (
        "GPUMEM_CPU_FALLBACK",
        "true/false: serve what the device cannot hold from CPU memory",
    ),
    (
        "GPUMEM_TRACK_ALLOCATIONS",
        "true/false: keep metadata for every live buffer",
    ),
    (
        "GPUMEM_MAX_POOLED_PER_BUCKET",
        "idle segments kept per segment size",
    ),
    ("GPUMEM_MAX_SPLIT_SIZE", "blocks above this are never split"),
    (
        "GPUMEM_DRIVER_RESERVE",
        "true/false: keep a driver and context reserve back on a device with a driver",
    ),
    (
        "GPUMEM_EXPANDABLE_SEGMENTS",
        "true/false: one growing address range per stream, as PyTorch's expandable_segments",
    ),
    (
        "GPUMEM_MAX_SEGMENT",
        "the largest segment a growing pool adds (default 256MiB; 0: PyTorch's fixed size classes)",
    ),
    (
        "GITHUB_STEP_SUMMARY",
        "where --export-markdown without FILE adds its section",
    ),
    (
        "COLUMNS",
        "the width tables fit when stdout is not a terminal (default 80)",
    ),
    ("NO_COLOR", "no colour with --color auto"),
    (
        "HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME",
        "the Hugging Face cache --model ORG/NAME reads",
    ),
    (
        "OLLAMA_MODELS",
        "the Ollama store --model ollama:NAME reads",
    ),
];
