//! The optimizers' state beside the parameters, and the largest temporaries of their step,
//! where a tensor's own shape sets them: bitsandbytes' 8-bit AdamW and transformers'
//! Adafactor, over the parameter tensors as transformers registers them.

use super::shape::Tensor;
use super::Shape;

/// bitsandbytes' AdamW8bit state (`Optimizer2State.init_state`): a tensor of 4,096 elements or
/// more keeps two uint8 moments and a f32 scale for each block of 256; a smaller one two f32
/// moments; the two quantization maps (256 f32 each) are shared. Where the tensors are not
/// listed ([`Shape::tensors`]) the walk refuses.
pub(super) fn adamw8bit_state(s: &Shape) -> u128 {
    const MIN_8BIT: u128 = 4096;
    const BLOCK: u128 = 256;
    match s.dense_tensor_elements() {
        Some(tensors) => {
            let state: u128 = tensors
                .iter()
                .map(|&n| {
                    if n < MIN_8BIT {
                        2 * 4 * n
                    } else {
                        2 * n + 2 * 4 * n.div_ceil(BLOCK)
                    }
                })
                .sum();
            state + 2 * BLOCK * 4
        }
        None => 0,
    }
}

/// transformers' Adafactor (`Adafactor.step`, no first moment): its state and the largest
/// temporaries of its per-tensor step. A matrix keeps f32 row and column second moments, a
/// vector a full one, and every tensor its RMS (a 0-d f32 tensor). Stepping a matrix of `n`
/// elements holds, at once, f32 copies of its gradient and of itself (bf16 parameters only)
/// and two more tensors of `n` f32: 4 (bf16) or 2 (f32) in all. Beside them sits either the
/// row and column factors (while the new update is made from them) or, while the squared
/// gradient is made, the previous tensor's update, which the loop's variable keeps until it
/// is overwritten (DeepSeek-V2's experts follow the 2048 × 2048 output projection). The
/// tensors are taken in the order transformers registers them.
pub(super) fn adafactor(s: &Shape, param_bytes: u128) -> (u128, u128) {
    let Some(tensors) = s.tensors() else {
        return (0, 0);
    };
    let copies = if param_bytes == 4 { 2 } else { 4 };
    // A stack of matrices (the experts') is factored over its last two dimensions: a row and a
    // column moment for each matrix of the stack.
    let factors = |t: &Tensor| t.count * (t.rows + t.cols);
    let state: u128 = tensors
        .iter()
        .map(|t| if t.cols == 0 { 4 * t.rows } else { 4 * factors(t) } + 4)
        .sum();
    let previous = std::iter::once(0).chain(tensors.iter().map(|t| t.elements()));
    let step = tensors
        .iter()
        .zip(previous)
        .filter(|(t, _)| t.cols > 0)
        .map(|(t, before)| 4 * (copies * t.elements() + factors(t).max(before)))
        .max()
        .unwrap_or(0);
    (state, step)
}
