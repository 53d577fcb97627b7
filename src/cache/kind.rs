//! The built-in policies by name: what `edo bench cache --policies` and the browser package's
//! `cache(…, policy)` take.

use super::{Adaptive, Lfu, Lru, Policy, TinyLfu};

/// The built-in policies, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    /// Least recently used.
    Lru,
    /// Least frequently used, with a bounded, aged history of counts that survives eviction.
    Lfu,
    /// Adaptive Replacement Cache (Megiddo & Modha, FAST 2003).
    Arc,
    /// LRU behind W-TinyLFU admission ([`TinyLfu`]): Caffeine's design, with an LRU main part.
    LruTinyLfu,
    /// LFU behind W-TinyLFU admission.
    LfuTinyLfu,
    /// ARC behind W-TinyLFU admission.
    ArcTinyLfu,
}

impl PolicyKind {
    /// Every policy edo has.
    pub const ALL: [PolicyKind; 6] =
        [PolicyKind::Lru, PolicyKind::Lfu, PolicyKind::Arc, PolicyKind::LruTinyLfu, PolicyKind::LfuTinyLfu, PolicyKind::ArcTinyLfu];

    /// The policy's name ("lru", "lfu", "arc", and "lru+tinylfu" … behind admission).
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Lru => "lru",
            PolicyKind::Lfu => "lfu",
            PolicyKind::Arc => "arc",
            PolicyKind::LruTinyLfu => "lru+tinylfu",
            PolicyKind::LfuTinyLfu => "lfu+tinylfu",
            PolicyKind::ArcTinyLfu => "arc+tinylfu",
        }
    }

    /// Parses [`PolicyKind::name`].
    pub fn from_name(name: &str) -> Option<PolicyKind> {
        PolicyKind::ALL.into_iter().find(|k| k.name().eq_ignore_ascii_case(name))
    }

    /// The most bytes a policy of this kind holds per slot of its capacity, beyond a few
    /// kilobytes: its arrays over slots (and ARC's over as many ghosts), W-TinyLFU's frequency
    /// sketch, and LFU's eviction order at one entry a slot. Not what LFU remembers of evicted
    /// rows (their counts, at most `8 × capacity + 4096` of them before they are aged), nor
    /// stale order entries left by removals, which [`Policy::bytes`] counts as they come.
    pub fn slot_bytes(self) -> usize {
        // Lists are two u32 a node; an index or row is a u32; an LFU key (count, last use) 16
        // bytes; a B-tree entry of 16 bytes at most 58 with its node's share; a hash map entry
        // of 8 bytes at most 21 (two buckets over 7/8, a control byte each).
        const LRU: usize = 8;
        const LFU: usize = 4 + 16 + 4 + 58;
        const ARC: usize = 8 + 1 + 4 + 8 + 4 + 1 + 4 + 21;
        // Window links, in-window flags, row, the two slot maps and the free list; the sketch's
        // four counters a slot, its width rounded up to a power of two.
        const TINY_LFU: usize = 8 + 1 + 4 + 4 + 4 + 4 + 8;
        match self {
            PolicyKind::Lru => LRU,
            PolicyKind::Lfu => LFU,
            PolicyKind::Arc => ARC,
            PolicyKind::LruTinyLfu => TINY_LFU + LRU,
            PolicyKind::LfuTinyLfu => TINY_LFU + LFU,
            PolicyKind::ArcTinyLfu => TINY_LFU + ARC,
        }
    }

    /// A fresh policy of this kind.
    pub fn build(self) -> Box<dyn Policy> {
        match self {
            PolicyKind::Lru => Box::new(Lru::default()),
            PolicyKind::Lfu => Box::new(Lfu::default()),
            PolicyKind::Arc => Box::new(Adaptive::default()),
            PolicyKind::LruTinyLfu => Box::new(TinyLfu::new(PolicyKind::Lru.build())),
            PolicyKind::LfuTinyLfu => Box::new(TinyLfu::new(PolicyKind::Lfu.build())),
            PolicyKind::ArcTinyLfu => Box::new(TinyLfu::new(PolicyKind::Arc.build())),
        }
    }
}

impl std::fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
