//! Which steps the walk covers: the combinations of family, recipe, optimizer, attention and
//! checkpointing it has been checked for, each refused otherwise with its reason, and the mask
//! attention takes.

use super::Optimizer;
use super::{AttnImplementation, Layout, Recipe, Shape, TrainingError, TrainingRun};

/// How attention runs for this step.
#[derive(Clone, Copy)]
pub(super) struct Mask {
    /// SDPA takes a mask past the window.
    pub(super) masked: bool,
    /// …and then K and V are repeated to every head.
    pub(super) repeated: bool,
    /// A Llama-layout model's attention runs eagerly (`attn_implementation="eager"`).
    pub(super) eager: bool,
}

/// The combinations walked; the mask attention takes.
pub(super) fn check(s: &Shape, run: &TrainingRun) -> Result<Mask, TrainingError> {
    let refuse = |what| Err(TrainingError::Unsupported { what });
    if run.recipe == Recipe::MixedFp32Master && run.fsdp.is_none() {
        return refuse("an f32 master copy of bf16 weights under DDP or DeepSpeed");
    }
    let looped = matches!(
        run.optimizer,
        Optimizer::Adam | Optimizer::Adamw | Optimizer::Sgd
    ) && !run.foreach;
    if looped && run.fsdp.is_none() {
        return refuse("the optimizer's per-tensor loop (foreach off) other than under FSDP2");
    }
    let listed = s.dense_tensor_elements().is_some() && run.recipe.lora().is_none();
    match run.optimizer {
        Optimizer::Adamw8bit if !listed => {
            return refuse("8-bit AdamW with LoRA or shared experts outside DeepSeek-V2")
        }
        Optimizer::Adafactor if !listed => {
            return refuse("Adafactor with LoRA or shared experts outside DeepSeek-V2")
        }
        _ => {}
    }
    let eager = eager_attention(s, run)?;
    // Past the window SDPA takes a mask: no GQA, K and V repeated to every head. Eager
    // attention (Gemma 2, gpt-oss, DeepSeek-V2) adds its masks whatever the length, and saves
    // none.
    let sdpa = matches!(s.layout, Layout::Llama | Layout::Gemma3) && !eager;
    let masked = sdpa && s.window.is_some_and(|w| u128::from(run.seq) >= w);
    let repeated = masked && s.heads != s.kv_heads;
    if run.checkpointing && matches!(s.layout, Layout::GptOss | Layout::DeepseekV2) {
        return refuse("checkpointing of eager attention other than Gemma 2's");
    }
    let autocast = run.recipe == Recipe::Fp32Autocast;
    if masked && (!s.window_all_layers || run.checkpointing || autocast || (s.fused && repeated)) {
        return refuse("this sliding window within the sequence");
    }
    if autocast && (s.moe.is_some() || s.layout != Layout::Llama) {
        return refuse("experts or another layout than Llama's under autocast");
    }
    if run.recipe.lora().is_some()
        && (masked || s.moe.is_some() || s.fused || s.layout != Layout::Llama)
    {
        return refuse("LoRA with a mask, experts or fused projections");
    }
    Ok(Mask {
        masked,
        repeated,
        eager,
    })
}

/// Whether a Llama-layout model runs eager attention; the families transformers runs only
/// eagerly (Gemma 2, gpt-oss) have their own walk, and no SDPA one.
fn eager_attention(s: &Shape, run: &TrainingRun) -> Result<bool, TrainingError> {
    let refuse = |what| Err(TrainingError::Unsupported { what });
    let eager_family = matches!(s.layout, Layout::Gemma2 | Layout::GptOss);
    match run.attention {
        AttnImplementation::Auto => Ok(false),
        AttnImplementation::Sdpa if eager_family => {
            refuse("SDPA for Gemma 2 or gpt-oss (transformers runs them eagerly)")
        }
        AttnImplementation::Sdpa => Ok(false),
        AttnImplementation::Eager if eager_family => Ok(false),
        AttnImplementation::Eager => {
            let windowed = s.window.is_some_and(|w| u128::from(run.seq) >= w);
            if s.layout != Layout::Llama
                || s.moe.is_some()
                || s.fused
                || windowed
                || run.recipe.lora().is_some()
                || run.recipe == Recipe::Fp32Autocast
                || run.fsdp.is_some()
                || run.ddp.is_some()
            {
                return refuse(
                    "eager attention with experts, fused projections, a sliding window within \
                     the sequence, LoRA, autocast, FSDP2 or DDP, or Gemma 3's or DeepSeek-V2's \
                     layout",
                );
            }
            Ok(true)
        }
    }
}
