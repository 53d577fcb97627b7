//! A live table's index: 64-bit keys to slots in an open-addressing table (linear probing from
//! [`bucket_hash`] of the key), laid out as the GPU's probe kernel reads it (`live_probe.wgsl`),
//! so the host and a GPU copy look keys up in the same words.
//!
//! A bucket is four u32s: the key's low and high words, its slot, and a zero. The slot word also
//! marks a bucket [`EMPTY`] (a probe stops there) or a [`TOMBSTONE`] (a removed key: a probe
//! goes on past it, an insertion may reuse it). The table is a power of two of buckets, at most
//! 5/8 of them used or tombstones, so probes stay short (under two buckets for a key held, on
//! average) and always meet an empty bucket; 16 bytes a bucket is 26–51 bytes a key held.

/// The slot word of a bucket never used.
pub(crate) const EMPTY: u32 = u32::MAX;
/// The slot word of a bucket whose key was removed.
pub(crate) const TOMBSTONE: u32 = u32::MAX - 1;

/// Buckets at the least (a power of two).
const MIN_BUCKETS: usize = 16;
/// Keys ahead whose buckets [`KeyIndex::get_each`] prefetches.
const AHEAD: usize = 8;

/// The hash a key's probe starts from (its low bits): the key's two words folded into one and
/// mixed by MurmurHash3's finalizer — 32-bit arithmetic, as WGSL has (`live_probe.wgsl` computes
/// the same), and a third of MurmurHash3's time, which dominated lookups of keys in cache.
#[inline(always)]
pub(crate) fn bucket_hash(key: u64) -> u32 {
    let (lo, hi) = (key as u32, (key >> 32) as u32);
    let mut h = (lo ^ hi.wrapping_mul(0x9e37_79b1)).wrapping_mul(0x85eb_ca6b);
    h ^= h >> 15;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// What changed in the buckets since [`KeyIndex::take_changes`] was last called, for a copy of
/// them to catch up.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(not(all(native, feature = "gpu")), allow(dead_code))]
pub(crate) enum Changes {
    /// Nothing.
    None,
    /// These buckets (ascending, each once).
    Buckets(Vec<u32>),
    /// The table was rebuilt (another size, or its tombstones cleared): copy it whole.
    All,
}

/// Keys to slots: see the [module documentation](self).
#[derive(Clone, Debug)]
pub(crate) struct KeyIndex {
    buckets: Vec<[u32; 4]>,
    len: usize,
    tombstones: usize,
    /// Buckets written since the last `take_changes`; `None` once rebuilt.
    changed: Option<Vec<u32>>,
}

impl Default for KeyIndex {
    fn default() -> Self {
        KeyIndex::with_capacity(0)
    }
}

impl KeyIndex {
    /// An empty index with room for `keys` keys before it is rebuilt.
    pub(crate) fn with_capacity(keys: usize) -> KeyIndex {
        KeyIndex { buckets: vec![[0, 0, EMPTY, 0]; Self::buckets_for(keys)], len: 0, tombstones: 0, changed: None }
    }

    /// Buckets for `keys` keys: a power of two over twice as many, so that a rebuild at 5/8
    /// doubles the table.
    fn buckets_for(keys: usize) -> usize {
        keys.saturating_mul(2).saturating_add(2).next_power_of_two().max(MIN_BUCKETS)
    }

    /// Whether `taken` buckets (keys and tombstones) are past the 5/8 that rebuilds the table.
    fn too_full(&self, taken: usize) -> bool {
        taken.saturating_mul(8) > self.buckets.len() * 5
    }

    /// Bytes it holds: its buckets, and the list of those changed.
    pub(crate) fn bytes(&self) -> usize {
        self.buckets.capacity() * 16 + self.changed.as_ref().map_or(0, |c| c.capacity() * 4)
    }

    /// The most bytes an index holds while it has held at most `keys` keys: it is rebuilt only
    /// to [`KeyIndex::buckets_for`] its keys, and the list of changed buckets is dropped past a
    /// quarter of them (its allocation at most twice that).
    pub(crate) fn max_bytes(keys: usize) -> usize {
        Self::buckets_for(keys) * (16 + 2)
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The bucket index mask (buckets − 1).
    #[cfg_attr(not(all(native, feature = "gpu")), allow(dead_code))]
    pub(crate) fn mask(&self) -> u32 {
        (self.buckets.len() - 1) as u32
    }

    /// The buckets as u32 words, four a bucket.
    pub(crate) fn words(&self) -> &[u32] {
        self.buckets.as_flattened()
    }

    fn start(&self, key: u64) -> usize {
        bucket_hash(key) as usize & (self.buckets.len() - 1)
    }

    /// The bucket holding `key`, if any.
    fn find(&self, key: u64) -> Option<usize> {
        self.find_from(key, self.start(key))
    }

    /// [`KeyIndex::find`] from bucket `i`, the key's start.
    fn find_from(&self, key: u64, mut i: usize) -> Option<usize> {
        let (lo, hi) = (key as u32, (key >> 32) as u32);
        let mask = self.buckets.len() - 1;
        // At most 5/8 of the buckets are taken, so the probe meets an empty one.
        loop {
            let [l, h, slot, _] = self.buckets[i];
            if slot == EMPTY {
                return None;
            }
            if slot != TOMBSTONE && l == lo && h == hi {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The slot of `key`.
    pub(crate) fn get(&self, key: u64) -> Option<u32> {
        self.find(key).map(|i| self.buckets[i][2])
    }

    /// The slots of `keys` in order, each given to `f(position, slot)` until it returns `false`.
    /// In a batch of more than a few keys the buckets of keys [`AHEAD`] places on are
    /// prefetched, so that the cache misses of a large batch overlap.
    pub(crate) fn get_each(&self, keys: &[u64], mut f: impl FnMut(usize, Option<u32>) -> bool) {
        let slot = |b: usize| self.buckets[b][2];
        if keys.len() <= 2 * AHEAD {
            for (i, &key) in keys.iter().enumerate() {
                if !f(i, self.find(key).map(slot)) {
                    return;
                }
            }
            return;
        }
        // The starts of the next AHEAD keys, each computed once, its bucket prefetched.
        let mut starts = [0usize; AHEAD];
        let ahead = |k: u64| {
            let b = self.start(k);
            crate::cpu::prefetch(&self.words()[4 * b..4 * b + 4]);
            b
        };
        for (s, &k) in starts.iter_mut().zip(keys) {
            *s = ahead(k);
        }
        for (i, &key) in keys.iter().enumerate() {
            let start = starts[i % AHEAD];
            if let Some(&next) = keys.get(i + AHEAD) {
                starts[i % AHEAD] = ahead(next);
            }
            if !f(i, self.find_from(key, start).map(slot)) {
                return;
            }
        }
    }

    /// Whether the index holds `key`.
    pub(crate) fn contains_key(&self, key: u64) -> bool {
        self.find(key).is_some()
    }

    /// Every key and its slot, in bucket order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.buckets.iter().filter(|b| b[2] < TOMBSTONE).map(|b| (u64::from(b[0]) | u64::from(b[1]) << 32, b[2]))
    }

    fn mark(&mut self, i: usize) {
        if let Some(changed) = &mut self.changed {
            changed.push(i as u32);
            // Past a quarter of the buckets a whole copy is as cheap, and the list stays bounded
            // when nobody takes the changes (no GPU copy).
            if changed.len() > self.buckets.len() / 4 {
                self.changed = None;
            }
        }
    }

    /// Maps `key` to `slot` (below [`TOMBSTONE`]), replacing its slot if it is held; returns the
    /// slot it had. One probe: to the key, or to an empty bucket (a new key takes the first
    /// tombstone on the way, if any).
    pub(crate) fn insert(&mut self, key: u64, slot: u32) -> Option<u32> {
        debug_assert!(slot < TOMBSTONE, "slot {slot} collides with the bucket markers");
        let (lo, hi) = (key as u32, (key >> 32) as u32);
        let mask = self.buckets.len() - 1;
        let mut i = self.start(key);
        let mut tombstone = None;
        loop {
            let [l, h, s, _] = self.buckets[i];
            if s == EMPTY {
                break;
            }
            if s == TOMBSTONE {
                tombstone = tombstone.or(Some(i));
            } else if l == lo && h == hi {
                self.mark(i);
                return Some(std::mem::replace(&mut self.buckets[i][2], slot));
            }
            i = (i + 1) & mask;
        }
        let at = match tombstone {
            Some(t) => {
                self.tombstones -= 1;
                t
            }
            None if self.too_full(self.len + self.tombstones + 1) => {
                self.rebuild(self.len + 1);
                self.first_empty(key)
            }
            None => i,
        };
        self.buckets[at] = [lo, hi, slot, 0];
        self.len += 1;
        self.mark(at);
        None
    }

    /// Removes `key`; returns its slot.
    pub(crate) fn remove(&mut self, key: u64) -> Option<u32> {
        let i = self.find(key)?;
        let slot = std::mem::replace(&mut self.buckets[i], [0, 0, TOMBSTONE, 0])[2];
        self.len -= 1;
        self.tombstones += 1;
        self.mark(i);
        Some(slot)
    }

    /// The first empty bucket of `key`'s probe, in a table without tombstones on the way (just
    /// rebuilt).
    fn first_empty(&self, key: u64) -> usize {
        let mask = self.buckets.len() - 1;
        let mut i = self.start(key);
        while self.buckets[i][2] != EMPTY {
            i = (i + 1) & mask;
        }
        i
    }

    /// Rehashes every key into a table sized for `keys`, without tombstones.
    fn rebuild(&mut self, keys: usize) {
        let old = std::mem::replace(&mut self.buckets, vec![[0, 0, EMPTY, 0]; Self::buckets_for(keys.max(self.len))]);
        for b in old.into_iter().filter(|b| b[2] < TOMBSTONE) {
            let i = self.first_empty(u64::from(b[0]) | u64::from(b[1]) << 32);
            self.buckets[i] = b;
        }
        self.tombstones = 0;
        self.changed = None;
    }

    /// What changed since the last call (the first call says [`Changes::All`]), and starts
    /// recording again.
    #[cfg_attr(not(all(native, feature = "gpu")), allow(dead_code))]
    pub(crate) fn take_changes(&mut self) -> Changes {
        match self.changed.replace(Vec::new()) {
            None => Changes::All,
            Some(v) if v.is_empty() => Changes::None,
            Some(mut v) => {
                v.sort_unstable();
                v.dedup();
                Changes::Buckets(v)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    /// Random inserts, replacements and removals against a hash map: the same answers, the
    /// tombstones reused and cleared, and the changes reported cover every bucket written.
    #[test]
    fn answers_as_a_hash_map_does_through_inserts_removals_and_rebuilds() {
        let mut index = KeyIndex::default();
        let mut oracle = FxHashMap::default();
        let mut copy = index.words().to_vec();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for step in 0..60_000u32 {
            // Keys from a small range (so they repeat and are removed) with high words set.
            let key = (next() % 3000) | (next() % 4) << 40;
            match next() % 3 {
                0 | 1 => assert_eq!(index.insert(key, step % 1_000_000), oracle.insert(key, step % 1_000_000), "insert {key}"),
                _ => assert_eq!(index.remove(key), oracle.remove(&key), "remove {key}"),
            }
            assert_eq!(index.len(), oracle.len());
            if step % 997 == 0 {
                // A copy kept by the reported changes equals the index.
                match index.take_changes() {
                    Changes::All => copy = index.words().to_vec(),
                    Changes::Buckets(b) => {
                        for i in b {
                            let i = 4 * i as usize;
                            copy[i..i + 4].copy_from_slice(&index.words()[i..i + 4]);
                        }
                    }
                    Changes::None => {}
                }
                assert_eq!(copy, index.words(), "the copy after step {step}");
                for probe in 0..3000u64 {
                    for hi in 0..4 {
                        let k = probe | hi << 40;
                        assert_eq!(index.get(k), oracle.get(&k).copied(), "get {k}");
                    }
                }
                let batch: Vec<u64> = (0..100).map(|i| ((i * 31) % 3000) | ((i % 4) << 40)).collect();
                index.get_each(&batch, |i, slot| {
                    assert_eq!(slot, oracle.get(&batch[i]).copied(), "get_each {}", batch[i]);
                    true
                });
                let mut listed: Vec<(u64, u32)> = index.iter().collect();
                listed.sort_unstable();
                let mut expected: Vec<(u64, u32)> = oracle.iter().map(|(&k, &s)| (k, s)).collect();
                expected.sort_unstable();
                assert_eq!(listed, expected);
            }
            // At most 5/8 of the buckets taken: every probe ends.
            assert!(!index.too_full(index.len + index.tombstones));
        }
    }

    #[test]
    fn a_fresh_index_reports_a_whole_copy_then_nothing() {
        let mut index = KeyIndex::with_capacity(100);
        assert_eq!(index.take_changes(), Changes::All);
        assert_eq!(index.take_changes(), Changes::None);
        index.insert(7, 3);
        index.insert(7, 4);
        assert!(matches!(index.take_changes(), Changes::Buckets(b) if b.len() == 1));
        assert_eq!(index.get(7), Some(4));
        assert_eq!(index.mask() as usize + 1, 256);
    }
}
