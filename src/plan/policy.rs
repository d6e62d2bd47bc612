//! How much of a device a plan may use: the [`Policy`] (a fraction of free memory, a headroom
//! kept free, the driver-reserve design's driver and context reserve on GPUs) and the [`Usable`] figure it gives,
//! with the rule that set it.

use serde::Serialize;

use super::Candidate;
use crate::backend::BackendKind;
use crate::device::DriverReserve;

/// The usable-memory rule and backend preference.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Backend to favour (`None`: GPUs by headroom, CPU last).
    pub prefer: Option<BackendKind>,
    /// Fraction of free memory a plan may use.
    pub memory_fraction: f64,
    /// Bytes always left free.
    pub min_free: u64,
    /// The driver-reserve design's reserve: driver overhead…
    pub driver_reserve: u64,
    /// …plus context overhead…
    pub context_reserve: u64,
    /// …plus this fraction of the total…
    pub reserve_fraction: f64,
    /// …with the whole reserve capped at this many bytes.
    pub reserve_cap: u64,
}

impl Default for Policy {
    fn default() -> Self {
        let seed = DriverReserve::default();
        Policy {
            prefer: None,
            memory_fraction: 0.9,
            min_free: 512 << 20,
            driver_reserve: seed.driver,
            context_reserve: seed.context,
            reserve_fraction: seed.fraction,
            reserve_cap: seed.cap,
        }
    }
}

impl Policy {
    /// The reserve kept back on a GPU of `total` bytes.
    pub fn reserve(&self, total: u64) -> u64 {
        DriverReserve {
            driver: self.driver_reserve,
            context: self.context_reserve,
            fraction: self.reserve_fraction,
            cap: self.reserve_cap,
        }
        .of(total)
    }

    /// Bytes a plan may use on a device: the smallest of free × fraction, free − min_free and
    /// (GPUs) total − reserve.
    pub fn usable(&self, c: &Candidate) -> u64 {
        self.usable_with_rule(c).bytes
    }

    /// The usable bytes on a device and the rule that set them (the smallest limit wins; on a
    /// tie the fraction is named first, then the headroom, then the reserve).
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a float cast saturates; the fraction is 0-1"
    )]
    pub fn usable_with_rule(&self, c: &Candidate) -> Usable {
        let base = c.free_bytes.unwrap_or(c.total_bytes);
        let mut best = Usable {
            bytes: ((base as f64) * self.memory_fraction) as u64,
            base_bytes: base,
            base_is_free: c.free_bytes.is_some(),
            rule: UsableRule::MemoryFraction {
                fraction: self.memory_fraction,
            },
        };
        let headroom = base.saturating_sub(self.min_free);
        if headroom < best.bytes {
            best.bytes = headroom;
            best.rule = UsableRule::MinFree {
                min_free_bytes: self.min_free,
            };
        }
        if c.backend != BackendKind::Cpu {
            let reserve = self.reserve(c.total_bytes);
            let after_reserve = c.total_bytes.saturating_sub(reserve);
            if after_reserve < best.bytes {
                best.bytes = after_reserve;
                best.rule = UsableRule::Reserve {
                    reserve_bytes: reserve,
                };
            }
        }
        best
    }
}

/// Which limit of the [`Policy`] set a device's usable memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum UsableRule {
    /// `fraction` of the free (else total) memory (`--memory-fraction`).
    MemoryFraction {
        /// The fraction applied, in (0, 1].
        fraction: f64,
    },
    /// Free (else total) memory less the headroom always kept free (`--min-free`).
    MinFree {
        /// Bytes always left free.
        min_free_bytes: u64,
    },
    /// llama.cpp's fit: free (else total) memory less its margin (`--fit-target`).
    FitMargin {
        /// Bytes the fit leaves free.
        margin_bytes: u64,
    },
    /// The whole free (else total) memory: PyTorch training, whose need already holds the CUDA
    /// context (`--overhead`) and the caching allocator's slack (`--fragmentation-reserve`).
    WholeDevice,
    /// vLLM's budget: `fraction` of the device's total (`--gpu-memory-utilization`).
    GpuMemoryUtilization {
        /// The fraction applied, in (0, 1].
        fraction: f64,
    },
    /// Total memory less the driver-reserve design's driver and context reserve (GPUs only).
    Reserve {
        /// The reserve taken off the total.
        reserve_bytes: u64,
    },
}

/// A device's usable memory and where the figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Usable {
    /// Bytes a plan may use.
    pub bytes: u64,
    /// The free (or, when unknown, total) bytes the rule started from.
    pub base_bytes: u64,
    /// Whether `base_bytes` is free memory (else the total: the device reports no free figure).
    pub base_is_free: bool,
    /// The rule that set `bytes`.
    pub rule: UsableRule,
}
