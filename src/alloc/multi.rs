//! One pool per device, with placement by tag affinity and free memory (the driver-reserve design).

use std::collections::HashMap;
use std::sync::Mutex;

use super::buffer::Buffer;
use super::error::PoolError;
use super::pool::Pool;

/// Pools over several devices.
#[derive(Debug)]
pub struct MultiDevicePool {
    pools: Vec<Pool>,
    affinity: Mutex<HashMap<String, usize>>,
}

impl MultiDevicePool {
    /// Manages these pools; device index = position.
    pub fn new(pools: Vec<Pool>) -> Self {
        MultiDevicePool {
            pools,
            affinity: Mutex::new(HashMap::new()),
        }
    }

    /// One pool per device, in the order they were given.
    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// Room left under a pool's limit.
    fn headroom(pool: &Pool) -> u64 {
        pool.usable_limit()
            .saturating_sub(pool.stats().allocated_bytes)
    }

    /// Allocates on the device this tag used before; otherwise (or when that device is full) on
    /// the device with the most headroom, and remembers the choice for the tag.
    pub fn allocate_on_best_device(
        &self,
        size: u64,
        tag: &str,
    ) -> Result<(usize, Buffer<'_>), PoolError> {
        let preferred = crate::device::lock(&self.affinity).get(tag).copied();
        if let Some(device) = preferred {
            if let Some(pool) = self.pools.get(device) {
                if let Ok(a) = pool.allocate_tagged(size, super::DEFAULT_STREAM, Some(tag)) {
                    return Ok((device, pool.wrap_allocation(a, size)));
                }
            }
        }
        let mut order: Vec<usize> = (0..self.pools.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(Self::headroom(&self.pools[i])));
        let mut last = None;
        for device in order {
            match self.pools[device].allocate_tagged(size, super::DEFAULT_STREAM, Some(tag)) {
                Ok(a) => {
                    crate::device::lock(&self.affinity).insert(tag.to_string(), device);
                    return Ok((device, self.pools[device].wrap_allocation(a, size)));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(PoolError::ZeroSize))
    }
}
