//! `estimate --mode train` against PyTorch on a real GPU (`tests/fixtures/pytorch-gpu/`, the
//! acceptance run on a lent H200): the step's tensors as gpumem replays them (exact against
//! MemTracker elsewhere) plus what a CUDA device adds, against `torch.cuda.max_memory_allocated`,
//! and the deploy figure against what PyTorch reserved.

#![allow(clippy::unwrap_used)]

use crate::common;
use serde_json::Value;

/// PyTorch's cuBLAS workspace on compute capability 9.0 and later (`CUBLAS_WORKSPACE_CONFIG`'s
/// default there, 4096 KiB × 8), one for each thread that runs matrix products: the forward
/// pass's and autograd's.
const CUBLAS_WORKSPACES: u64 = 2 * (32 << 20);

/// What the caching allocator's blocks add over the tensors' own bytes: requests rounded to
/// 512 bytes, and a large block's tail under 1 MiB handed out with it rather than split off.
const ROUNDING_MOST: u64 = 12 << 20;

#[test]
fn training_steps_match_pytorch_on_an_h200() {
    let text =
        std::fs::read_to_string(common::fixture("pytorch-gpu/h200-training-steps.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let mut failures = Vec::new();
    for row in doc["rows"].as_array().unwrap() {
        let recipe = doc["recipes"][row["recipe"].as_str().unwrap()]
            .as_str()
            .unwrap();
        let (batch, seq) = (row["batch"].to_string(), row["seq"].to_string());
        let mut args = vec![
            "--json",
            "-q",
            "estimate",
            "--model",
            row["model"].as_str().unwrap(),
            "--mode",
            "train",
            "--recipe",
            recipe,
            "--batch",
            &batch,
            "--context",
            &seq,
            "--attn-implementation",
            "sdpa",
        ];
        if row["checkpointing"] == true {
            args.push("--checkpointing");
        }
        let ours = common::json_ok(common::gpumem().args(&args));
        let step = ours["training_step"]["peak"]["total"].as_u64().unwrap();
        let total = ours["total_bytes"].as_u64().unwrap();
        let (allocated, reserved) = (
            row["max_allocated"].as_u64().unwrap(),
            row["max_reserved"].as_u64().unwrap(),
        );
        let on_device = step + CUBLAS_WORKSPACES;
        let name = format!(
            "{} {recipe} {batch}x{seq} ckpt {}",
            row["model"], row["checkpointing"]
        );
        if !(on_device <= allocated && allocated - on_device <= ROUNDING_MOST) {
            failures.push(format!(
                "{name}: step {step} + cuBLAS {CUBLAS_WORKSPACES} = {on_device}, PyTorch allocated {allocated}"
            ));
        }
        if total < reserved {
            failures.push(format!(
                "{name}: total {total} below PyTorch's reserved {reserved}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
