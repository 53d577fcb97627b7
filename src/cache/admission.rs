//! Admission in front of a replacement policy: W-TinyLFU (Einziger, Friedman & Manes, "TinyLFU:
//! A Highly Efficient Cache Admission Policy", ACM ToS 2017; Caffeine's design).
//!
//! Every missing row enters a *window* (least recently used first out). When the window is full,
//! its oldest row is the *candidate* for the main part of the cache, which the wrapped policy runs:
//! the candidate goes in only if a frequency sketch counts it more often than the row the policy
//! would evict for it; otherwise the candidate leaves. So a row seen once — a scan, the long tail —
//! passes through the window and never displaces a row that keeps coming back. Frequencies are
//! counted for every row looked up, cached or not, in a count-min sketch of 4-bit counters that is
//! halved every `10 × capacity` lookups, so popularity fades.
//!
//! The window's size adapts, as Caffeine's does: it starts at 1 % of the slots, and after every
//! `10 × capacity` lookups a hill climber moves it by a step (6.25 % of the slots, shrinking as it
//! goes) in the direction that last raised the hit rate — a large window behaves like LRU, which
//! follows a hot set that moves; a small one like LFU, which keeps a stable one. And because a
//! batch pins the slots it reads, the window is never smaller than the misses of the last part of
//! a batch: a part's misses all need slots at once, and a window too small for them would send
//! every one past the sketch into main.
//!
//! Rows never move between slots: the window and the main part are sets of slots, and the wrapped
//! policy sees main slots under its own numbering (`0..main capacity`), mapped to the cache's.

use super::policy::{Links, Policy, NIL};

/// A count-min sketch of 4-bit counters (kept in bytes) with halving: TinyLFU's frequency
/// estimate. Four counters per row, in four arrays of a power-of-two width; the estimate is their
/// minimum, which over-counts only on collisions.
#[derive(Clone, Default)]
pub struct FrequencySketch {
    counters: Vec<u8>,
    mask: usize,
    additions: usize,
    sample: usize,
}

const DEPTH: usize = 4;
const MAX_COUNT: u8 = 15;
const SEEDS: [u64; DEPTH] = [0x9e37_79b9_7f4a_7c15, 0xc2b2_ae3d_27d4_eb4f, 0x1656_67b1_9e37_79f9, 0x85eb_ca77_c2b2_ae63];

impl FrequencySketch {
    /// A sketch for a cache of `capacity` rows: `capacity` (rounded up to a power of two, at
    /// least 16) counters per array, halved every `10 × capacity` increments.
    pub fn new(capacity: usize) -> FrequencySketch {
        let width = capacity.max(16).next_power_of_two();
        FrequencySketch { counters: vec![0; DEPTH * width], mask: width - 1, additions: 0, sample: 10 * capacity.max(1) }
    }

    /// Bytes of its counters.
    pub fn bytes(&self) -> usize {
        super::policy::vec_bytes(&self.counters)
    }

    #[inline]
    fn index(&self, row: u32, d: usize) -> usize {
        // A multiply-xorshift mix per array (splitmix64's finaliser with its own seed).
        let mut h = (row as u64 ^ SEEDS[d]).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 31;
        h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 29;
        d * (self.mask + 1) + (h as usize & self.mask)
    }

    /// Counts one lookup of `row`; every `10 × capacity` of them, halves every counter.
    pub fn increment(&mut self, row: u32) {
        if self.counters.is_empty() {
            return;
        }
        let mut added = false;
        for d in 0..DEPTH {
            let i = self.index(row, d);
            if self.counters[i] < MAX_COUNT {
                self.counters[i] += 1;
                added = true;
            }
        }
        if added {
            self.additions += 1;
            if self.additions >= self.sample {
                for c in &mut self.counters {
                    *c /= 2;
                }
                self.additions /= 2;
            }
        }
    }

    /// The estimated lookups of `row` (at most 15) since the counters were last halved, about.
    pub fn frequency(&self, row: u32) -> u8 {
        (0..DEPTH).map(|d| self.counters.get(self.index(row, d)).copied().unwrap_or(0)).min().unwrap_or(0)
    }
}

/// W-TinyLFU admission in front of any [`Policy`]: see the module's documentation.
/// `TinyLfu::new(Box::new(Lru::default()))` is Caffeine's design with an LRU main part. The
/// wrapped policy must answer [`Policy::victim`] (edo's own do); with one that does not, rows
/// reach main only while it has room, or when they are read while they wait in the window.
pub struct TinyLfu {
    inner: Box<dyn Policy>,
    name: String,
    sketch: FrequencySketch,
    capacity: usize,
    /// The window's target size; main's is the rest.
    window_target: usize,
    /// The window's slots, most recent first.
    links: Links,
    window: super::policy::Ends,
    in_window: Vec<bool>,
    /// Row per cache slot (NIL when empty).
    row: Vec<u32>,
    /// Main: the inner policy's slot → the cache's slot, and back (NIL outside main). The inner
    /// policy has `capacity` slots of its own and is kept at most `capacity − window_target` full.
    phys: Vec<u32>,
    logical: Vec<u32>,
    free_logical: Vec<u32>,
    /// Misses of the part being assembled, and the most of any part in this sample.
    part_misses: usize,
    sample_part_misses: usize,
    /// The hill climber: lookups and hits of this sample, the last sample's hit rate, the step
    /// (signed: + grows the window) in slots.
    sample_lookups: usize,
    sample_hits: usize,
    last_rate: Option<f64>,
    step: f64,
}

impl TinyLfu {
    /// `inner` behind a window and a frequency sketch.
    pub fn new(inner: Box<dyn Policy>) -> TinyLfu {
        let name = format!("{}+tinylfu", inner.name());
        TinyLfu {
            inner,
            name,
            sketch: FrequencySketch::default(),
            capacity: 0,
            window_target: 0,
            links: Links::default(),
            window: Default::default(),
            in_window: Vec::new(),
            row: Vec::new(),
            phys: Vec::new(),
            logical: Vec::new(),
            free_logical: Vec::new(),
            part_misses: 0,
            sample_part_misses: 0,
            sample_lookups: 0,
            sample_hits: 0,
            last_rate: None,
            step: 0.0,
        }
    }

    /// The window's size now (it adapts; see the module's documentation).
    pub fn window_size(&self) -> usize {
        self.window_target
    }

    fn main_target(&self) -> usize {
        self.capacity - self.window_target
    }

    fn main_len(&self) -> usize {
        self.capacity - self.free_logical.len()
    }

    /// Empties every structure for `capacity` slots; the sketch is kept.
    fn clear(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.window_target = if capacity < 2 { 0 } else { (capacity / 100).max(1) };
        self.inner.reset(capacity);
        self.links = Links::new(capacity);
        self.window = Default::default();
        self.in_window = vec![false; capacity];
        self.row = vec![NIL; capacity];
        self.phys = vec![NIL; capacity];
        self.logical = vec![NIL; capacity];
        self.free_logical = (0..capacity as u32).rev().collect();
        self.part_misses = 0;
        self.sample_part_misses = 0;
        self.sample_lookups = 0;
        self.sample_hits = 0;
        self.last_rate = None;
        self.step = capacity as f64 / 16.0;
    }

    fn push_window(&mut self, slot: u32, row: u32) {
        self.row[slot as usize] = row;
        self.in_window[slot as usize] = true;
        self.links.push_front(&mut self.window, slot);
    }

    fn leave_window(&mut self, slot: u32) {
        self.links.unlink(&mut self.window, slot);
        self.in_window[slot as usize] = false;
    }

    /// Moves window slot `slot` into main. With `evict`, main is at its target and evicts its own
    /// victim, whose cache slot is returned (its row leaves the cache); else main has room.
    fn promote(&mut self, slot: u32, evict: bool, pinned: &dyn Fn(u32) -> bool) -> Option<u32> {
        self.leave_window(slot);
        let row = self.row[slot as usize];
        let free = if evict { None } else { self.free_logical.pop() };
        let phys = &self.phys;
        let l = self.inner.admit(row, free, &|l| pinned(phys[l as usize]));
        let evicted = match free {
            None => {
                let e = self.phys[l as usize];
                self.logical[e as usize] = NIL;
                self.row[e as usize] = NIL;
                Some(e)
            }
            Some(_) => None,
        };
        self.phys[l as usize] = slot;
        self.logical[slot as usize] = l;
        evicted
    }

    /// Moves rows between the window and main (no row leaves the cache) until each is at its
    /// target or the other has nothing to give: the window's oldest rows go to main while main
    /// has room; main's victims join the window's old end while main is over its target.
    fn rebalance(&mut self) {
        while self.window.len > self.window_target && self.main_len() < self.main_target() {
            let oldest = self.window.tail;
            self.promote(oldest, false, &|_| false);
        }
        while self.main_len() > self.main_target() {
            let Some(l) = self.inner.victim(NIL, &|_| false) else { break };
            self.inner.remove(l);
            self.free_logical.push(l);
            let slot = self.phys[l as usize];
            self.phys[l as usize] = NIL;
            self.logical[slot as usize] = NIL;
            // The window's old end: the next candidate to weigh against main.
            self.in_window[slot as usize] = true;
            self.links.push_back(&mut self.window, slot);
        }
    }

    /// Counts a lookup for the hill climber; at the end of a sample, moves the window's target.
    fn sample(&mut self, hit: bool) {
        self.sample_lookups += 1;
        self.sample_hits += hit as usize;
        if self.sample_lookups < 10 * self.capacity || self.capacity < 2 {
            return;
        }
        let rate = self.sample_hits as f64 / self.sample_lookups as f64;
        if let Some(last) = self.last_rate {
            if rate < last {
                self.step = -self.step;
            }
            self.step *= 0.98;
            if self.step.abs() < 1.0 {
                self.step = self.step.signum();
            }
        }
        self.last_rate = Some(rate);
        let floor = self.sample_part_misses.clamp(1, self.capacity - 1);
        let target = (self.window_target as f64 + self.step).round().clamp(1.0, (self.capacity - 1) as f64) as usize;
        self.window_target = target.max(floor);
        self.sample_lookups = 0;
        self.sample_hits = 0;
        self.sample_part_misses = 0;
    }
}

impl Policy for TinyLfu {
    fn name(&self) -> &str {
        &self.name
    }

    fn bytes(&self) -> usize {
        use super::policy::vec_bytes;
        self.inner.bytes()
            + self.sketch.bytes()
            + self.links.bytes()
            + vec_bytes(&self.in_window)
            + vec_bytes(&self.row)
            + vec_bytes(&self.phys)
            + vec_bytes(&self.logical)
            + vec_bytes(&self.free_logical)
    }

    fn reset(&mut self, capacity: usize) {
        self.sketch = FrequencySketch::new(capacity);
        self.clear(capacity);
    }

    fn begin_part(&mut self) {
        self.inner.begin_part();
        self.sample_part_misses = self.sample_part_misses.max(self.part_misses);
        if self.capacity >= 2 && self.part_misses > self.window_target {
            // The last part's misses did not fit the window: widen it now, not at the sample's end.
            self.window_target = self.part_misses.min(self.capacity - 1);
        }
        self.part_misses = 0;
    }

    fn prefetch(&self, slot: u32) {
        if let (Some(row), Some(logical)) = (self.row.get(slot as usize), self.logical.get(slot as usize)) {
            crate::cpu::prefetch(std::slice::from_ref(row));
            crate::cpu::prefetch(std::slice::from_ref(logical));
            self.links.prefetch(slot);
        }
    }

    fn hit(&mut self, slot: u32) {
        self.sketch.increment(self.row[slot as usize]);
        self.sample(true);
        if self.in_window[slot as usize] {
            self.links.unlink(&mut self.window, slot);
            self.links.push_front(&mut self.window, slot);
        } else {
            self.inner.hit(self.logical[slot as usize]);
        }
    }

    fn admit(&mut self, row: u32, free: Option<u32>, pinned: &dyn Fn(u32) -> bool) -> u32 {
        self.sketch.increment(row);
        self.sample(false);
        self.part_misses += 1;
        if self.window_target == 0 {
            // One slot: no window, the inner policy alone.
            let f = self.free_logical.pop();
            let phys = &self.phys;
            let l = self.inner.admit(row, f, &|l| pinned(phys[l as usize]));
            let slot = free.unwrap_or(self.phys[l as usize]);
            self.phys[l as usize] = slot;
            self.logical[slot as usize] = l;
            self.row[slot as usize] = row;
            return slot;
        }
        self.rebalance();
        if let Some(f) = free {
            if self.window.len >= self.window_target && self.main_len() < self.main_target() {
                // The window's oldest goes to main, which has room.
                let oldest = self.window.tail;
                self.promote(oldest, false, pinned);
            }
            self.push_window(f, row);
            return f;
        }
        // Full: the window's oldest row is the candidate for main.
        let candidate = self.window.tail;
        let candidate_pinned = pinned(candidate);
        let phys = &self.phys;
        let victim = self.inner.victim(self.row[candidate as usize], &|l| pinned(phys[l as usize])).map(|l| self.phys[l as usize]);
        // Main's victim is always unpinned; a pinned candidate (read by this part) cannot leave,
        // so it goes to main whatever its count.
        let admit =
            victim.is_some_and(|v| candidate_pinned || self.sketch.frequency(self.row[candidate as usize]) > self.sketch.frequency(self.row[v as usize]));
        // Otherwise the candidate leaves — or, when it is pinned, the window's oldest unpinned row.
        let out = match admit {
            true => None,
            false if !candidate_pinned => Some(candidate),
            false => self.links.oldest(&self.window, pinned),
        };
        let slot = match out {
            Some(out) => {
                self.leave_window(out);
                self.row[out as usize] = NIL;
                out
            }
            // Promoted (or, with a policy that cannot tell its victim, nothing in the window may
            // leave): main evicts a row of its own.
            None => self.promote(candidate, true, pinned).expect("a full main part evicts a row"),
        };
        self.push_window(slot, row);
        slot
    }

    fn remove(&mut self, slot: u32) {
        let i = slot as usize;
        if self.row[i] == NIL {
            return;
        }
        if self.in_window[i] {
            self.leave_window(slot);
        } else {
            let l = self.logical[i];
            self.inner.remove(l);
            self.phys[l as usize] = NIL;
            self.logical[i] = NIL;
            self.free_logical.push(l);
        }
        self.row[i] = NIL;
    }

    fn resize(&mut self, capacity: usize) {
        // The cache emptied the slots past the end. What stays is refiled: main's rows first, then
        // the window's, oldest first; the sketch keeps its counts (it is rebuilt when it grows).
        let mut keep: Vec<(u32, u32)> = self.phys.iter().filter(|&&s| s != NIL).map(|&s| (s, self.row[s as usize])).collect();
        let main_rows = keep.len();
        let mut w = self.window.tail;
        while w != NIL {
            keep.push((w, self.row[w as usize]));
            w = self.links.prev(w);
        }
        if capacity.max(16).next_power_of_two() != self.sketch.mask + 1 {
            self.sketch = FrequencySketch::new(capacity);
        }
        let window_target = self.window_target;
        self.clear(capacity);
        if capacity >= 2 {
            self.window_target = window_target.clamp(1, capacity - 1);
        }
        for (k, (slot, row)) in keep.into_iter().enumerate() {
            if k < main_rows && self.main_len() < self.main_target() {
                let l = self.free_logical.pop().expect("main has room");
                let got = self.inner.admit(row, Some(l), &|_| false);
                debug_assert_eq!(got, l);
                self.phys[l as usize] = slot;
                self.logical[slot as usize] = l;
                self.row[slot as usize] = row;
            } else {
                self.push_window(slot, row);
            }
        }
        self.rebalance();
    }
}
