//! `MemoryConfig`: the unified-pool design's fields, the pool's size classes, presets, a builder and `GPUMEM_*`
//! environment overrides.

use thiserror::Error;

use crate::units::parse_bytes;

/// How a pool behaves on one device.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryConfig {
    /// Fraction of the device's total memory the pool may reserve (default 0.9).
    pub gpu_memory_fraction: f64,
    /// Serve requests the device cannot hold from CPU memory (default true).
    pub cpu_fallback_enabled: bool,
    /// Bytes always left free on the device (default 512 MiB).
    pub min_free_bytes: u64,
    /// Absolute cap on what the pool reserves (default: none).
    pub max_pool_bytes: Option<u64>,
    /// Keep the driver-reserve design's driver and context reserve ([`crate::device::DriverReserve`]) back on
    /// devices that have a driver (default true): the usable limit is then also at most
    /// total − reserve.
    pub driver_reserve: bool,
    /// Keep metadata for every live buffer (default: debug builds only).
    pub track_allocations: bool,
    /// Fully free segments kept cached per segment size; beyond this they go back to the
    /// device at once. `usize::MAX` keeps them all (default 8, the unified-pool design).
    pub max_pooled_per_bucket: usize,
    /// Warm the cache with these sizes when the pool is created.
    pub pre_allocate: bool,
    /// Block sizes `pre_allocate` reserves at start-up, one segment each.
    pub pre_allocate_sizes: Vec<u64>,
    /// Request rounding granularity (default 512 B).
    pub round_bytes: u64,
    /// Requests up to this size use the small pool (default 1 MiB).
    pub small_size: u64,
    /// Segment size of the small pool (default 2 MiB).
    pub small_segment: u64,
    /// Requests below this size get a `large_segment` (default 10 MiB).
    pub medium_size: u64,
    /// Segment size for medium requests (default 20 MiB).
    pub large_segment: u64,
    /// Larger requests get their own segment rounded up to this (default 2 MiB).
    pub large_round: u64,
    /// Largest segment the large pool grows by (default 256 MiB, VMA's and gpu-allocator's
    /// block size). Above `large_segment`, a miss reserves half of what the large pool holds,
    /// between `large_segment` and this, or the request rounded up when larger; and before
    /// reserving, idle segments of the pool go back to the device, so memory the cache holds
    /// but cannot use is returned before more is taken. At `large_segment` or below: PyTorch's
    /// fixed classes (20 MiB segments below `medium_size`, an exact segment above, idle segments
    /// kept).
    pub max_segment: u64,
    /// Expandable segments, as PyTorch's `expandable_segments:True` (default false): one
    /// address range per stream and pool, memory mapped into it as demand grows, so freed
    /// blocks always merge with their neighbours and no segment is ever a dead size; the free
    /// tail is unmapped when the cache is emptied. Needs a device with virtual memory (host,
    /// sim, CUDA); elsewhere ordinary segments are used and [`crate::alloc::Pool::expandable_segments`]
    /// says so.
    pub expandable_segments: bool,
    /// Blocks larger than this are never split (default: no limit).
    pub max_split_size: u64,
    /// Growth factor of named buffers in `ensure_capacity` (default 1.5, the consolidated-manager design).
    pub growth_factor: f64,
    /// RMM-style arena: serve every size from segments of this many bytes (capped by the usable
    /// limit and the device's largest allocation), growing by another arena when full. `None`
    /// (default): PyTorch-style size classes.
    pub initial_pool_bytes: Option<u64>,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            gpu_memory_fraction: 0.9,
            cpu_fallback_enabled: true,
            min_free_bytes: 512 << 20,
            max_pool_bytes: None,
            driver_reserve: true,
            track_allocations: cfg!(debug_assertions),
            max_pooled_per_bucket: 8,
            pre_allocate: false,
            pre_allocate_sizes: Vec::new(),
            round_bytes: 512,
            small_size: 1 << 20,
            small_segment: 2 << 20,
            medium_size: 10 << 20,
            large_segment: 20 << 20,
            large_round: 2 << 20,
            max_segment: 256 << 20,
            expandable_segments: false,
            max_split_size: u64::MAX,
            growth_factor: 1.5,
            initial_pool_bytes: None,
        }
    }
}

/// A bad configuration value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// An environment override did not parse.
    #[error("{name}={value}: {why}")]
    Env {
        /// The environment variable, e.g. `GPUMEM_MEMORY_FRACTION`.
        name: &'static str,
        /// Its value as set.
        value: String,
        /// Why it was rejected.
        why: String,
    },
    /// A value is out of range.
    #[error("{0}")]
    Invalid(String),
}

/// Named starting points for a pool's configuration (`bench-alloc --preset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// RMM-style: one arena reserved up front ([`MemoryConfig::with_initial_pool_bytes`]) and
    /// carved for every size, grown when full; otherwise [`MemoryConfig::for_inference`].
    Arena,
    /// [`MemoryConfig::default`]: keeps at most 8 idle segments of each size.
    Default,
    /// [`MemoryConfig::for_inference`]: keeps every idle segment.
    Inference,
    /// [`MemoryConfig::for_training`]: conservative limit, keeps every idle segment.
    Training,
    /// [`MemoryConfig::for_constrained`]: few idle segments, big blocks never split.
    Constrained,
    /// [`MemoryConfig::for_pytorch`]: PyTorch's fixed size classes, every idle segment kept.
    Pytorch,
    /// [`MemoryConfig::for_inference`] with expandable segments (PyTorch's
    /// `expandable_segments:True`).
    Expandable,
}

impl Preset {
    /// The preset's name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Arena => "arena",
            Preset::Default => "default",
            Preset::Inference => "inference",
            Preset::Training => "training",
            Preset::Constrained => "constrained",
            Preset::Pytorch => "pytorch",
            Preset::Expandable => "expandable",
        }
    }
}

impl MemoryConfig {
    /// The configuration a preset stands for; `arena_bytes` sizes the [`Preset::Arena`] arena
    /// and is ignored by the others.
    pub fn from_preset(preset: Preset, arena_bytes: u64) -> Self {
        match preset {
            Preset::Arena => Self::for_inference().with_initial_pool_bytes(arena_bytes),
            Preset::Default => Self::default(),
            Preset::Inference => Self::for_inference(),
            Preset::Training => Self::for_training(),
            Preset::Constrained => Self::for_constrained(),
            Preset::Pytorch => Self::for_pytorch(),
            Preset::Expandable => Self::for_inference().with_expandable_segments(true),
        }
    }

    /// The defaults (same as `Default`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Inference: use as much memory as is safe, keep every cached segment, no tracking.
    pub fn for_inference() -> Self {
        MemoryConfig {
            gpu_memory_fraction: 0.95,
            min_free_bytes: 256 << 20,
            track_allocations: false,
            max_pooled_per_bucket: usize::MAX,
            ..Self::default()
        }
    }

    /// Training: more conservative, every cached segment kept (steps repeat), tracking in debug.
    pub fn for_training() -> Self {
        MemoryConfig {
            gpu_memory_fraction: 0.85,
            min_free_bytes: 1 << 30,
            track_allocations: cfg!(debug_assertions),
            max_pooled_per_bucket: usize::MAX,
            ..Self::default()
        }
    }

    /// Memory-constrained systems: small footprint, few cached segments, no splitting of big
    /// blocks (so one large free block cannot be eaten by small requests).
    pub fn for_constrained() -> Self {
        MemoryConfig {
            gpu_memory_fraction: 0.8,
            min_free_bytes: 256 << 20,
            max_pooled_per_bucket: 2,
            max_split_size: 64 << 20,
            ..Self::default()
        }
    }

    /// PyTorch's caching allocator as configured by default: 2 MiB small segments, 20 MiB
    /// segments below 10 MiB, an exact segment above, every idle segment kept until memory runs
    /// out; otherwise [`MemoryConfig::for_inference`]. For side-by-side comparisons with
    /// PyTorch's own figures.
    pub fn for_pytorch() -> Self {
        Self::for_inference().with_max_segment(0)
    }

    /// Sets `gpu_memory_fraction`: the share of device memory the pool may reserve.
    pub fn with_gpu_memory_fraction(mut self, fraction: f64) -> Self {
        self.gpu_memory_fraction = fraction;
        self
    }

    /// Sets `cpu_fallback_enabled`: serve requests from RAM when the device is full.
    pub fn with_cpu_fallback(mut self, enabled: bool) -> Self {
        self.cpu_fallback_enabled = enabled;
        self
    }

    /// Sets `min_free_bytes`: device memory the pool never takes.
    pub fn with_min_free_bytes(mut self, bytes: u64) -> Self {
        self.min_free_bytes = bytes;
        self
    }

    /// Sets `max_pool_bytes`: idle cached bytes kept before segments are released.
    pub fn with_max_pool_bytes(mut self, bytes: u64) -> Self {
        self.max_pool_bytes = Some(bytes);
        self
    }

    /// Sets `track_allocations`: keep metadata for the leak report.
    pub fn with_tracking(mut self, enabled: bool) -> Self {
        self.track_allocations = enabled;
        self
    }

    /// Sets `max_pooled_per_bucket`: idle segments kept per size class.
    pub fn with_max_pooled_per_bucket(mut self, count: usize) -> Self {
        self.max_pooled_per_bucket = count;
        self
    }

    /// Sets `expandable_segments`: one growing address range per stream and pool.
    pub fn with_expandable_segments(mut self, on: bool) -> Self {
        self.expandable_segments = on;
        self
    }

    /// Sets `driver_reserve`: whether the driver-reserve design's driver and context reserve is kept back.
    pub fn with_driver_reserve(mut self, keep: bool) -> Self {
        self.driver_reserve = keep;
        self
    }

    /// Sets `max_segment`: the large pool's growth cap (at `large_segment` or below, PyTorch's
    /// fixed size classes).
    pub fn with_max_segment(mut self, bytes: u64) -> Self {
        self.max_segment = bytes;
        self
    }

    /// Sets `max_split_size`: blocks above it are never split for smaller requests.
    pub fn with_max_split_size(mut self, bytes: u64) -> Self {
        self.max_split_size = bytes;
        self
    }

    /// Enables warm-up with these sizes.
    pub fn with_pre_allocate(mut self, sizes: Vec<u64>) -> Self {
        self.pre_allocate = !sizes.is_empty();
        self.pre_allocate_sizes = sizes;
        self
    }

    /// RMM's pool semantics: one arena of `bytes` carved for every request, grown by further
    /// arenas when full.
    pub fn with_initial_pool_bytes(mut self, bytes: u64) -> Self {
        self.initial_pool_bytes = Some(bytes);
        self
    }

    /// Sets the growth factor of named buffers.
    pub fn with_growth_factor(mut self, factor: f64) -> Self {
        self.growth_factor = factor;
        self
    }

    /// Applies `GPUMEM_MEMORY_FRACTION`, `GPUMEM_MIN_FREE`, `GPUMEM_MAX_POOL`,
    /// `GPUMEM_CPU_FALLBACK`, `GPUMEM_TRACK_ALLOCATIONS`, `GPUMEM_MAX_POOLED_PER_BUCKET`,
    /// `GPUMEM_MAX_SPLIT_SIZE`, `GPUMEM_MAX_SEGMENT`, `GPUMEM_DRIVER_RESERVE` and
    /// `GPUMEM_EXPANDABLE_SEGMENTS` from the environment.
    pub fn with_env_overrides(self) -> Result<Self, ConfigError> {
        self.with_overrides(|name| std::env::var(name).ok())
    }

    /// Applies overrides from any lookup (the environment in production, a map in tests).
    pub fn with_overrides(
        mut self,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        fn err(name: &'static str, value: &str, why: impl ToString) -> ConfigError {
            ConfigError::Env {
                name,
                value: value.to_string(),
                why: why.to_string(),
            }
        }
        fn boolean(name: &'static str, v: &str) -> Result<bool, ConfigError> {
            match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err(err(name, v, "expected true or false")),
            }
        }
        if let Some(v) = get("GPUMEM_MEMORY_FRACTION") {
            let name = "GPUMEM_MEMORY_FRACTION";
            self.gpu_memory_fraction = v
                .trim()
                .parse()
                .map_err(|_| err(name, &v, "not a number"))?;
        }
        if let Some(v) = get("GPUMEM_MIN_FREE") {
            self.min_free_bytes = parse_bytes(&v).map_err(|e| err("GPUMEM_MIN_FREE", &v, e))?;
        }
        if let Some(v) = get("GPUMEM_MAX_POOL") {
            self.max_pool_bytes = Some(parse_bytes(&v).map_err(|e| err("GPUMEM_MAX_POOL", &v, e))?);
        }
        if let Some(v) = get("GPUMEM_CPU_FALLBACK") {
            self.cpu_fallback_enabled = boolean("GPUMEM_CPU_FALLBACK", &v)?;
        }
        if let Some(v) = get("GPUMEM_TRACK_ALLOCATIONS") {
            self.track_allocations = boolean("GPUMEM_TRACK_ALLOCATIONS", &v)?;
        }
        if let Some(v) = get("GPUMEM_MAX_POOLED_PER_BUCKET") {
            let name = "GPUMEM_MAX_POOLED_PER_BUCKET";
            self.max_pooled_per_bucket = v
                .trim()
                .parse()
                .map_err(|_| err(name, &v, "not a whole number"))?;
        }
        if let Some(v) = get("GPUMEM_MAX_SPLIT_SIZE") {
            self.max_split_size =
                parse_bytes(&v).map_err(|e| err("GPUMEM_MAX_SPLIT_SIZE", &v, e))?;
        }
        if let Some(v) = get("GPUMEM_DRIVER_RESERVE") {
            self.driver_reserve = boolean("GPUMEM_DRIVER_RESERVE", &v)?;
        }
        if let Some(v) = get("GPUMEM_EXPANDABLE_SEGMENTS") {
            self.expandable_segments = boolean("GPUMEM_EXPANDABLE_SEGMENTS", &v)?;
        }
        if let Some(v) = get("GPUMEM_MAX_SEGMENT") {
            self.max_segment = parse_bytes(&v).map_err(|e| err("GPUMEM_MAX_SEGMENT", &v, e))?;
        }
        self.validate()?;
        Ok(self)
    }

    /// Checks that the values make sense together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |why: String| Err(ConfigError::Invalid(why));
        if !(self.gpu_memory_fraction > 0.0 && self.gpu_memory_fraction <= 1.0) {
            return bad(format!(
                "gpu_memory_fraction {} is outside (0, 1]",
                self.gpu_memory_fraction
            ));
        }
        if !self.round_bytes.is_power_of_two() {
            return bad(format!(
                "round_bytes {} is not a power of two",
                self.round_bytes
            ));
        }
        if self.small_size > self.small_segment || self.medium_size > self.large_segment {
            return bad("a size class is larger than its segment".into());
        }
        if !(self.growth_factor >= 1.0 && self.growth_factor.is_finite()) {
            return bad(format!("growth_factor {} is below 1", self.growth_factor));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn presets_differ_where_they_should() {
        assert!(
            MemoryConfig::for_inference().gpu_memory_fraction
                > MemoryConfig::default().gpu_memory_fraction
        );
        assert!(!MemoryConfig::for_inference().track_allocations);
        assert!(MemoryConfig::for_constrained().max_split_size < u64::MAX);
        for c in [
            MemoryConfig::for_inference(),
            MemoryConfig::for_training(),
            MemoryConfig::for_constrained(),
        ] {
            c.validate().unwrap();
        }
    }

    #[test]
    fn builder_sets_fields() {
        let c = MemoryConfig::new()
            .with_gpu_memory_fraction(0.8)
            .with_cpu_fallback(false)
            .with_min_free_bytes(1 << 30)
            .with_tracking(true)
            .with_max_pool_bytes(4 << 30);
        assert_eq!(c.gpu_memory_fraction, 0.8);
        assert!(!c.cpu_fallback_enabled);
        assert_eq!(c.min_free_bytes, 1 << 30);
        assert!(c.track_allocations);
        assert_eq!(c.max_pool_bytes, Some(4 << 30));
    }

    #[test]
    fn overrides_apply_and_reject_garbage() {
        let env: HashMap<&str, &str> = [
            ("GPUMEM_MEMORY_FRACTION", "0.5"),
            ("GPUMEM_MIN_FREE", "1GiB"),
            ("GPUMEM_CPU_FALLBACK", "off"),
            ("GPUMEM_MAX_SEGMENT", "64MiB"),
        ]
        .into();
        let c = MemoryConfig::default()
            .with_overrides(|k| env.get(k).map(|v| v.to_string()))
            .unwrap();
        assert_eq!(c.gpu_memory_fraction, 0.5);
        assert_eq!(c.min_free_bytes, 1 << 30);
        assert!(!c.cpu_fallback_enabled);
        assert_eq!(c.max_segment, 64 << 20);
        let bad = MemoryConfig::default()
            .with_overrides(|k| (k == "GPUMEM_MAX_POOL").then(|| "lots".to_string()));
        assert!(matches!(
            bad,
            Err(ConfigError::Env {
                name: "GPUMEM_MAX_POOL",
                ..
            })
        ));
        let bad = MemoryConfig::default()
            .with_overrides(|k| (k == "GPUMEM_MEMORY_FRACTION").then(|| "2".to_string()));
        assert!(matches!(bad, Err(ConfigError::Invalid(_))));
    }
}
