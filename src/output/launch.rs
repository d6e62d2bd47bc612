//! The launch commands `select` prints: each engine's command lines (argv and shell), its notes
//! in words, and why an engine has none.

use std::fmt::Write as _;

use serde::Serialize;

use super::one_line;
use crate::plan::launch::{Engine, Fsdp2Precision, Launch, LaunchCommand, LaunchNote, NoLaunch};

/// One engine's launch: its commands as argv and as a shell line, or why there is none.
#[derive(Serialize)]
pub(super) struct LaunchJson<'a> {
    engine: Engine,
    #[serde(skip_serializing_if = "Option::is_none")]
    commands: Option<Vec<CommandJson<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notes: Option<&'a [LaunchNote]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unavailable: Option<NoLaunch>,
}

#[derive(Serialize)]
struct CommandJson<'a> {
    #[serde(flatten)]
    command: &'a LaunchCommand,
    shell: String,
}

pub(super) fn launch_json(engine: Engine, result: &Result<Launch, NoLaunch>) -> LaunchJson<'_> {
    match result {
        Ok(l) => LaunchJson {
            engine,
            commands: Some(
                l.commands
                    .iter()
                    .map(|c| CommandJson {
                        command: c,
                        shell: shell_line(c),
                    })
                    .collect(),
            ),
            notes: Some(&l.notes),
            unavailable: None,
        },
        Err(why) => LaunchJson {
            engine,
            commands: None,
            notes: None,
            unavailable: Some(*why),
        },
    }
}

/// `word` quoted for a POSIX shell when it needs to be.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=,@+%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The command as one line to paste: environment assignments, then the program and arguments.
fn shell_line(c: &LaunchCommand) -> String {
    c.env
        .iter()
        .map(|(k, v)| format!("{k}={}", shell_word(v)))
        .chain(c.argv.iter().map(|a| shell_word(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn engine_name(e: Engine) -> &'static str {
    match e {
        Engine::LlamaCpp => "llama.cpp",
        Engine::Vllm => "vLLM",
        Engine::Sglang => "SGLang",
        Engine::Ollama => "Ollama",
        Engine::Torchrun => "PyTorch (torchrun)",
    }
}

fn note_text(n: &LaunchNote) -> String {
    match n {
        LaunchNote::Network => {
            "start the workers first; the server's host must reach each worker's port".into()
        }
        LaunchNote::Fsdp2 {
            reshard_after_forward,
            precision,
        } => format!(
            "train.py: fully_shard(layer, reshard_after_forward={r}{mp}) on every decoder \
             layer, then fully_shard(model{mp}); with HF Trainer, fsdp=True and fsdp_config \
             {{\"reshard_after_forward\": {l}}}{how}",
            r = if *reshard_after_forward {
                "True"
            } else {
                "False"
            },
            l = reshard_after_forward,
            mp = match precision {
                Some(Fsdp2Precision::Mixed) => ", mp_policy=mp",
                _ => "",
            },
            how = precision.map_or("", fsdp2_precision_text),
        ),
        LaunchNote::Ddp { bucket_view, zero1 } => format!(
            "train.py: DistributedDataParallel(model, gradient_as_bucket_view={}){}; HF \
             Trainer wraps it so under torchrun",
            if *bucket_view { "True" } else { "False" },
            if *zero1 {
                ", the optimizer a ZeroRedundancyOptimizer(params, optimizer_class=…)"
            } else {
                ""
            }
        ),
        LaunchNote::DeepSpeed {
            stage,
            micro_batch,
            offload_optimizer,
        } => format!(
            "train.py: deepspeed.initialize(model=model, model_parameters=model.parameters(), \
             config=\"ds_config.json\") (HF Trainer: deepspeed=\"ds_config.json\"); \
             ds_config.json: {{\"train_micro_batch_size_per_gpu\": {micro_batch}, \"bf16\": \
             {{\"enabled\": true}}, \"zero_optimization\": {{\"stage\": {stage}{}}}, \
             \"optimizer\": {{\"type\": \"AdamW\"}}}}",
            if *offload_optimizer {
                ", \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}"
            } else {
                ""
            }
        ),
        LaunchNote::StoredQuantized => "vLLM quantizes on load only to fp8: serve a checkpoint \
             already stored at the planned precision (AWQ, GPTQ, compressed-tensors)"
            .into(),
    }
}

fn no_launch_text(why: NoLaunch) -> String {
    match why {
        NoLaunch::UnevenStages { layers_per_stage } => format!(
            "it gives every pipeline stage the same number of layers ({layers_per_stage}), more \
             than the smallest GPUs here hold; the split above needs llama.cpp"
        ),
        NoLaunch::NeedsGguf => "it loads GGUF files; give the model with --gguf".into(),
        NoLaunch::NotPulled => "the model was read from Ollama's registry: `ollama pull` \
                                 fetches it, then gpumem plans its blob"
            .into(),
        NoLaunch::NeedsCheckpoint => {
            "it loads Hugging Face checkpoints; give --config or --safetensors (or a catalog name)"
                .into()
        }
        NoLaunch::NoPlan => "nothing fits".into(),
        NoLaunch::NotAnOllamaModel => "it runs GGUF models by name: ollama:NAME[:TAG] from its \
                                        store or registry, or a Hub GGUF repository \
                                        ORG/NAME:QUANT (as hf.co/ORG/NAME:QUANT)"
            .into(),
        NoLaunch::NotInOllama => "Ollama runs models by name: `ollama create NAME -f Modelfile` \
                                   (FROM the file) makes one"
            .into(),
        NoLaunch::NoGpu => "the plan runs in system RAM, and vLLM is planned for GPUs".into(),
        NoLaunch::NotAModel => "the plan is for a byte count, not a model".into(),
    }
}

/// How the FSDP2 script holds the weights for the planned recipe, after the note's first part.
fn fsdp2_precision_text(p: Fsdp2Precision) -> &'static str {
    match p {
        Fsdp2Precision::Bf16 => "; the model loaded in bf16 (dtype=torch.bfloat16)",
        Fsdp2Precision::Mixed => {
            "; the model loaded in f32, mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, \
             reduce_dtype=torch.float32)"
        }
        Fsdp2Precision::Fp32Autocast => {
            "; the model loaded in f32, the step under torch.autocast(\"cuda\", \
             dtype=torch.bfloat16) (HF Trainer: bf16=True)"
        }
        Fsdp2Precision::Lora => "; PEFT's LoRA adapters on the bf16 model, sharded with it",
        Fsdp2Precision::Qlora => {
            "; the layers in NF4 stored as bf16 (BitsAndBytesConfig(load_in_4bit=True, \
             bnb_4bit_quant_storage=torch.bfloat16)) so that FSDP2 shards them"
        }
    }
}

/// A shell command broken at `width` columns with backslash continuations, indented, so that
/// it pastes as one command.
fn continued(line: &str, width: usize) -> String {
    // A flag and its value break together (`-np 1`, `--tp 2`), so each continued line reads
    // as whole options; one too long for a continued line by themselves (a JSON value) break
    // apart, with a continuation between them like any other.
    let fits = |a: &str, b: &str| 8 + a.chars().count() + 1 + b.chars().count() + 2 <= width;
    let mut units: Vec<String> = Vec::new();
    for word in line.split(' ') {
        match units.last_mut() {
            Some(last)
                if is_flag(last)
                    && !last.contains([' ', '='])
                    && !word.starts_with('-')
                    && fits(last, word) =>
            {
                last.push(' ');
                last.push_str(word);
            }
            _ => units.push(word.to_string()),
        }
    }
    let mut out = String::from("    ");
    let mut col = 4;
    for (i, unit) in units.iter().enumerate() {
        let len = unit.chars().count();
        if i > 0 && col + 1 + len + 2 > width {
            out.push_str(" \\\n        ");
            col = 8;
        } else if i > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(unit);
        col += len;
    }
    out
}

/// An option word, long or short (`--tp`, `-ngl`), not a negative number.
fn is_flag(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next() == Some('-') && chars.next().is_some_and(|c| !c.is_ascii_digit())
}

/// One engine's launch commands, or why it has none.
pub(super) fn launch_text(text: &mut String, engine: Engine, result: &Result<Launch, NoLaunch>) {
    match result {
        Ok(l) => {
            let _ = writeln!(text, "\nLaunch with {}:", engine_name(engine));
            for c in &l.commands {
                let _ = writeln!(text, "  on {}:", one_line(&c.host));
                let _ = writeln!(text, "{}", continued(&shell_line(c), 80));
            }
            for n in &l.notes {
                let _ = writeln!(text, "  note: {}", note_text(n));
            }
        }
        Err(NoLaunch::NoPlan) => {}
        Err(why) => {
            let _ = writeln!(
                text,
                "\nNo {} command: {}.",
                engine_name(engine),
                no_launch_text(*why)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::continued;

    // Every line but the last ends in a continuation, so the command pastes as one: a flag
    // stays with a short value, and a value too long to share a line with its flag (vLLM's
    // JSON configs) gets one of its own.
    #[test]
    fn a_long_value_breaks_from_its_flag_with_a_continuation() {
        let json = r#"'{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}'"#;
        let line = format!("vllm serve m --max-model-len 8192 --speculative-config {json} -tp 2");
        let text = continued(&line, 80);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{text}");
        for l in &lines[..lines.len() - 1] {
            assert!(l.ends_with(" \\"), "{text}");
        }
        assert!(lines[0].ends_with("--speculative-config \\"), "{text}");
        assert_eq!(lines[1], format!("        {json} \\"), "{text}");
        assert_eq!(lines[2], "        -tp 2", "{text}");
    }
}
