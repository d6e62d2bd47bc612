//! What a pool says about itself: statistics, pressure and its callbacks, the blocks, an
//! allocation's whereabouts, and reads and writes through it.

use super::*;

impl Pool {
    /// Allocates each size and frees it again, so the cache holds segments for them.
    pub fn warmup(&self, sizes: &[u64]) -> Result<(), PoolError> {
        let mut held = Vec::with_capacity(sizes.len());
        let result = sizes
            .iter()
            .try_for_each(|&s| self.allocate(s).map(|a| held.push(a)));
        for a in held {
            self.free(a)?;
        }
        result
    }

    /// Bytes reserved from the device now: `stats().reserved_bytes` without building the whole
    /// snapshot (cheap enough to read after every request).
    pub fn reserved_bytes(&self) -> u64 {
        self.lock().counters.reserved
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> MemoryStats {
        let state = self.lock();
        let c = &state.counters;
        MemoryStats {
            total_allocated_bytes: c.total_allocated,
            in_use_bytes: c.allocated,
            pooled_bytes: c.reserved - c.allocated,
            peak_bytes: c.peak_allocated,
            pool_hits: c.hits,
            pool_misses: c.misses,
            cpu_fallbacks: c.cpu_fallbacks,
            active_buffers: c.active,
            allocated_bytes: c.allocated,
            peak_allocated_bytes: c.peak_allocated,
            reserved_bytes: c.reserved,
            peak_reserved_bytes: c.peak_reserved,
            requested_bytes: c.requested,
            peak_requested_bytes: c.peak_requested,
            inactive_split_bytes: c.reserved - c.allocated - state.idle_bytes,
            peak_inactive_split_bytes: c.peak_inactive_split,
            device_allocs: c.device_allocs,
            device_frees: c.device_frees,
            retries: c.retries,
            ooms: c.ooms,
            largest_free_block: state
                .caches
                .iter()
                .map(|(_, s)| s.largest(state.blocks.as_slice()))
                .max()
                .unwrap_or(0),
            segments: state.live_segments,
        }
    }

    pub(crate) fn count_cpu_fallback(&self) {
        self.lock().counters.cpu_fallbacks += 1;
    }

    /// Current pressure: allocated bytes against the usable limit.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the stored level is one of MemoryPressure's four values"
    )]
    pub fn pressure(&self) -> MemoryPressure {
        MemoryPressure::from_u8(self.pressure_level.load(Ordering::Relaxed) as u8)
    }

    /// Calls `callback(old, new)` once every time the pressure level changes.
    pub fn on_pressure_change(
        &self,
        callback: impl Fn(MemoryPressure, MemoryPressure) + Send + Sync + 'static,
    ) {
        crate::device::lock(&self.callbacks).push(Arc::new(callback));
    }

    /// The new pressure level, once allocated bytes have left the current band's span (the
    /// callers check, so the common case costs one comparison).
    #[inline(always)]
    pub(super) fn update_pressure(
        &self,
        state: &mut State,
    ) -> Option<(MemoryPressure, MemoryPressure)> {
        let allocated = state.counters.allocated;
        let level = self.bands.level(allocated);
        state.pressure_span = self.bands.span(level);
        if level == state.pressure {
            return None;
        }
        let old = std::mem::replace(&mut state.pressure, level);
        self.pressure_level
            .store(u64::from(level.to_u8()), Ordering::Relaxed);
        Some((old, level))
    }

    pub(super) fn fire(&self, old: MemoryPressure, new: MemoryPressure) {
        let callbacks: Vec<PressureCallback> = crate::device::lock(&self.callbacks).clone();
        for cb in callbacks {
            cb(old, new);
        }
    }

    /// Every block of every segment, in segment and address order (diagnostics and tests).
    pub fn blocks(&self) -> Vec<BlockInfo> {
        let state = self.lock();
        let mut out = Vec::new();
        for seg in state.segments.iter().flatten() {
            let mut idx = seg.head;
            while idx != NIL {
                let b = &state.blocks[idx as usize];
                out.push(BlockInfo {
                    segment: seg.handle,
                    segment_size: seg.size,
                    offset: b.offset,
                    size: b.size,
                    allocated: b.allocated,
                    stream: b.stream,
                });
                idx = b.next;
            }
        }
        out.sort_by_key(|b| (b.segment, b.offset));
        out
    }

    /// Where a live allocation is and what it holds; [`PoolError::NotLive`] for a stale handle
    /// (freed, or from another pool).
    pub fn info(&self, alloc: &Allocation) -> Result<AllocationInfo, PoolError> {
        let mut state = self.lock();
        state.live_block(*alloc)?;
        if state.blocks[alloc.block as usize].id == BufferId::UNASSIGNED.0 {
            let id = state.fresh_id();
            state.blocks[alloc.block as usize].id = id.0;
        }
        let b = &state.blocks[alloc.block as usize];
        let seg = state.segments[b.segment as usize].as_ref();
        Ok(AllocationInfo {
            id: BufferId(b.id),
            segment: seg.map_or(SegmentHandle(0), |s| s.handle),
            offset: b.offset,
            size: b.size,
            requested: b.requested,
            stream: b.stream,
            address: seg.and_then(|s| s.address).map(|a| a + b.offset),
        })
    }

    /// Writes bytes into a live allocation through the device.
    pub fn write(&self, alloc: &Allocation, offset: u64, data: &[u8]) -> Result<(), PoolError> {
        self.write_at(&self.info(alloc)?, offset, data)
    }

    /// Reads bytes from a live allocation through the device.
    pub fn read(&self, alloc: &Allocation, offset: u64, out: &mut [u8]) -> Result<(), PoolError> {
        self.read_at(&self.info(alloc)?, offset, out)
    }

    /// [`Pool::write`] where the allocation was looked up already (a transfer's chunks).
    pub(crate) fn write_at(
        &self,
        at: &AllocationInfo,
        offset: u64,
        data: &[u8],
    ) -> Result<(), PoolError> {
        crate::device::check_bounds(offset, data.len(), at.size)?;
        Ok(self.device.write(at.segment, at.offset + offset, data)?)
    }

    /// [`Pool::read`] where the allocation was looked up already.
    pub(crate) fn read_at(
        &self,
        at: &AllocationInfo,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), PoolError> {
        crate::device::check_bounds(offset, out.len(), at.size)?;
        Ok(self.device.read(at.segment, at.offset + offset, out)?)
    }
}
