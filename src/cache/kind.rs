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
