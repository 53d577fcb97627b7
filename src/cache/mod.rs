//! The bookkeeping of a row cache, without the GPU: which row lives in which slot, what a batch
//! of ids must load, and the hit, miss and eviction counts.
//!
//! [`crate::GpuCache`] keeps `capacity` rows of a host table in a GPU buffer of slots and uses a
//! [`SlotMap`] to turn each batch of ids into slot ids plus the rows to upload first. The map is
//! plain Rust so policies can be simulated on id streams far faster than the GPU could serve them
//! (the benchmark's hit rates), and tested without a device.
//!
//! A batch with more distinct rows than the cache has slots cannot be served at once: the map
//! splits it into [`Part`]s, each with at most `capacity` distinct rows, which the cache runs one
//! after the other (rows of a finished part may be evicted by the next). A row is never evicted
//! while the part that reads it is being assembled.

mod admission;
mod host;
mod kind;
mod policy;
mod trace;

pub use admission::{FrequencySketch, TinyLfu};
pub use host::HostCache;
pub use kind::PolicyKind;
pub use policy::{Adaptive, Lfu, Lru, Policy};
// Memory accounting that live tables share with the policies.
pub(crate) use policy::{resize_exact, vec_bytes};
pub use trace::parse_trace;

use rustc_hash::FxHashMap;
use std::ops::Range;

pub use crate::source::{gather_rows, RowSource};

use crate::Error;

/// The slot id a looked-up id gets when the bounds policy reads it as a zero row: one past the
/// last slot, which the gather kernel's `Zero` policy turns into zeros.
pub const ZERO_SLOT: u32 = u32::MAX;

const EMPTY: u32 = u32::MAX;

/// Counters of a cache since it was created (or [`SlotMap::reset_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Ids looked up (zero rows of the bounds policy excluded).
    pub lookups: u64,
    /// Ids whose row was in the cache, including repeats within a batch.
    pub hits: u64,
    /// Ids whose row had to be loaded.
    pub misses: u64,
    /// Rows evicted to make room.
    pub evictions: u64,
    /// Rows a prefetch staged for the next lookup (on the GPU uploaded beside the cache; in a
    /// [`HostCache`] read and kept beside it, rows a lookup took from the read meanwhile not
    /// counted).
    pub prefetched: u64,
    /// Misses served from rows a prefetch had staged: nothing read from the source (or, on the
    /// GPU, uploaded from the host) while the lookup waited.
    pub served_from_staging: u64,
    /// Batches looked up, and the parts they were split into (`parts > batches` when a batch had
    /// more distinct rows than the cache has slots).
    pub batches: u64,
    /// Parts the batches ran as (a batch with more distinct rows than slots runs in several).
    pub parts: u64,
    /// Packed bytes sent from the host to the GPU: misses not staged, and prefetches. (For a
    /// [`HostCache`]: packed bytes loaded into the cache.)
    pub bytes_uploaded: u64,
    /// Ids looked up in a [`HostCache`] whose row was neither in the cache nor read by their own
    /// lookup: taken from a read another lookup (or a prefetch) had under way (nothing read
    /// twice). Counted per id, repeats included; most are counted as hits too (the row had its
    /// slot already), and they are hits on a row still on its way. Always 0 on the GPU.
    pub shared_reads: u64,
}

impl CacheStats {
    /// Hits per lookup (0 when nothing was looked up).
    pub fn hit_rate(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.hits as f64 / self.lookups as f64
        }
    }
}

/// What a row cache is made from — on the GPU ([`crate::GpuCache`]) or on the CPU path
/// ([`HostCache`]): its host table (cloned into each cache made from it, so cheap to clone: an
/// `Arc`, or a mapped [`crate::PackedTable`]), capacity and policy.
#[derive(Clone, Debug)]
pub struct CacheSpec<S> {
    /// The host table.
    pub source: S,
    /// Rows the cache holds at most.
    pub capacity: usize,
    /// The replacement policy.
    pub policy: PolicyKind,
}

/// A run of a batch served by one set of slots: ids `ids` of the batch, after loading each
/// `(row, slot)` of `loads`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Part {
    /// The positions in the batch that this part looks up.
    pub ids: Range<usize>,
    /// The rows this part loads, as (row, slot).
    pub loads: Vec<(u32, u32)>,
}

/// Row → slot: a dense array for tables of up to [`DENSE_ROWS`] rows (one memory access per
/// lookup), a hash map beyond (memory in proportion to the cache, not the table).
enum SlotIndex {
    Dense { slot: Vec<u32>, len: usize },
    Hash(FxHashMap<u32, u32>),
}

/// Tables up to this many rows get a dense row → slot array (4 bytes per row of the table).
pub const DENSE_ROWS: usize = 1 << 22;

impl SlotIndex {
    #[inline]
    fn get(&self, row: u32) -> Option<u32> {
        match self {
            SlotIndex::Dense { slot, .. } => slot.get(row as usize).copied().filter(|&s| s != EMPTY),
            SlotIndex::Hash(map) => map.get(&row).copied(),
        }
    }
    #[inline]
    fn insert(&mut self, row: u32, s: u32) {
        match self {
            SlotIndex::Dense { slot, len } => {
                if row as usize >= slot.len() {
                    // A row past the table `for_rows` named: grow rather than fail.
                    slot.resize(row as usize + 1, EMPTY);
                }
                if slot[row as usize] == EMPTY {
                    *len += 1;
                }
                slot[row as usize] = s;
            }
            SlotIndex::Hash(map) => {
                map.insert(row, s);
            }
        }
    }
    #[inline]
    fn remove(&mut self, row: u32) {
        match self {
            SlotIndex::Dense { slot, len } => {
                if let Some(entry) = slot.get_mut(row as usize).filter(|e| **e != EMPTY) {
                    *len -= 1;
                    *entry = EMPTY;
                }
            }
            SlotIndex::Hash(map) => {
                map.remove(&row);
            }
        }
    }
    /// Asks the CPU to fetch `row`'s entry ahead of its lookup: a large table's dense index is
    /// read at random, and the miss, not the work, is what a lookup costs.
    #[inline]
    fn prefetch(&self, row: u32) {
        if let SlotIndex::Dense { slot, .. } = self {
            if let Some(entry) = slot.get(row as usize) {
                crate::cpu::prefetch(std::slice::from_ref(entry));
            }
        }
    }
    fn len(&self) -> usize {
        match self {
            SlotIndex::Dense { len, .. } => *len,
            SlotIndex::Hash(map) => map.len(),
        }
    }
}

/// Which row of a table lives in which of `capacity` slots, under a replacement [`Policy`].
pub struct SlotMap {
    capacity: usize,
    row_bytes: u64,
    slot_of: SlotIndex,
    row_of: Vec<u32>,
    /// Never-used or invalidated slots, lowest last (so a fresh cache fills 0, 1, 2, …).
    free: Vec<u32>,
    /// `pin[slot] == generation` while the part being assembled reads the slot.
    pin: Vec<u32>,
    generation: u32,
    pinned: usize,
    policy: Box<dyn Policy>,
    stats: CacheStats,
}

impl SlotMap {
    /// A map of `capacity` slots for rows of `row_bytes` packed bytes (for the upload count).
    /// A cache needs at least one slot: `capacity == 0` is [`Error::LimitExceeded`].
    pub fn new(capacity: usize, row_bytes: u64, mut policy: Box<dyn Policy>) -> Result<SlotMap, Error> {
        if capacity == 0 {
            return Err(Error::LimitExceeded { what: "a row cache needs at least one slot; slots that fit the budget", requested: 1, max: 0 });
        }
        if capacity >= EMPTY as usize {
            return Err(Error::LimitExceeded { what: "slots of a row cache", requested: capacity as u64, max: EMPTY as u64 - 1 });
        }
        policy.reset(capacity);
        Ok(SlotMap {
            capacity,
            row_bytes,
            slot_of: SlotIndex::Hash(FxHashMap::default()),
            row_of: vec![EMPTY; capacity],
            free: (0..capacity as u32).rev().collect(),
            pin: vec![0; capacity],
            generation: 1,
            pinned: 0,
            policy,
            stats: CacheStats::default(),
        })
    }

    /// Indexes rows with a dense array when the table has at most [`DENSE_ROWS`] rows (faster
    /// lookups; 4 bytes per row of the table); call before the first lookup. A row past `rows`
    /// still works (the index grows to hold it).
    pub fn for_rows(mut self, rows: usize) -> SlotMap {
        if rows <= DENSE_ROWS && self.slot_of.len() == 0 {
            self.slot_of = SlotIndex::Dense { slot: vec![EMPTY; rows], len: 0 };
        }
        self
    }

    /// Slots the map manages now.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Rows cached now.
    pub fn len(&self) -> usize {
        self.slot_of.len()
    }
    /// Whether no row is cached.
    pub fn is_empty(&self) -> bool {
        self.slot_of.len() == 0
    }
    /// The replacement policy's name ("lru").
    pub fn policy_name(&self) -> &str {
        self.policy.name()
    }
    /// Hits, misses, evictions and bytes uploaded since the map was made or reset.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }
    /// Zeroes the counters.
    pub fn reset_stats(&mut self) {
        self.stats = CacheStats::default();
    }
    /// The slot holding `row`, if it is cached.
    pub fn slot(&self, row: u32) -> Option<u32> {
        self.slot_of.get(row)
    }

    fn next_part(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.pin.fill(0);
            self.generation = 1;
        }
        self.pinned = 0;
        self.policy.begin_part();
    }

    fn pin(&mut self, slot: u32) {
        if self.pin[slot as usize] != self.generation {
            self.pin[slot as usize] = self.generation;
            self.pinned += 1;
        }
    }

    /// Puts `row` in a slot (evicting by policy when full) and pins it; the caller has checked
    /// that an unpinned slot exists.
    fn load(&mut self, row: u32) -> u32 {
        let free = self.free.pop();
        let (pin, generation) = (&self.pin, self.generation);
        let slot = self.policy.admit(row, free, &|s| pin[s as usize] == generation);
        debug_assert!(free.is_none_or(|f| f == slot), "a policy must use the free slot it is given");
        let old = self.row_of[slot as usize];
        if old != EMPTY {
            debug_assert!(free.is_none(), "a policy evicted while a slot was free");
            self.slot_of.remove(old);
            self.stats.evictions += 1;
        }
        self.row_of[slot as usize] = row;
        self.slot_of.insert(row, slot);
        self.stats.bytes_uploaded += self.row_bytes;
        self.pin(slot);
        slot
    }

    /// Maps a batch of rows (`None`: a zero row of the bounds policy) to slots, written to
    /// `slots`, and returns the parts to run in order, each with the rows to load first.
    pub fn lookup(&mut self, rows: &[Option<u32>], slots: &mut Vec<u32>) -> Vec<Part> {
        slots.clear();
        slots.reserve(rows.len());
        self.next_part();
        let mut parts = vec![Part::default()];
        const AHEAD: usize = 16;
        for r in rows.iter().take(AHEAD).flatten() {
            self.slot_of.prefetch(*r);
        }
        for (i, row) in rows.iter().enumerate() {
            if let Some(Some(ahead)) = rows.get(i + AHEAD) {
                self.slot_of.prefetch(*ahead);
            }
            let Some(row) = *row else {
                slots.push(ZERO_SLOT);
                continue;
            };
            self.stats.lookups += 1;
            let slot = match self.slot_of.get(row) {
                Some(slot) => {
                    self.stats.hits += 1;
                    self.policy.hit(slot);
                    self.pin(slot);
                    slot
                }
                None => {
                    self.stats.misses += 1;
                    if self.pinned == self.capacity {
                        // Every slot is read by this part: close it and start the next.
                        parts.last_mut().expect("at least one part").ids.end = i;
                        parts.push(Part { ids: i..i, loads: Vec::new() });
                        self.next_part();
                    }
                    let slot = self.load(row);
                    parts.last_mut().expect("at least one part").loads.push((row, slot));
                    slot
                }
            };
            slots.push(slot);
        }
        parts.last_mut().expect("at least one part").ids.end = rows.len();
        self.stats.batches += 1;
        self.stats.parts += parts.len() as u64;
        parts
    }

    /// Counts `rows` rows a prefetch staged (uploaded ahead of the lookup that needs them).
    pub fn note_staged(&mut self, rows: usize) {
        self.stats.prefetched += rows as u64;
        self.stats.bytes_uploaded += rows as u64 * self.row_bytes;
    }

    /// Counts `rows` loads of the last lookup that were copied from the staging, not uploaded.
    pub fn note_served_from_staging(&mut self, rows: usize) {
        self.stats.served_from_staging += rows as u64;
        self.stats.bytes_uploaded -= (rows as u64 * self.row_bytes).min(self.stats.bytes_uploaded);
    }

    /// Empties `slots` (their rows failed to load, or changed): later lookups load them again.
    pub fn invalidate(&mut self, slots: impl IntoIterator<Item = u32>) {
        for slot in slots {
            let row = self.row_of[slot as usize];
            if row == EMPTY {
                continue;
            }
            self.row_of[slot as usize] = EMPTY;
            self.slot_of.remove(row);
            self.policy.remove(slot);
            self.free.push(slot);
        }
    }

    /// Changes the number of slots to `capacity` (≥ 1). Growing adds empty slots; shrinking
    /// empties the slots past the new end first (their rows are loaded again when looked up).
    pub fn resize(&mut self, capacity: usize) -> Result<(), Error> {
        if capacity == 0 || capacity >= EMPTY as usize {
            return Err(Error::LimitExceeded { what: "slots of a row cache (at least one)", requested: capacity as u64, max: EMPTY as u64 - 1 });
        }
        let old = self.capacity;
        if capacity < old {
            self.invalidate(capacity as u32..old as u32);
            self.free.retain(|&s| (s as usize) < capacity);
        } else {
            self.free.extend((old as u32..capacity as u32).rev());
        }
        self.row_of.resize(capacity, EMPTY);
        self.pin.resize(capacity, 0);
        self.capacity = capacity;
        self.policy.resize(capacity);
        self.next_part();
        Ok(())
    }

    /// Rows cached now, with their slots, in slot order.
    pub fn entries(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.row_of.iter().enumerate().filter(|(_, &r)| r != EMPTY).map(|(s, &r)| (r, s as u32))
    }
}

/// Hit rates of `policy` over an id stream served in batches of `batch` ids by a cache of
/// `capacity` rows, without a GPU: the statistics of everything after the first `warmup` ids, so a
/// steady-state rate is not diluted by the cold start.
pub fn simulate(policy: PolicyKind, capacity: usize, ids: &[u32], batch: usize, warmup: usize) -> Result<CacheStats, Error> {
    let rows = ids.iter().max().map_or(0, |&m| m as usize + 1);
    let mut map = SlotMap::new(capacity, 0, policy.build())?.for_rows(rows);
    let mut slots = Vec::new();
    let mut rows = Vec::new();
    let batch = batch.max(1);
    let first_counted = warmup.div_ceil(batch);
    for (i, chunk) in ids.chunks(batch).enumerate() {
        if i == first_counted {
            map.reset_stats();
        }
        rows.clear();
        rows.extend(chunk.iter().map(|&id| Some(id)));
        map.lookup(&rows, &mut slots);
    }
    Ok(map.stats())
}

/// The hit rate no cache of `capacity` rows can beat on `ids`: Belady's offline optimum, which
/// knows the future — on a miss it evicts the cached row used again farthest ahead, and does not
/// cache a row whose next use is farther still (a cache that may refuse a row, as admission
/// does). Counted after the first `warmup` ids, like [`simulate`]; batches are ignored, so the
/// bound is a little above what a batched cache could reach even in principle.
pub fn belady(ids: &[u32], capacity: usize, warmup: usize) -> CacheStats {
    use std::collections::BinaryHeap;
    const NEVER: usize = usize::MAX;
    // next[i]: the position of the next lookup of ids[i], or NEVER.
    let mut next = vec![NEVER; ids.len()];
    let mut seen: FxHashMap<u32, usize> = FxHashMap::default();
    for (i, &id) in ids.iter().enumerate().rev() {
        next[i] = seen.insert(id, i).unwrap_or(NEVER);
    }
    drop(seen);
    // Cached rows with their next use; the heap may hold stale (next use, row) entries.
    let mut cached: FxHashMap<u32, usize> = FxHashMap::default();
    let mut heap: BinaryHeap<(usize, u32)> = BinaryHeap::new();
    let mut stats = CacheStats::default();
    for (i, &id) in ids.iter().enumerate() {
        let counted = i >= warmup;
        if counted {
            stats.lookups += 1;
        }
        if let Some(n) = cached.get_mut(&id) {
            *n = next[i];
            heap.push((next[i], id));
            if counted {
                stats.hits += 1;
            }
            continue;
        }
        if counted {
            stats.misses += 1;
        }
        if capacity == 0 || next[i] == NEVER {
            continue;
        }
        if cached.len() >= capacity {
            // The cached row used farthest ahead (skipping stale entries).
            let far = loop {
                let (n, row) = heap.pop().expect("a full cache has entries");
                if cached.get(&row) == Some(&n) {
                    break (n, row);
                }
            };
            if far.0 < next[i] {
                // Every cached row comes back sooner than this one: keep them.
                heap.push(far);
                continue;
            }
            cached.remove(&far.1);
            if counted {
                stats.evictions += 1;
            }
        }
        cached.insert(id, next[i]);
        heap.push((next[i], id));
        if heap.len() > 4 * capacity + 1024 {
            heap = cached.iter().map(|(&row, &n)| (n, row)).collect();
        }
    }
    stats
}
