//! Tables that change while they serve: rows addressed by 64-bit keys that arrive at run time
//! ([`LiveTable::find_or_insert`]), row updates applied while lookups run ([`LiveTable::update`],
//! or replayed from an [`UpdateLog`]), and snapshot swaps ([`LiveTable::swap`]).
//!
//! A [`LiveTable`] is a [`PackedTable`] of slots behind a reader-writer lock, with a map from key
//! to slot, a replacement [`Policy`] (the row cache's: LRU, LFU, ARC, with or without TinyLFU
//! admission) that picks the key to evict once the table is at its limit, and a count of
//! lookups per key. Its guarantees, each from one rule:
//!
//! - **No torn row.** A lookup holds the read lock for the whole call; everything that changes
//!   rows (an update batch, an insertion, a swap) holds the write lock while it copies rows in,
//!   and does its slow part first, outside the lock: update rows are encoded, a snapshot is
//!   loaded and verified, before the lock is taken. A lookup sees each row wholly old or wholly
//!   new, and all its rows from one version of the table.
//! - **Ordered, whole updates.** Update batches apply in the order their calls take the lock,
//!   each whole or not at all: a batch with a bad row (wrong length, NaN, a value the format
//!   cannot hold) or more distinct keys than the table may hold is refused, with a typed error,
//!   before anything changes.
//! - **Safe swaps.** A swap replaces the table only with a file that opened, verified against
//!   its checksums and has the table's format and dim; lookups already running finish on the
//!   old table; [`LiveTable::version`] counts the swaps.
//!
//! Unknown keys read by a lookup follow [`Missing`]: refused, a zero row, or the row a new key
//! would start from ([`Init`]). Rows of a fallback (the [`Init::Row`], the [`Init::Hashed`]
//! rows) live in the same packed table, before the slots, so a lookup is one gather and a bag one
//! pooled decode of the CPU path, whichever rows it reads.

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashSet;

use crate::bounds::ZERO_ID;
use crate::cache::{resize_exact, vec_bytes, Policy, PolicyKind};
use crate::file::TableFile;
use crate::format::{Format, PackedTable};
use crate::{Bags, Bounds, Error, Pooling};
use index::KeyIndex;

#[cfg(all(native, feature = "gpu"))]
mod gpu;
mod index;
mod log;
mod tiered;
#[cfg(all(native, feature = "gpu"))]
use gpu::GpuCopy;
#[cfg(all(native, feature = "gpu"))]
pub use gpu::{KeyLookup, PROBE_MIN_KEYS};
pub use log::{UpdateLog, UPDATE_LOG_MAGIC};
pub use tiered::{RetierReport, TierOptions, TieredTable};

/// What a key gets as its first row when a lookup or an update brings it into the table.
#[derive(Clone, Debug, Default)]
pub enum Init {
    /// A zero row.
    #[default]
    Zeros,
    /// A copy of this row (`dim` values), quantised to the table's format.
    Row(Vec<f32>),
    /// A copy of row `hash_id(key, 0) % rows` of this table ([`crate::hash::hash_id`]): the
    /// hashing trick's row, so that a new id starts from what the ids sharing its bucket learnt.
    /// The table is re-quantised to the live table's format when it has another.
    Hashed(PackedTable),
}

/// What a lookup that does not insert reads for a key the table does not hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Missing {
    /// Refuse the call, before any work, with [`Error::UnknownKey`] naming the first.
    #[default]
    Error,
    /// A zero row.
    Zero,
    /// The row the key would start from if it were inserted ([`Init`]).
    Init,
}

impl Missing {
    /// Every choice.
    pub const ALL: [Missing; 3] = [Missing::Error, Missing::Zero, Missing::Init];

    /// Its name in the bindings' options (`"error"`, `"zero"`, `"init"`).
    pub fn name(self) -> &'static str {
        match self {
            Missing::Error => "error",
            Missing::Zero => "zero",
            Missing::Init => "init",
        }
    }

    /// Parses [`Missing::name`].
    pub fn from_name(name: &str) -> Option<Missing> {
        Missing::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// How a [`LiveTable`] is made.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// The format the rows are stored in.
    pub format: Format,
    /// Values per row.
    pub dim: usize,
    /// Slots allocated at first (≥ 1); the table doubles them as keys arrive, up to `max_rows`.
    pub capacity: usize,
    /// The most keys the table holds; past it, a new key evicts the one `policy` picks.
    pub max_rows: usize,
    /// The replacement policy that picks the key to evict.
    pub policy: PolicyKind,
    /// The first row of a new key, and what [`Missing::Init`] reads.
    pub init: Init,
    /// Bytes the table may hold, if limited, as [`LiveTable::bytes`] counts them: growth stops
    /// where the rows, each slot's bookkeeping and the key index at their largest would pass it
    /// (later keys evict), and a swap, which holds the old and the new table at once, is refused
    /// when the two would. What the policy remembers of evicted keys (LFU's counts) is not
    /// budgeted ([`PolicyKind::slot_bytes`]); `bytes()` shows it.
    pub memory_budget: Option<u64>,
}

/// The most keys a live table may hold (2³¹ − 1).
pub const MAX_ROWS: usize = (u32::MAX / 2) as usize;

impl LiveOptions {
    /// A table of `format` rows of `dim` values: 1 024 slots at first, at most [`MAX_ROWS`]
    /// keys, LRU eviction, zero rows for new keys, no memory budget.
    pub fn new(format: Format, dim: usize) -> LiveOptions {
        LiveOptions { format, dim, capacity: 1024, max_rows: MAX_ROWS, policy: PolicyKind::Lru, init: Init::Zeros, memory_budget: None }
    }
    /// The same with `capacity` slots at first.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }
    /// The same holding at most `max_rows` keys.
    pub fn max_rows(mut self, max_rows: usize) -> Self {
        self.max_rows = max_rows;
        self
    }
    /// The same evicting by `policy`.
    pub fn policy(mut self, policy: PolicyKind) -> Self {
        self.policy = policy;
        self
    }
    /// The same starting new keys from `init`.
    pub fn init(mut self, init: Init) -> Self {
        self.init = init;
        self
    }
    /// The same within `bytes` of memory.
    pub fn memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = Some(bytes);
        self
    }
}

/// Counters of a [`LiveTable`] since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveStats {
    /// Keys looked up (by gathers, bags and `find_or_insert`).
    pub lookups: u64,
    /// Keys looked up that the table did not hold (inserted or read by [`Missing`]).
    pub unknown: u64,
    /// Keys inserted (by `find_or_insert` and updates).
    pub inserts: u64,
    /// Keys evicted to make room.
    pub evictions: u64,
    /// Update batches applied, and the rows they wrote.
    pub update_batches: u64,
    /// Rows written by updates.
    pub rows_updated: u64,
    /// Snapshots swapped in.
    pub swaps: u64,
}

/// What an update batch did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateReport {
    /// The batch's place in the order updates applied (1 for the table's first batch).
    pub sequence: u64,
    /// Keys of the batch the table did not hold (now inserted).
    pub inserted: usize,
    /// Keys evicted to make room for them.
    pub evicted: usize,
}

/// What a swap did, and the memory it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwapReport {
    /// The table's version now ([`LiveTable::version`]).
    pub version: u64,
    /// Keys of the new table.
    pub keys: usize,
    /// Bytes the table held before the swap ([`LiveTable::bytes`]).
    pub old_bytes: u64,
    /// Bytes the new table may hold, as the budget counts them ([`LiveOptions::memory_budget`]).
    pub new_bytes: u64,
    /// Bytes held at once while the new table was built (both tables).
    pub peak_bytes: u64,
    /// The budget it was held against, if any.
    pub budget: Option<u64>,
    /// How long lookups were held up: from asking for the write lock (lookups that arrive
    /// from then on wait) to letting it go — the lookups running then, and the exchange.
    pub pause: std::time::Duration,
}

/// The key folded to the 32 bits a [`Policy`] sees of a row (for an admission filter's sketch;
/// two keys that fold alike only share a frequency estimate).
fn fold(key: u64) -> u32 {
    crate::hash::hash_id(key, 0x6c69_7665)
}

/// The rows behind the lock.
struct State {
    /// The fallback rows (`fallback` of them), then the slots.
    table: PackedTable,
    fallback: usize,
    /// The key in each slot (meaningful where `used`).
    keys: Vec<u64>,
    used: Vec<bool>,
    index: KeyIndex,
    /// Empty slots, lowest last.
    free: Vec<u32>,
    /// Lookups record their hits here under the read lock.
    usage: Mutex<Usage>,
    version: u64,
    /// The copy on a GPU, if attached: the same rows and index, written under the same write
    /// lock.
    #[cfg(all(native, feature = "gpu"))]
    gpu: Option<GpuCopy>,
    /// Whether lookups probed the GPU's index since its lookup counts were last taken.
    #[cfg(all(native, feature = "gpu"))]
    probed: std::sync::atomic::AtomicBool,
}

struct Usage {
    policy: Box<dyn Policy>,
    /// Lookups of the key in each slot since it came in.
    counts: Vec<u64>,
    /// `pin[slot] == generation` while the batch being placed uses the slot.
    pin: Vec<u32>,
    generation: u32,
}

impl Usage {
    fn new(kind: PolicyKind, capacity: usize) -> Usage {
        let mut policy = kind.build();
        policy.reset(capacity);
        Usage { policy, counts: vec![0; capacity], pin: vec![0; capacity], generation: 1 }
    }

    /// A new batch: no slot is pinned.
    fn begin(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.pin.fill(0);
            self.generation = 1;
        }
        self.policy.begin_part();
    }

    fn hit(&mut self, slot: u32) {
        self.policy.hit(slot);
        self.counts[slot as usize] += 1;
        self.pin[slot as usize] = self.generation;
    }

    /// A lookup's hits, in order: the slot of each of `rows` (table rows; the zero row and the
    /// fallback rows are no slot's) gets its policy hit and count (not its pin: pins matter only
    /// within one placement, which begins a generation of its own), what each touches
    /// prefetched [`HIT_AHEAD`] rows ahead and what that leads to (a list's neighbours) half as
    /// far. Slots of a large table are scattered over more memory than the caches hold, and one
    /// hit after another would wait for each one's misses in turn (docs/live.md has the figures).
    fn lookup_hits(&mut self, rows: &[u32], fallback: u32) {
        let slot = |r: u32| (r != ZERO_ID && r >= fallback).then(|| r - fallback);
        for (i, &r) in rows.iter().enumerate() {
            if let Some(next) = rows.get(i + HIT_AHEAD).and_then(|&r| slot(r)) {
                self.policy.prefetch(next);
                crate::cpu::prefetch(bytemuck::cast_slice(std::slice::from_ref(&self.counts[next as usize])));
            }
            if let Some(near) = rows.get(i + HIT_AHEAD / 2).and_then(|&r| slot(r)) {
                self.policy.prefetch_again(near);
            }
            if let Some(s) = slot(r) {
                self.policy.hit(s);
                self.counts[s as usize] += 1;
            }
        }
    }
}

/// Rows ahead whose slots' state [`Usage::lookup_hits`] prefetches.
const HIT_AHEAD: usize = 16;

/// Bytes of a slot's own bookkeeping: its key, whether it is used, its place in the free list,
/// its usage count and its pin.
const SLOT_BYTES: u64 = 8 + 1 + 4 + 8 + 4;

/// Bytes of the parts of a table that do not grow with it (a policy's smallest tables and maps),
/// at most.
const FIXED_BYTES: u64 = 4096;

impl State {
    fn capacity(&self) -> usize {
        self.keys.len()
    }

    /// What [`LiveTable::bytes`] counts.
    fn bytes(&self) -> u64 {
        let usage = self.usage.lock();
        let held = vec_bytes(&self.keys)
            + vec_bytes(&self.used)
            + vec_bytes(&self.free)
            + self.index.bytes()
            + vec_bytes(&usage.counts)
            + vec_bytes(&usage.pin)
            + usage.policy.bytes();
        self.table.bytes() + held as u64
    }

    /// The table row a lookup of `key` reads when the table does not hold it.
    fn missing_row(&self, key: u64, init: &Init) -> u32 {
        match init {
            Init::Zeros => ZERO_ID,
            Init::Row(_) => 0,
            Init::Hashed(_) => crate::hash::hash_id(key, 0) % self.fallback as u32,
        }
    }
}

/// A keyed embedding table that takes new keys, row updates and snapshot swaps while lookups run
/// on other threads: see the [module documentation](self) for its guarantees. Lookups run on the
/// CPU path, on all cores.
pub struct LiveTable {
    options: LiveOptions,
    /// The fallback rows, packed (`Init::Row`'s one, `Init::Hashed`'s table).
    fallback: Option<PackedTable>,
    state: RwLock<State>,
    lookups: AtomicU64,
    unknown: AtomicU64,
    inserts: AtomicU64,
    evictions: AtomicU64,
    update_batches: AtomicU64,
    rows_updated: AtomicU64,
    swaps: AtomicU64,
    /// [`KeyLookup::code`] of where GPU lookups find their keys' rows.
    #[cfg(all(native, feature = "gpu"))]
    key_lookup: std::sync::atomic::AtomicU8,
}

impl std::fmt::Debug for LiveTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveTable").field("format", &self.options.format).field("dim", &self.options.dim).field("keys", &self.len()).finish_non_exhaustive()
    }
}

impl LiveTable {
    /// An empty table.
    pub fn new(options: LiveOptions) -> Result<LiveTable, Error> {
        let (format, dim) = (options.format, options.dim);
        if dim == 0 {
            return Err(Error::ZeroDim);
        }
        if options.max_rows == 0 || options.capacity == 0 {
            return Err(Error::LimitExceeded { what: "keys of a live table (at least one slot)", requested: 1, max: 0 });
        }
        // Slots and fallback rows are u32 rows of one table, below the ids the kernels reserve.
        if options.max_rows > MAX_ROWS {
            return Err(Error::LimitExceeded { what: "keys of a live table", requested: options.max_rows as u64, max: MAX_ROWS as u64 });
        }
        let fallback = match &options.init {
            Init::Zeros => None,
            Init::Row(row) => {
                if row.len() != dim {
                    return Err(Error::ShapeMismatch { what: "values of the initial row (the table's dim)", expected: dim, actual: row.len() });
                }
                Some(PackedTable::quantize(format, row, 1, dim)?)
            }
            Init::Hashed(t) => {
                if t.dim() != dim {
                    return Err(Error::ShapeMismatch { what: "values per row of the hashed initial rows (the table's dim)", expected: dim, actual: t.dim() });
                }
                if t.rows() == 0 {
                    return Err(Error::TooFewRows { what: "hashed initial rows", rows: 0, needed: 1 });
                }
                if t.rows() > MAX_ROWS {
                    return Err(Error::LimitExceeded { what: "hashed initial rows", requested: t.rows() as u64, max: MAX_ROWS as u64 });
                }
                Some(if t.format() == format { t.clone() } else { t.requantize(format)? })
            }
        };
        let table = LiveTable {
            state: RwLock::new(Self::empty_state(&options, fallback.as_ref(), options.capacity.min(options.max_rows))?),
            options,
            fallback,
            lookups: AtomicU64::new(0),
            unknown: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            update_batches: AtomicU64::new(0),
            rows_updated: AtomicU64::new(0),
            swaps: AtomicU64::new(0),
            #[cfg(all(native, feature = "gpu"))]
            key_lookup: std::sync::atomic::AtomicU8::new(KeyLookup::Auto.code()),
        };
        table.check_budget(table.bytes_for(table.capacity()), "a live table's first slots")?;
        Ok(table)
    }

    /// A table holding the rows of `file` — keyed by its keys ([`TableFile::keys`]) or, for a
    /// plain table file, row `i` by key `i` — with room for at least all of them. The rows are
    /// verified against the file's checksums first.
    pub fn from_file(file: &TableFile, options: LiveOptions) -> Result<LiveTable, Error> {
        // Made with one slot, then given the file's state sized by the real options: the empty
        // table's slots are never allocated beside the file's.
        let capacity = options.capacity;
        let mut table = LiveTable::new(options.capacity(1))?;
        table.options.capacity = capacity;
        let state = table.state_from_file(file)?;
        *table.write() = state;
        Ok(table)
    }

    /// [`LiveTable::from_file`] of the file at `path` (memory-mapped while it is read).
    #[cfg(native)]
    pub fn open(path: impl AsRef<std::path::Path>, options: LiveOptions) -> Result<LiveTable, Error> {
        LiveTable::from_file(&TableFile::open_stored(path)?, options)
    }

    fn empty_state(options: &LiveOptions, fallback: Option<&PackedTable>, capacity: usize) -> Result<State, Error> {
        let fallback_rows = fallback.map_or(0, PackedTable::rows);
        let mut table = PackedTable::zeroed(options.format, fallback_rows + capacity, options.dim, "live table")?;
        if let Some(f) = fallback {
            table.words_mut()[..f.words().len()].copy_from_slice(f.words());
        }
        Ok(State {
            table,
            fallback: fallback_rows,
            keys: vec![0; capacity],
            used: vec![false; capacity],
            // Sized for the keys as they arrive, as a hash map would be (it doubles by rebuilds).
            index: KeyIndex::default(),
            free: (0..capacity as u32).rev().collect(),
            usage: Mutex::new(Usage::new(options.policy, capacity)),
            version: 0,
            #[cfg(all(native, feature = "gpu"))]
            gpu: None,
            #[cfg(all(native, feature = "gpu"))]
            probed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read()
    }

    /// The lock is task-fair: once a writer waits, new lookups wait behind it, so an update
    /// waits for the lookups running, not for a stream of them. (A panic under it leaves whole
    /// rows: rows are copied in, never built in place.)
    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write()
    }

    /// The format of the rows.
    pub fn format(&self) -> Format {
        self.options.format
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        self.options.dim
    }
    /// Keys the table holds.
    pub fn len(&self) -> usize {
        self.read().index.len()
    }
    /// Whether the table holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Slots allocated now.
    pub fn capacity(&self) -> usize {
        self.read().capacity()
    }
    /// The options the table was made with.
    pub fn options(&self) -> &LiveOptions {
        &self.options
    }
    /// Whether the table holds `key`.
    pub fn contains(&self, key: u64) -> bool {
        self.read().index.contains_key(key)
    }
    /// Snapshots swapped in since the table was made (0 before the first swap).
    pub fn version(&self) -> u64 {
        self.read().version
    }
    /// Bytes the table holds on the host now: its packed rows (fallback rows and every slot,
    /// used or not), each slot's bookkeeping (key, usage count, the policy's state) and the key
    /// index.
    pub fn bytes(&self) -> u64 {
        self.read().bytes()
    }
    /// The counters since the table was made.
    pub fn stats(&self) -> LiveStats {
        // Unknown keys the GPU's probe met are counted there until folded in: here only when
        // the lock is free at once, so that stats() never waits behind a writer (nor deadlocks
        // when called from a lookup's own closure); a GPU that fails here leaves them out.
        if let Some(st) = self.state.try_read() {
            let _ = self.fold_gpu_lookups(&st);
        }
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LiveStats {
            lookups: get(&self.lookups),
            unknown: get(&self.unknown),
            inserts: get(&self.inserts),
            evictions: get(&self.evictions),
            update_batches: get(&self.update_batches),
            rows_updated: get(&self.rows_updated),
            swaps: get(&self.swaps),
        }
    }

    /// Lookups of each of `keys` since it came into the table (0 for a key it does not hold).
    pub fn usage(&self, keys: &[u64]) -> Vec<u64> {
        let st = self.read();
        // A GPU that fails here leaves the counts without its latest lookups.
        let _ = self.fold_gpu_lookups(&st);
        let usage = st.usage.lock();
        keys.iter().map(|&k| st.index.get(k).map_or(0, |s| usage.counts[s as usize])).collect()
    }

    /// The keys the table holds with their lookup counts, most looked up first (ties: lower key
    /// first): what a planner reads to choose hot rows.
    pub fn hottest(&self, n: usize) -> Vec<(u64, u64)> {
        let st = self.read();
        let _ = self.fold_gpu_lookups(&st);
        let usage = st.usage.lock();
        let mut all: Vec<(u64, u64)> = st.index.iter().map(|(k, s)| (k, usage.counts[s as usize])).collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(n);
        all
    }

    /// The most bytes a table of `capacity` slots holds, as [`LiveTable::bytes`] counts them
    /// (but for what the policy remembers of evicted keys): its rows, each slot's bookkeeping
    /// and the policy's, and the key index at its largest for that many keys.
    fn bytes_for(&self, capacity: usize) -> u64 {
        let row = self.options.format.row_bytes(self.options.dim) as u64;
        let fallback = self.fallback.as_ref().map_or(0, PackedTable::rows) as u64;
        let slot = row + SLOT_BYTES + self.options.policy.slot_bytes() as u64;
        fallback * row + capacity as u64 * slot + KeyIndex::max_bytes(capacity) as u64 + FIXED_BYTES
    }

    fn check_budget(&self, bytes: u64, what: &'static str) -> Result<(), Error> {
        match self.options.memory_budget {
            Some(budget) if bytes > budget => Err(Error::LimitExceeded { what, requested: bytes, max: budget }),
            _ => Ok(()),
        }
    }

    /// The most slots the table may have: `max_rows`, and what the memory budget holds
    /// ([`LiveTable::bytes_for`] grows with the slots: the most that fit, by bisection).
    fn slot_limit(&self) -> usize {
        let max = self.options.max_rows.max(1);
        let Some(budget) = self.options.memory_budget else { return max };
        if self.bytes_for(max) <= budget {
            return max;
        }
        let (mut lo, mut hi) = (1, max);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.bytes_for(mid) <= budget {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// Table rows of `keys` (unknown ones by `missing`), recording the lookups. `Err` names the
    /// first unknown key under [`Missing::Error`].
    fn rows_of(&self, st: &State, keys: &[u64], missing: Missing, record: bool) -> Result<Vec<u32>, Error> {
        let mut rows = Vec::with_capacity(keys.len());
        let (mut unknown, mut first_unknown) = (0u64, None);
        st.index.get_each(keys, |index, slot| match slot {
            Some(slot) => {
                rows.push(st.fallback as u32 + slot);
                true
            }
            None => {
                unknown += 1;
                first_unknown = Some(index);
                rows.push(match missing {
                    Missing::Error | Missing::Zero => ZERO_ID,
                    Missing::Init => st.missing_row(keys[index], &self.options.init),
                });
                // An unknown key under Missing::Error fails the call: no need to look further.
                missing != Missing::Error
            }
        });
        if let (Missing::Error, Some(index)) = (missing, first_unknown) {
            return Err(Error::UnknownKey { index, key: keys[index] });
        }
        if record {
            let mut usage = st.usage.lock();
            usage.begin();
            usage.lookup_hits(&rows, st.fallback as u32);
            self.lookups.fetch_add(keys.len() as u64, Ordering::Relaxed);
            self.unknown.fetch_add(unknown, Ordering::Relaxed);
        }
        Ok(rows)
    }

    /// Gathers the rows of `keys` into `keys.len() × dim` f32; unknown keys follow `missing`.
    pub fn gather(&self, keys: &[u64], missing: Missing) -> Result<Vec<f32>, Error> {
        let st = self.read();
        let rows = self.rows_of(&st, keys, missing, true)?;
        Ok(crate::cpu::gather(&st.table, &rows, Bounds::Zero)?)
    }

    /// EmbeddingBag over keys: pools `bags` (indices are keys) into `bags.len() × dim` values
    /// (`indices.len() × dim` for [`Pooling::None`]); unknown keys follow `missing` (a zero row
    /// counts towards a mean and takes part in a max, as an out-of-range id under
    /// [`Bounds::Zero`] does).
    pub fn bag(&self, bags: &Bags<'_, u64>, pooling: Pooling, missing: Missing) -> Result<Vec<f32>, Error> {
        let st = self.read();
        let rows = self.rows_of(&st, bags.indices, missing, true)?;
        Ok(crate::cpu::embedding_bag(&st.table, &bags.with_indices(&rows), pooling, Bounds::Zero)?)
    }

    /// Gathers the rows of `keys`, first giving each key the table does not hold a slot and its
    /// [`Init`] row (evicting by policy once the table is at its limit); all rows are read after
    /// the insertions. Refused, changing nothing, when the call has more distinct keys than the
    /// table may hold.
    pub fn find_or_insert(&self, keys: &[u64]) -> Result<Vec<f32>, Error> {
        {
            // Every key held: a lookup under the read lock (an unknown key fails it before
            // anything is recorded, and the call goes on to insert).
            let st = self.read();
            match self.rows_of(&st, keys, Missing::Error, true) {
                Ok(rows) => return Ok(crate::cpu::gather(&st.table, &rows, Bounds::Zero)?),
                Err(Error::UnknownKey { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let mut st = self.write();
        let placed = self.place(&mut st, keys, true)?;
        // The GPU copy follows the change before anything else can fail.
        self.mirror(&mut st, &placed)?;
        let rows: Vec<u32> = placed.slots.iter().map(|&s| st.fallback as u32 + s).collect();
        Ok(crate::cpu::gather(&st.table, &rows, Bounds::Zero)?)
    }

    /// Gives every key of `keys` a slot (new ones their [`Init`] row), growing or evicting as
    /// needed, and pins them all; with `lookup`, counts the call's keys as looked up. Returns
    /// what changed. Checks everything that can fail before changing anything.
    fn place(&self, st: &mut State, keys: &[u64], lookup: bool) -> Result<Placed, Error> {
        // One look at the index a key (the slots of the keys held, kept for the passes below):
        // unknown keys counted with their repeats, new ones once.
        let mut found = Vec::with_capacity(keys.len());
        st.index.get_each(keys, |_, slot| {
            found.push(slot);
            true
        });
        let (mut unknown, mut distinct, mut new_keys) = (0, FxHashSet::default(), Vec::new());
        for (&k, slot) in keys.iter().zip(&found) {
            let held = slot.is_some();
            unknown += usize::from(!held);
            if distinct.insert(k) && !held {
                new_keys.push(k);
            }
        }
        let limit = self.slot_limit();
        if distinct.len() > limit {
            return Err(Error::LimitExceeded {
                what: "distinct keys in one call (the keys a live table may hold)",
                requested: distinct.len() as u64,
                max: limit as u64,
            });
        }
        // New keys may evict, grow the slots or rebuild the index: the GPU's lookups reach the
        // policy first (a call of keys held changes no slot, and leaves them pending). If the GPU
        // fails here, its copy is dropped and the call refused before anything changes.
        if !new_keys.is_empty() {
            let folded = self.fold_gpu_lookups(st);
            #[cfg(all(native, feature = "gpu"))]
            if folded.is_err() {
                st.gpu = None;
            }
            folded?;
        }
        let needed = st.index.len() + new_keys.len();
        let grown = needed > st.capacity() && st.capacity() < limit;
        if grown {
            let capacity = needed.max(st.capacity().saturating_mul(2)).min(limit);
            self.grow(st, capacity)?;
        }
        let mut rows = Vec::with_capacity(new_keys.len());
        let State { table, fallback, keys: slot_keys, used, index, free, usage, .. } = st;
        let usage = usage.get_mut();
        usage.begin();
        // Keys the table holds are pinned first, so that a new key of the call never evicts one
        // the call reads.
        for &slot in found.iter().flatten() {
            usage.pin[slot as usize] = usage.generation;
        }
        let mut evicted = 0;
        let rw = table.row_words();
        let zero = (matches!(self.options.init, Init::Zeros) && !new_keys.is_empty()).then(|| zero_row(self.options.format, self.options.dim));
        // In call order, as a cache sees a batch: a key held (or placed earlier in the call) is a
        // hit, a new one is admitted. Pinned, the keys held keep the slots found above.
        let mut slots = Vec::with_capacity(keys.len());
        // New keys placed by this call, when a key is listed twice (it is placed once), looked up
        // here rather than probing the index again.
        let repeats = distinct.len() < keys.len();
        let mut placed_now = rustc_hash::FxHashMap::default();
        for (&k, &held) in keys.iter().zip(&found) {
            if let Some(slot) = held.or_else(|| if repeats { placed_now.get(&k).copied() } else { None }) {
                if lookup {
                    usage.hit(slot);
                }
                slots.push(slot);
                continue;
            }
            let free_slot = free.pop();
            let (pin, generation) = (&usage.pin, usage.generation);
            let slot = usage.policy.admit(fold(k), free_slot, &|s| pin[s as usize] == generation);
            debug_assert!(free_slot.is_none_or(|f| f == slot), "a policy must use the free slot it is given");
            if used[slot as usize] {
                index.remove(slot_keys[slot as usize]);
                evicted += 1;
            }
            slot_keys[slot as usize] = k;
            used[slot as usize] = true;
            index.insert(k, slot);
            if repeats {
                placed_now.insert(k, slot);
            }
            usage.counts[slot as usize] = u64::from(lookup);
            usage.pin[slot as usize] = usage.generation;
            slots.push(slot);
            // The new key's first row.
            rows.push((*fallback + slot as usize) as u32);
            let dst = (*fallback + slot as usize) * rw;
            let words = table.words_mut();
            match &self.options.init {
                Init::Zeros => words[dst..dst + rw].copy_from_slice(zero.as_deref().expect("made for Init::Zeros")),
                Init::Row(_) => words.copy_within(0..rw, dst),
                Init::Hashed(_) => {
                    let src = (crate::hash::hash_id(k, 0) as usize % *fallback) * rw;
                    words.copy_within(src..src + rw, dst);
                }
            }
        }
        if lookup {
            self.lookups.fetch_add(keys.len() as u64, Ordering::Relaxed);
            self.unknown.fetch_add(unknown as u64, Ordering::Relaxed);
        }
        self.inserts.fetch_add(new_keys.len() as u64, Ordering::Relaxed);
        self.evictions.fetch_add(evicted as u64, Ordering::Relaxed);
        Ok(Placed { inserted: new_keys.len(), evicted, rows, slots, grown })
    }

    /// Brings the GPU copy, if any, up to the host's after `placed` (and the rows in it, written
    /// since): the changed rows written, or after growth the whole table uploaded again. Called
    /// under the write lock, so no lookup is submitted in between. If the GPU fails, the host
    /// keeps the change, the GPU copy is dropped (lookups on the GPU are refused until
    /// [`LiveTable::attach_gpu`] again), and the error is returned.
    #[cfg_attr(not(all(native, feature = "gpu")), allow(clippy::unused_self, clippy::unnecessary_wraps))]
    fn mirror(&self, st: &mut State, placed: &Placed) -> Result<(), Error> {
        #[cfg(all(native, feature = "gpu"))]
        if let Some(gpu) = st.gpu.take() {
            let written = if placed.grown {
                GpuCopy::upload(&gpu.table.engine(), st)
            } else {
                gpu.table.write_rows(&st.table, &placed.rows).map_err(Into::into).and_then(|()| gpu::mirror_index(st, gpu))
            };
            st.gpu = Some(written?);
        }
        let _ = (st, placed);
        Ok(())
    }

    /// Adds the lookups the GPU's probe counted since the last call to the keys' usage counts
    /// and the policy (one hit a key that was looked up, in slot order), so that eviction and
    /// [`LiveTable::usage`] see them, and the unknown keys it met to [`LiveStats::unknown`].
    /// Called before anything changes slots.
    #[cfg_attr(not(all(native, feature = "gpu")), allow(clippy::unused_self, clippy::unnecessary_wraps))]
    fn fold_gpu_lookups(&self, st: &State) -> Result<(), Error> {
        #[cfg(all(native, feature = "gpu"))]
        if let Some(index) = st.gpu.as_ref().and_then(|g| g.index.as_ref()) {
            if st.probed.swap(false, Ordering::AcqRel) {
                let (hits, unknown) = pollster::block_on(index.take_hits())?;
                self.unknown.fetch_add(u64::from(unknown), Ordering::Relaxed);
                let mut usage = st.usage.lock();
                for (slot, &h) in hits.iter().enumerate() {
                    if h > 0 && st.used[slot] {
                        usage.policy.hit(slot as u32);
                        usage.counts[slot] += u64::from(h);
                    }
                }
            }
        }
        let _ = st;
        Ok(())
    }

    /// Reallocates the slots to `capacity` (more than now), keeping every row and key.
    fn grow(&self, st: &mut State, capacity: usize) -> Result<(), Error> {
        let old = st.capacity();
        self.check_budget(self.bytes_for(capacity), "bytes of a live table's slots")?;
        let mut table = PackedTable::zeroed(self.options.format, st.fallback + capacity, self.options.dim, "live table")?;
        table.words_mut()[..st.table.words().len()].copy_from_slice(st.table.words());
        st.table = table;
        resize_exact(&mut st.keys, capacity, 0);
        resize_exact(&mut st.used, capacity, false);
        let mut free = Vec::with_capacity(capacity);
        free.extend((old as u32..capacity as u32).rev());
        free.extend_from_slice(&st.free);
        st.free = free;
        let usage = st.usage.get_mut();
        usage.policy.resize(capacity);
        resize_exact(&mut usage.counts, capacity, 0);
        resize_exact(&mut usage.pin, capacity, 0);
        Ok(())
    }

    /// Writes `values` (`keys.len() × dim`, row after row) as the rows of `keys`, inserting the
    /// keys the table does not hold (an upsert); a key listed twice takes its last row. Errors of
    /// a row ([`Error::NonFinite`], [`Error::OutOfRange`]) name its place in the batch. The rows
    /// are encoded before the lock is taken; the batch applies whole — after every update before
    /// it — or, refused with a typed error, not at all.
    pub fn update(&self, keys: &[u64], values: &[f32]) -> Result<UpdateReport, Error> {
        let encoded = self.encode(keys, values)?;
        self.apply(keys, &encoded)
    }

    /// The packed rows of an update batch, checked.
    fn encode(&self, keys: &[u64], values: &[f32]) -> Result<PackedTable, Error> {
        let dim = self.options.dim;
        if values.len() != keys.len() * dim {
            return Err(Error::ShapeMismatch { what: "values of the updated rows (keys × dim)", expected: keys.len() * dim, actual: values.len() });
        }
        Ok(PackedTable::quantize(self.options.format, values, keys.len(), dim)?)
    }

    fn apply(&self, keys: &[u64], encoded: &PackedTable) -> Result<UpdateReport, Error> {
        let mut st = self.write();
        let mut placed = self.place(&mut st, keys, false)?;
        let (rw, fallback) = (encoded.row_words(), st.fallback);
        placed.rows.clear();
        for (i, &slot) in placed.slots.iter().enumerate() {
            let row = fallback + slot as usize;
            st.table.words_mut()[row * rw..(row + 1) * rw].copy_from_slice(encoded.row(i));
            placed.rows.push(row as u32);
        }
        let sequence = self.update_batches.fetch_add(1, Ordering::Relaxed) + 1;
        self.rows_updated.fetch_add(keys.len() as u64, Ordering::Relaxed);
        self.mirror(&mut st, &placed)?;
        Ok(UpdateReport { sequence, inserted: placed.inserted, evicted: placed.evicted })
    }

    /// Applies the batches of `log` in order. Every batch is checked and encoded before the
    /// first applies, so a log with a bad batch changes nothing.
    pub fn apply_log(&self, log: &UpdateLog) -> Result<Vec<UpdateReport>, Error> {
        if log.dim() != self.options.dim {
            return Err(Error::ShapeMismatch { what: "values per row of the update log (the table's dim)", expected: self.options.dim, actual: log.dim() });
        }
        let limit = self.slot_limit();
        let mut encoded = Vec::with_capacity(log.batches().len());
        for (keys, values) in log.batches() {
            let distinct = keys.iter().collect::<FxHashSet<_>>().len();
            if distinct > limit {
                return Err(Error::LimitExceeded {
                    what: "distinct keys in one update batch (the keys a live table may hold)",
                    requested: distinct as u64,
                    max: limit as u64,
                });
            }
            encoded.push(self.encode(keys, values)?);
        }
        log.batches().iter().zip(&encoded).map(|((keys, _), e)| self.apply(keys, e)).collect()
    }

    /// Removes `keys` (unknown ones are skipped); their slots take new keys. Returns how many
    /// the table held. A GPU that fails meanwhile (counting its lookups, or writing the index)
    /// loses its copy, as in any change: the keys are removed on the host all the same, and the
    /// GPU's error is returned (GPU lookups are refused until [`LiveTable::attach_gpu`] again).
    pub fn remove(&self, keys: &[u64]) -> Result<usize, Error> {
        let mut st = self.write();
        // The removed keys' GPU lookups are counted before their slots go (a GPU failure here
        // or below drops the GPU copy, as one during an update does).
        let folded = self.fold_gpu_lookups(&st);
        let State { used, index, free, usage, .. } = &mut *st;
        let usage = usage.get_mut();
        let mut removed = 0;
        for &k in keys {
            if let Some(slot) = index.remove(k) {
                used[slot as usize] = false;
                usage.policy.remove(slot);
                usage.counts[slot as usize] = 0;
                free.push(slot);
                removed += 1;
            }
        }
        #[cfg(all(native, feature = "gpu"))]
        if let Some(gpu) = st.gpu.take() {
            st.gpu = Some(folded.and_then(|()| gpu::mirror_index(&mut st, gpu))?);
        }
        #[cfg(not(all(native, feature = "gpu")))]
        folded?;
        Ok(removed)
    }

    /// The table as a keyed table file ([`TableFile::with_keys`]): the rows of the keys it holds,
    /// in slot order, without the fallback rows or empty slots. What [`LiveTable::swap`] and
    /// [`LiveTable::from_file`] read.
    pub fn snapshot(&self) -> Result<TableFile, Error> {
        let st = self.read();
        let slots: Vec<u32> = (0..st.capacity() as u32).filter(|&s| st.used[s as usize]).collect();
        let rw = st.table.row_words();
        let mut words = Vec::new();
        words
            .try_reserve_exact(slots.len() * rw)
            .map_err(|_| Error::HostOutOfMemory { what: "a live table's snapshot", bytes: (slots.len() * rw * 4) as u64 })?;
        for &s in &slots {
            words.extend_from_slice(st.table.row(st.fallback + s as usize));
        }
        let keys = slots.iter().map(|&s| st.keys[s as usize]).collect();
        let table = PackedTable::from_words(self.options.format, slots.len(), self.options.dim, words)?;
        TableFile::new(table).with_keys(keys)
    }

    /// A state holding `file`'s rows (verified) and keys, sized for them, its usage fresh.
    fn state_from_file(&self, file: &TableFile) -> Result<State, Error> {
        let t = file.table();
        if t.format() != self.options.format {
            return Err(Error::MixedFormats { index: 0, expected: self.options.format, found: t.format() });
        }
        if t.dim() != self.options.dim {
            return Err(Error::ShapeMismatch { what: "values per row of the snapshot (the table's dim)", expected: self.options.dim, actual: t.dim() });
        }
        if file.id_map().is_some() || file.code_transform().is_some() {
            return Err(Error::Unsupported(crate::Unsupported::KeyedTableFile));
        }
        let limit = self.slot_limit();
        if t.rows() > limit {
            return Err(Error::LimitExceeded {
                what: "keys of the snapshot (the keys the live table may hold)",
                requested: t.rows() as u64,
                max: limit as u64,
            });
        }
        file.verify()?;
        let capacity = t.rows().max(self.options.capacity.min(limit));
        let mut st = Self::empty_state(&self.options, self.fallback.as_ref(), capacity)?;
        st.index = KeyIndex::with_capacity(t.rows());
        let start = st.fallback * t.row_words();
        st.table.words_mut()[start..start + t.words().len()].copy_from_slice(t.words());
        let identity: Vec<u64>;
        let keys = match file.keys() {
            Some(k) => k,
            None => {
                identity = (0..t.rows() as u64).collect();
                &identity
            }
        };
        // Each key enters the policy as if inserted, in row order.
        let usage = st.usage.get_mut();
        for (slot, &k) in keys.iter().enumerate() {
            let free = st.free.pop();
            debug_assert_eq!(free, Some(slot as u32), "a fresh state's free slots are popped lowest first");
            usage.policy.admit(fold(k), free, &|_| false);
            st.keys[slot] = k;
            st.used[slot] = true;
            st.index.insert(k, slot as u32);
        }
        Ok(st)
    }

    /// Replaces the whole table — keys, rows and usage — with `file`'s (a keyed snapshot, or a
    /// plain table whose row `i` becomes key `i`), once it has verified against its checksums
    /// and matches the table's format and dim; otherwise refuses with a typed error and the
    /// table stays as it was. The new table is built before the lock is taken, so lookups run
    /// meanwhile, and those running when the lock is taken finish on the old one.
    pub fn swap(&self, file: &TableFile) -> Result<SwapReport, Error> {
        let old_bytes = self.bytes();
        let new_bytes = self.bytes_for(file.table().rows().max(self.options.capacity.min(self.slot_limit())));
        self.check_budget(old_bytes + new_bytes, "bytes of a live table during a swap (the old and the new table at once)")?;
        let mut state = self.state_from_file(file)?;
        let keys = state.index.len();
        // The new table goes to the GPU too, before the lock, when a copy is attached.
        #[cfg(all(native, feature = "gpu"))]
        if let Some(engine) = self.read().gpu.as_ref().map(|g| g.table.engine()) {
            state.gpu = Some(GpuCopy::upload(&engine, &mut state)?);
        }
        let asked = web_time::Instant::now();
        let (version, pause) = {
            let mut st = self.write();
            #[cfg(all(native, feature = "gpu"))]
            if let (Some(engine), None) = (st.gpu.as_ref().map(|g| g.table.engine()), &state.gpu) {
                // Attached while the new table was built.
                state.gpu = Some(GpuCopy::upload(&engine, &mut state)?);
            }
            state.version = st.version + 1;
            std::mem::swap(&mut *st, &mut state);
            (st.version, asked.elapsed())
        };
        // The old table is freed here, after the lock.
        drop(state);
        self.swaps.fetch_add(1, Ordering::Relaxed);
        Ok(SwapReport { version, keys, old_bytes, new_bytes, peak_bytes: old_bytes + new_bytes, budget: self.options.memory_budget, pause })
    }

    /// [`LiveTable::swap`] to a table file's bytes (fetched from anywhere; a keyed or a plain
    /// table file).
    pub fn swap_bytes(&self, bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> Result<SwapReport, Error> {
        self.swap(&TableFile::from_bytes_any(bytes)?)
    }

    /// [`LiveTable::swap`] to the table file at `path`.
    #[cfg(native)]
    pub fn swap_file(&self, path: impl AsRef<std::path::Path>) -> Result<SwapReport, Error> {
        let path = path.as_ref();
        let file = TableFile::open_stored(path)?;
        self.swap(&file).map_err(|e| match e {
            Error::Checksum { .. } | Error::BadFile { .. } => crate::file::in_file(path, e),
            other => other,
        })
    }
}

/// What placing a call's keys changed.
struct Placed {
    inserted: usize,
    evicted: usize,
    /// Table rows written (new keys' first rows; an update's rows).
    rows: Vec<u32>,
    /// The slot of each key of the call, in order.
    slots: Vec<u32>,
    /// Whether the slots were reallocated (the GPU copy is uploaded again).
    #[cfg_attr(not(all(native, feature = "gpu")), allow(dead_code))]
    grown: bool,
}

/// A zero row's words in `format` (all-zero words are not a zero row in every format: binary
/// codes decode to ±1).
fn zero_row(format: Format, dim: usize) -> Vec<u32> {
    PackedTable::quantize(format, &vec![0.0; dim], 1, dim).map(|t| t.words().to_vec()).unwrap_or_else(|_| vec![0; format.row_words(dim)])
}
