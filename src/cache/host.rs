//! [`HostCache`]: the row cache of the CPU path — the same slot map and policies as the GPU's
//! cache, the slots in host memory — in front of a [`RowSource`] that is slow to read (a mapped
//! file's pages, a remote file's chunks and their checksums).
//!
//! No lock is held while a source is read: a lookup assigns slots under the lock, reads the rows
//! it misses without it, and puts them in their slots under it again. A row already being read by
//! another lookup is not read a second time: the later lookup waits for that read (a "flight")
//! and takes the row from it — natively across threads, in a browser across the promises of one
//! thread. Each lookup reads all of its own misses in one call of [`RowSource::read_rows`], which
//! a remote table turns into as few range requests as the rows' chunks allow.
//!
//! [`HostCache::prefetch`] reads the next batch's misses ahead, as the GPU cache's does: a read
//! like a lookup's (a lookup that misses those rows meanwhile waits for it instead of reading
//! them again), whose rows are then kept beside the cache — staged, evicting nothing — until the
//! next lookup takes the ones it misses.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use rustc_hash::FxHashMap;

use super::{CacheSpec, CacheStats, SlotMap, EMPTY};
use crate::format::PackedTable;
use crate::request::IdSelect;
use crate::source::{read_whole_rows, RowSource};
use crate::{AsyncLookup, Bags, Bounds, Error, HostRows, Pooling, Request};

/// A row cache in host memory over `spec.source`: `spec.capacity` rows (at most the table's)
/// under `spec.policy`, with the GPU cache's statistics. Lookups return exactly the rows a
/// resident table would ([`crate::cpu::gather`] on the same packed rows).
///
/// ```
/// use edo::cache::{CacheSpec, HostCache, PolicyKind};
/// use edo::{Bounds, Format, PackedTable};
/// # edo::block_on(async {
/// let data: Vec<f32> = (0..1000 * 16).map(|i| (i as f32 * 0.37).sin()).collect();
/// let table = PackedTable::quantize(Format::Int8, &data, 1000, 16)?;
/// let cache = HostCache::new(CacheSpec { source: table.clone(), capacity: 100, policy: PolicyKind::Lfu })?;
/// assert_eq!(cache.gather(&[3, 999, 3], Bounds::Error).await?, edo::cpu::gather(&table, &[3, 999, 3], Bounds::Error)?);
/// assert_eq!((cache.stats().hits, cache.stats().misses), (1, 2));
/// # Ok::<(), edo::Error>(()) }).unwrap();
/// ```
pub struct HostCache<S> {
    spec: CacheSpec<S>,
    row_words: usize,
    state: Mutex<State>,
}

struct State {
    map: SlotMap,
    /// The packed rows, slot `s` at `s * row_words` (grown as slots are first used).
    words: Vec<u32>,
    /// Per slot: the row a flight is reading into it and that flight's number, or `NOT_FILLING`
    /// when its words are its row's. Only that flight fills it: a read that a refresh disowned
    /// never writes a slot a later read of the same row is filling.
    filling: Vec<(u32, u64)>,
    /// Rows being read now, with the read and the row's place in it.
    flights: FxHashMap<u32, (Arc<Flight>, usize)>,
    /// The next flight's number.
    next_flight: u64,
    /// Lookups (ids) that took their row from another lookup's read.
    shared_reads: u64,
    /// The rows of the prefetches since the last lookup, until the next lookup.
    staged: Option<Staged>,
    /// Calls of `refresh_rows` so far: a prefetch that read across one stages nothing.
    refreshes: u64,
}

/// Rows prefetches read: each row's read, and its place in that read's words.
struct Staged {
    index: FxHashMap<u32, (usize, usize)>,
    reads: Vec<Arc<Vec<u32>>>,
}

const NOT_FILLING: (u32, u64) = (EMPTY, 0);

/// How a flight ended: its rows' words, its read's error, or — its lookup dropped mid-read —
/// nothing (those waiting read the rows themselves).
type Outcome = Result<Arc<Vec<u32>>, Option<Error>>;

/// One lookup's read of the rows it missed: its result, and who waits for it.
struct Flight {
    number: u64,
    state: Mutex<FlightState>,
}

#[derive(Default)]
struct FlightState {
    done: Option<Outcome>,
    wakers: Vec<Waker>,
}

impl Flight {
    fn finish(&self, outcome: Outcome) {
        let wakers = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            st.done = Some(outcome);
            std::mem::take(&mut st.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// The outcome of a flight, once it has landed.
struct Landed(Arc<Flight>);

impl Future for Landed {
    type Output = Outcome;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        let mut st = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        match &st.done {
            Some(done) => Poll::Ready(done.clone()),
            None => {
                if !st.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    st.wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// Finishes a flight when dropped — after its slots are filled, or while unwinding from a panic
/// in between, so those waiting never wait forever.
struct Finish<'a>(&'a Flight, Option<Outcome>);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        if let Some(outcome) = self.1.take() {
            self.0.finish(outcome);
        }
    }
}

/// Ends a lookup's flight however the lookup ends: with its rows, its error, or — when the lookup
/// is dropped while reading — the slots it was filling emptied and those waiting told to read
/// the rows themselves.
struct Pilot<'a, S> {
    cache: &'a HostCache<S>,
    flight: Arc<Flight>,
    rows: Vec<u32>,
    landed: bool,
}

impl<S> Pilot<'_, S> {
    /// Puts the read rows in the slots still waiting for this read (or empties those slots when
    /// it brought none), retires the flight, and wakes those waiting.
    fn land(&mut self, outcome: Outcome) {
        if std::mem::replace(&mut self.landed, true) {
            return;
        }
        let finish = Finish(&self.flight, Some(outcome));
        let outcome = finish.1.as_ref().expect("set above");
        let (rw, number) = (self.cache.row_words, self.flight.number);
        let mut st = self.cache.lock();
        for (i, &row) in self.rows.iter().enumerate() {
            if st.flights.get(&row).is_some_and(|(f, _)| Arc::ptr_eq(f, &self.flight)) {
                st.flights.remove(&row);
            }
            // The slot that holds the row now, if it still waits for this read (it may have been
            // evicted, given to another row, or refreshed while the read was under way).
            let Some(slot) = st.map.slot(row).filter(|&s| st.filling[s as usize] == (row, number)) else { continue };
            st.filling[slot as usize] = NOT_FILLING;
            match outcome {
                Ok(words) => {
                    let at = slot as usize * rw;
                    st.words[at..at + rw].copy_from_slice(&words[i * rw..(i + 1) * rw]);
                }
                Err(_) => st.map.invalidate([slot]),
            }
        }
        drop(st);
        drop(finish);
    }
}

impl<S> Drop for Pilot<'_, S> {
    fn drop(&mut self) {
        self.land(Err(None));
    }
}

impl<S> HostCache<S> {
    /// The lock; a lookup that panicked while holding it leaves the cache emptied, not wrong.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| {
            self.state.clear_poison();
            let mut st = poisoned.into_inner();
            let slots: Vec<u32> = st.map.entries().map(|(_, s)| s).collect();
            st.map.invalidate(slots);
            st.filling.fill(NOT_FILLING);
            // Reads under way still land (into no slot); a read whose lookup panicked before it
            // began is forgotten, so nobody waits on it. A refresh may have panicked half way:
            // staged rows go too.
            st.flights.clear();
            st.staged = None;
            st
        })
    }
}

impl<S: RowSource> HostCache<S> {
    /// An empty cache of `spec.capacity` rows (at most the table's); `capacity == 0` is
    /// [`Error::LimitExceeded`], like the GPU's. Host memory is taken as slots are first used:
    /// at most `capacity` packed rows.
    pub fn new(spec: CacheSpec<S>) -> Result<HostCache<S>, Error> {
        let (format, rows, dim) = (spec.source.format(), spec.source.rows(), spec.source.dim());
        if rows > u32::MAX as usize {
            return Err(Error::LimitExceeded { what: "table rows (ids are u32)", requested: rows as u64, max: u32::MAX as u64 });
        }
        if dim == 0 {
            return Err(Error::ZeroDim);
        }
        let capacity = spec.capacity.min(rows.max(1));
        let map = SlotMap::new(capacity, format.row_bytes(dim) as u64, spec.policy.build())?.for_rows(rows);
        let state = State {
            map,
            words: Vec::new(),
            filling: vec![NOT_FILLING; capacity],
            flights: FxHashMap::default(),
            next_flight: 1,
            shared_reads: 0,
            staged: None,
            refreshes: 0,
        };
        Ok(HostCache { row_words: format.row_words(dim), spec, state: Mutex::new(state) })
    }

    /// What it was made from: the source, capacity and policy.
    pub fn spec(&self) -> &CacheSpec<S> {
        &self.spec
    }
    /// The host table.
    pub fn source(&self) -> &S {
        &self.spec.source
    }
    /// Rows of the host table (ids address these).
    pub fn rows(&self) -> usize {
        self.spec.source.rows()
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        self.spec.source.dim()
    }
    /// Rows the cache holds at most.
    pub fn capacity(&self) -> usize {
        self.lock().map.capacity()
    }
    /// Rows cached now.
    pub fn cached_rows(&self) -> usize {
        self.lock().map.len()
    }
    /// Whether `row` is cached now.
    pub fn is_cached(&self, row: u32) -> bool {
        self.lock().map.slot(row).is_some()
    }
    /// The replacement policy's name ("lfu").
    pub fn policy_name(&self) -> String {
        self.lock().map.policy_name().to_string()
    }
    /// Bytes of host memory the cached rows take (the slots used so far).
    pub fn bytes(&self) -> u64 {
        4 * self.lock().words.len() as u64
    }
    /// Hits, misses and evictions since the cache was made or the last reset, as the GPU cache
    /// counts them (`bytes_uploaded` is the bytes loaded into the cache from the source), and
    /// [`CacheStats::shared_reads`].
    pub fn stats(&self) -> CacheStats {
        let st = self.lock();
        CacheStats { shared_reads: st.shared_reads, ..st.map.stats() }
    }
    /// Zeroes the counters of [`HostCache::stats`].
    pub fn reset_stats(&self) {
        let mut st = self.lock();
        st.map.reset_stats();
        st.shared_reads = 0;
    }

    /// Forgets the cached copies of rows `ids` after the host table changed them: they are read
    /// again when looked up, also where a read of them is under way (the lookup that started it
    /// still gets what it read; nothing later takes its rows from that read). Staged copies of
    /// them are dropped, and a prefetch reading now stages nothing.
    pub fn refresh_rows(&self, ids: &[u32]) {
        let mut st = self.lock();
        st.refreshes += 1;
        let mut slots = Vec::new();
        for &r in ids {
            st.flights.remove(&r);
            if let Some(staged) = &mut st.staged {
                staged.index.remove(&r);
            }
            if let Some(s) = st.map.slot(r) {
                st.filling[s as usize] = NOT_FILLING;
                slots.push(s);
            }
        }
        st.map.invalidate(slots);
    }

    /// Reads the rows of `ids` that are neither cached nor being read (the next batch's misses)
    /// and stages them beside the cache, as [`crate::gpu::GpuCache::prefetch`] does on the GPU:
    /// call it while the current batch is being used, and the next lookup takes its misses that
    /// were staged without reading the source. Staging evicts nothing and does not touch the
    /// policy; the next lookup consumes the staging, whatever it takes of it (prefetches before
    /// that lookup add to it, a prefetch never reading a row one before it is reading). A lookup
    /// that misses a row while its prefetch is still reading waits for that read. Ids out of
    /// range are skipped (the lookup applies its bounds policy); at most `capacity` rows are
    /// staged at once. Returns how many rows were read. A failed read stages nothing, and a
    /// lookup that waited for it reads its rows itself: a prefetch is a guess, its error is its
    /// caller's only.
    pub async fn prefetch(&self, ids: &[u32]) -> Result<usize, Error> {
        let rows = self.rows();
        let (flight, wanted, refreshes) = {
            let mut st = self.lock();
            // Staged rows count against the capacity: prefetches without a lookup between them
            // hold at most `capacity` rows beside the cache.
            let staged = st.staged.as_ref().map_or(0, |s| s.index.len());
            let limit = st.map.capacity().saturating_sub(staged);
            let mut wanted = Vec::new();
            let mut seen = rustc_hash::FxHashSet::default();
            for &id in ids {
                if wanted.len() == limit {
                    break;
                }
                let held = st.map.slot(id).is_some() || st.flights.contains_key(&id) || st.staged.as_ref().is_some_and(|s| s.index.contains_key(&id));
                if (id as usize) < rows && !held && seen.insert(id) {
                    wanted.push(id);
                }
            }
            if wanted.is_empty() {
                return Ok(0);
            }
            let flight = Arc::new(Flight { number: st.next_flight, state: Mutex::default() });
            st.next_flight += 1;
            for (i, &row) in wanted.iter().enumerate() {
                st.flights.insert(row, (flight.clone(), i));
            }
            (flight, wanted, st.refreshes)
        };
        let n = wanted.len();
        let mut pilot = Pilot { cache: self, flight, rows: wanted, landed: false };
        let mut words = Vec::new();
        if let Err(e) = read_whole_rows(&self.spec.source, self.row_words, &pilot.rows, &mut words).await {
            pilot.land(Err(None));
            return Err(e);
        }
        let words = Arc::new(words);
        // Lookups that missed these rows meanwhile take them from the read (and load them); the
        // rest are staged, unless a refresh came while they were read (any row of them may have
        // changed).
        pilot.land(Ok(words.clone()));
        let mut st = self.lock();
        if st.refreshes == refreshes {
            let fresh: Vec<(u32, usize)> = pilot.rows.iter().enumerate().filter(|&(_, &row)| st.map.slot(row).is_none()).map(|(i, &row)| (row, i)).collect();
            if !fresh.is_empty() {
                st.map.note_staged(fresh.len());
                let staged = st.staged.get_or_insert_with(|| Staged { index: FxHashMap::default(), reads: Vec::new() });
                let read = staged.reads.len();
                staged.reads.push(words);
                staged.index.extend(fresh.into_iter().map(|(row, i)| (row, (read, i))));
            }
        }
        Ok(n)
    }

    /// Decoded rows of `ids` (checked by `bounds`, as [`crate::cpu::gather`] does): hits copied
    /// from the cache, misses taken from the rows prefetches staged or read from the source (those
    /// another lookup or a prefetch is reading, taken from that read) and admitted by the policy.
    pub async fn gather(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
        let (local, local_ids) = self.packed(ids, bounds).await?;
        Ok(crate::cpu::gather(&local, &local_ids, Bounds::Zero)?)
    }

    /// EmbeddingBag over the cached rows: the bags' indices looked up as [`HostCache::gather`]
    /// looks ids up, then pooled by the CPU path's bag kernel over their packed rows, so the
    /// result is [`crate::cpu::embedding_bag`]'s over the resident table, bit for bit. Bad
    /// offsets or weights are refused before any row is read.
    pub async fn bag(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<Vec<f32>, Error> {
        bags.validate(pooling, None)?;
        let (local, local_ids) = self.packed(bags.indices, bounds).await?;
        Ok(crate::cpu::embedding_bag(&local, &bags.with_indices(&local_ids), pooling, Bounds::Zero)?)
    }

    /// The packed rows of `ids`, position `p` at row `p` of a table of `ids.len()` rows, and the
    /// ids to read them with there (a zero row of the bounds policy is an id past them).
    async fn packed(&self, ids: &[u32], bounds: Bounds) -> Result<(PackedTable, Vec<u32>), Error> {
        let (rows, dim, format) = (self.rows(), self.dim(), self.spec.source.format());
        bounds.check(ids, rows)?;
        let resolved: Vec<Option<u32>> = ids.iter().map(|&id| bounds.resolve(id, rows).map(|r| r as u32)).collect();
        let rw = self.row_words;
        let mut packed: Vec<u32> = crate::alloc::zeroed(ids.len().saturating_mul(rw), "a cached lookup's packed rows")?;
        // Positions whose row comes from a flight: (position, flight, the row's place in it).
        let mut waits: Vec<(usize, Arc<Flight>, usize)> = Vec::new();
        let mut mine: Vec<u32> = Vec::new();
        let flight = {
            let mut st = self.lock();
            let flight = Arc::new(Flight { number: st.next_flight, state: Mutex::default() });
            st.next_flight += 1;
            let mut slots = Vec::new();
            let parts = st.map.lookup(&resolved, &mut slots);
            let st = &mut *st;
            // The staging serves this lookup (or is not needed): the next prefetch stages anew.
            let staged = st.staged.take();
            let mut from_staging = 0;
            let top = parts.iter().flat_map(|p| p.loads.iter().map(|&(_, s)| s as usize + 1)).max().unwrap_or(0);
            if st.words.len() < top * rw {
                let more = top * rw - st.words.len();
                if st.words.try_reserve(more).is_err() {
                    let loaded: Vec<u32> = parts.iter().flat_map(|p| p.loads.iter().map(|&(_, s)| s)).collect();
                    st.map.invalidate(loaded);
                    return Err(Error::HostOutOfMemory { what: "cached rows", bytes: 4 * more as u64 });
                }
                st.words.resize(top * rw, 0);
            }
            // Parts in order: a part's loads take their slots before its ids read them, and a
            // later part may give a slot to another row only after this part's ids have read it.
            for part in &parts {
                for &(row, slot) in &part.loads {
                    // A staged row is copied into its slot now.
                    if let Some((s, &(read, k))) = staged.as_ref().and_then(|s| Some(s).zip(s.index.get(&row))) {
                        let at = slot as usize * rw;
                        st.words[at..at + rw].copy_from_slice(&s.reads[read][k * rw..(k + 1) * rw]);
                        st.filling[slot as usize] = NOT_FILLING;
                        from_staging += 1;
                        continue;
                    }
                    // A row another lookup is reading (evicted meanwhile, loaded again here) is
                    // taken from that read; any other is read by this lookup.
                    let number = match st.flights.get(&row) {
                        Some((f, _)) => f.number,
                        None => {
                            st.flights.insert(row, (flight.clone(), mine.len()));
                            mine.push(row);
                            flight.number
                        }
                    };
                    st.filling[slot as usize] = (row, number);
                }
                for pos in part.ids.clone() {
                    let Some(row) = resolved[pos] else { continue };
                    let slot = slots[pos] as usize;
                    let (filling, number) = st.filling[slot];
                    if filling != row {
                        packed[pos * rw..(pos + 1) * rw].copy_from_slice(&st.words[slot * rw..(slot + 1) * rw]);
                        continue;
                    }
                    let (f, i) = match st.flights.get(&row) {
                        Some((f, i)) if f.number == number => (f.clone(), *i),
                        // Not expected (a slot being filled has its flight): read the row here
                        // rather than wait on nothing.
                        _ => {
                            st.flights.insert(row, (flight.clone(), mine.len()));
                            st.filling[slot] = (row, flight.number);
                            mine.push(row);
                            (flight.clone(), mine.len() - 1)
                        }
                    };
                    if !Arc::ptr_eq(&f, &flight) {
                        st.shared_reads += 1;
                    }
                    waits.push((pos, f, i));
                }
            }
            st.map.note_served_from_staging(from_staging);
            flight
        };
        if !mine.is_empty() {
            let mut pilot = Pilot { cache: self, flight: flight.clone(), rows: mine, landed: false };
            let mut words = Vec::new();
            let read = match read_whole_rows(&self.spec.source, rw, &pilot.rows, &mut words).await {
                Ok(()) => Ok(Arc::new(words)),
                Err(e) => Err(Some(e)),
            };
            pilot.land(read);
        }
        // Rows whose read was dropped with its lookup: read here, not cached.
        let mut orphans: Vec<usize> = Vec::new();
        for (pos, f, i) in waits {
            match Landed(f).await {
                Ok(words) => packed[pos * rw..(pos + 1) * rw].copy_from_slice(&words[i * rw..(i + 1) * rw]),
                Err(Some(e)) => return Err(e),
                Err(None) => orphans.push(pos),
            }
        }
        if !orphans.is_empty() {
            let rows: Vec<u32> = orphans.iter().filter_map(|&p| resolved[p]).collect();
            let mut words = Vec::new();
            read_whole_rows(&self.spec.source, rw, &rows, &mut words).await?;
            for (k, &pos) in orphans.iter().enumerate() {
                packed[pos * rw..(pos + 1) * rw].copy_from_slice(&words[k * rw..(k + 1) * rw]);
            }
        }
        // Read as the CPU path reads a resident table: position p of the lookup is row p of the
        // packed rows; a zero row of the bounds policy is an id past them.
        let local = PackedTable::from_words(format, ids.len(), dim, packed)?;
        let local_ids: Vec<u32> = resolved.iter().enumerate().map(|(p, r)| if r.is_some() { p as u32 } else { u32::MAX }).collect();
        Ok((local, local_ids))
    }
}

/// The host cache answers every [`Request`] as the resident table would, bit for bit: a gather
/// through [`HostCache::gather`], a bag through [`HostCache::bag`], f16 rows rounded from them.
impl<S: RowSource> AsyncLookup for HostCache<S> {
    fn rows(&self) -> usize {
        HostCache::rows(self)
    }
    fn dim(&self) -> usize {
        HostCache::dim(self)
    }
    async fn lookup(&self, request: &Request<'_>) -> Result<HostRows, Error> {
        let mut store = Vec::new();
        let values = match request.narrow(HostCache::rows(self), &mut store)? {
            IdSelect::Ids(ids) => HostCache::gather(self, ids, request.bounds).await?,
            IdSelect::Bags(bags, pooling) => HostCache::bag(self, &bags, pooling, request.bounds).await?,
        };
        Ok(request.finish(values))
    }
}
