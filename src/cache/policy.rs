//! Replacement policies: which cached row to evict when a missing row needs a slot.
//!
//! A policy sees slots (`0..capacity`) and the rows loaded into them. Lists are intrusive
//! (index-linked arrays over slots), so a hit is O(1) for every policy, an eviction O(1) for LRU
//! and ARC and O(log capacity) amortised for LFU, with no allocation per lookup.

use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// Decides which row a cache evicts. One trait serves the built-in policies ([`Lru`], [`Lfu`],
/// [`Adaptive`], ARC; [`super::TinyLfu`] admission in front of any of them) and any a caller writes.
///
/// The cache calls [`Policy::hit`] for every looked-up id whose row is cached and
/// [`Policy::admit`] for every one whose row is not; the policy answers with the slot the row
/// goes to. Slots the current batch already uses are *pinned*: evicting one would change rows the
/// batch reads, so `admit` must not return one. A part of a batch starts with
/// [`Policy::begin_part`]; the slots named by `hit` and returned by `admit` since then are the
/// pinned ones (the `pinned` argument of `admit` tells the same, for policies that do not track it).
pub trait Policy: Send {
    /// A short name for reports ("lru").
    fn name(&self) -> &str;
    /// Prepares for a cache of `capacity` slots (≥ 1), forgetting everything.
    fn reset(&mut self, capacity: usize);
    /// A new part of a batch begins: no slot is pinned any more.
    fn begin_part(&mut self) {}
    /// The row in `slot` was looked up.
    fn hit(&mut self, slot: u32);
    /// A hint that [`Policy::hit`] of `slot` comes soon: the policy may ask the CPU to fetch
    /// what that hit will touch, so that the cache misses of many hits overlap. Changes nothing.
    fn prefetch(&self, slot: u32) {
        let _ = slot;
    }
    /// A later hint for the same hit, once what [`Policy::prefetch`] asked for has arrived: the
    /// policy may follow it (a list's neighbours) and fetch what that leads to.
    fn prefetch_again(&self, slot: u32) {
        let _ = slot;
    }
    /// `row` was looked up and is not cached. Returns the slot to load it into: `free` when it is
    /// `Some` (the cache is not full yet), else an occupied slot for which `pinned` is false,
    /// whose row is evicted. The cache calls this only when such a slot exists.
    fn admit(&mut self, row: u32, free: Option<u32>, pinned: &dyn Fn(u32) -> bool) -> u32;
    /// The cache emptied `slot` (rows invalidated, a failed load): forget its row.
    fn remove(&mut self, slot: u32);
    /// The cache now has `capacity` slots (≥ 1): slots past it were emptied with
    /// [`Policy::remove`] first; new slots are empty. What the policy learnt is kept where it can be.
    fn resize(&mut self, capacity: usize);
    /// The occupied, unpinned slot that `admit(row, None, pinned)` would evict now, or `None`
    /// when there is none or the policy cannot tell. It may tidy the policy's own bookkeeping but
    /// changes no decision. An admission filter ([`super::TinyLfu`]) asks it, to weigh the row it would
    /// evict against the one that would come in.
    fn victim(&mut self, row: u32, pinned: &dyn Fn(u32) -> bool) -> Option<u32> {
        let _ = (row, pinned);
        None
    }
    /// Bytes of memory the policy's state holds now (its arrays over slots, and what it
    /// remembers of evicted rows), for memory reports; 0 where a policy does not say.
    fn bytes(&self) -> usize {
        0
    }
}

pub(super) const NIL: u32 = u32::MAX;

/// Bytes of `v`'s allocation.
pub(crate) fn vec_bytes<T>(v: &Vec<T>) -> usize {
    v.capacity() * std::mem::size_of::<T>()
}

/// Bytes of a hash map's table: a power of two of buckets over its capacity (at 7/8 load), each
/// an entry and a control byte, as hashbrown lays it out.
pub(super) fn map_bytes<K, V>(m: &FxHashMap<K, V>) -> usize {
    match m.capacity() {
        0 => 0,
        c => (c * 8 / 7).next_power_of_two() * (std::mem::size_of::<(K, V)>() + 1),
    }
}

/// Bytes of a B-tree set, at most: nodes of up to 11 entries at least half full, each with its
/// header and, for internal nodes, 12 child pointers.
fn btree_bytes<T>(s: &BTreeSet<T>) -> usize {
    s.len().div_ceil(5) * (11 * std::mem::size_of::<T>() + 16 + 12 * 8)
}

/// `v` resized to `n` (filled with `x`), its allocation exactly `n` when it grows: slot arrays
/// that double with a table would otherwise keep twice the room they use.
pub(crate) fn resize_exact<T: Clone>(v: &mut Vec<T>, n: usize, x: T) {
    if n > v.len() {
        v.reserve_exact(n - v.len());
    }
    v.resize(n, x);
}

/// Doubly linked lists threaded through node indices; several lists may share one `Links` as
/// long as each node is in at most one of them.
#[derive(Clone, Default)]
pub(super) struct Links {
    /// Each node's previous and next node (NIL at a list's end), side by side: a hit reads and
    /// writes both, and an unlink its two neighbours', one cache line each.
    nodes: Vec<[u32; 2]>,
}

const PREV: usize = 0;
const NEXT: usize = 1;

/// One list over a [`Links`]: `head` is the most recent node, `tail` the least recent.
#[derive(Clone, Copy)]
pub(super) struct Ends {
    head: u32,
    pub(super) tail: u32,
    pub(super) len: usize,
}

impl Default for Ends {
    fn default() -> Self {
        Ends { head: NIL, tail: NIL, len: 0 }
    }
}

impl Links {
    pub(super) fn new(nodes: usize) -> Links {
        Links { nodes: vec![[NIL; 2]; nodes] }
    }

    pub(super) fn bytes(&self) -> usize {
        vec_bytes(&self.nodes)
    }

    /// Node `i`'s previous node.
    pub(super) fn prev(&self, i: u32) -> u32 {
        self.nodes[i as usize][PREV]
    }

    /// Prefetches node `i`'s links.
    pub(super) fn prefetch(&self, i: u32) {
        if let Some(links) = self.nodes.get(i as usize) {
            crate::cpu::prefetch(links);
        }
    }

    /// Prefetches the links of node `i`'s neighbours (which unlinking it writes).
    pub(super) fn prefetch_neighbours(&self, i: u32) {
        if let Some(&[p, n]) = self.nodes.get(i as usize) {
            for j in [p, n] {
                if let Some(links) = self.nodes.get(j as usize) {
                    crate::cpu::prefetch(links);
                }
            }
        }
    }

    pub(super) fn resize(&mut self, nodes: usize) {
        resize_exact(&mut self.nodes, nodes, [NIL; 2]);
    }

    pub(super) fn push_front(&mut self, list: &mut Ends, i: u32) {
        self.nodes[i as usize] = [NIL, list.head];
        if list.head != NIL {
            self.nodes[list.head as usize][PREV] = i;
        } else {
            list.tail = i;
        }
        list.head = i;
        list.len += 1;
    }

    pub(super) fn push_back(&mut self, list: &mut Ends, i: u32) {
        self.nodes[i as usize] = [list.tail, NIL];
        if list.tail != NIL {
            self.nodes[list.tail as usize][NEXT] = i;
        } else {
            list.head = i;
        }
        list.tail = i;
        list.len += 1;
    }

    pub(super) fn unlink(&mut self, list: &mut Ends, i: u32) {
        let [p, n] = self.nodes[i as usize];
        if p != NIL {
            self.nodes[p as usize][NEXT] = n;
        } else {
            list.head = n;
        }
        if n != NIL {
            self.nodes[n as usize][PREV] = p;
        } else {
            list.tail = p;
        }
        self.nodes[i as usize] = [NIL; 2];
        list.len -= 1;
    }

    /// The least recent node of `list` for which `skip` is false.
    pub(super) fn oldest(&self, list: &Ends, skip: &dyn Fn(u32) -> bool) -> Option<u32> {
        let mut i = list.tail;
        while i != NIL {
            if !skip(i) {
                return Some(i);
            }
            i = self.prev(i);
        }
        None
    }
}

/// Least recently used: evicts the row whose last lookup is oldest.
#[derive(Default)]
pub struct Lru {
    links: Links,
    list: Ends,
}

impl Policy for Lru {
    fn name(&self) -> &str {
        "lru"
    }
    fn reset(&mut self, capacity: usize) {
        self.links = Links::new(capacity);
        self.list = Ends::default();
    }
    fn hit(&mut self, slot: u32) {
        self.links.unlink(&mut self.list, slot);
        self.links.push_front(&mut self.list, slot);
    }
    fn prefetch(&self, slot: u32) {
        self.links.prefetch(slot);
    }
    fn prefetch_again(&self, slot: u32) {
        self.links.prefetch_neighbours(slot);
    }
    fn admit(&mut self, _row: u32, free: Option<u32>, pinned: &dyn Fn(u32) -> bool) -> u32 {
        let slot = match free {
            Some(s) => s,
            None => {
                // Pinned slots were looked up by this batch, so they sit at the recent end: the
                // walk from the tail stops at once unless nearly everything is pinned.
                let s = self.links.oldest(&self.list, pinned).expect("the cache calls admit only when an unpinned slot exists");
                self.links.unlink(&mut self.list, s);
                s
            }
        };
        self.links.push_front(&mut self.list, slot);
        slot
    }
    fn remove(&mut self, slot: u32) {
        self.links.unlink(&mut self.list, slot);
    }
    fn resize(&mut self, capacity: usize) {
        self.links.resize(capacity);
    }
    fn victim(&mut self, _row: u32, pinned: &dyn Fn(u32) -> bool) -> Option<u32> {
        self.links.oldest(&self.list, pinned)
    }
    fn bytes(&self) -> usize {
        self.links.bytes()
    }
}

/// Least frequently used, ties to the least recently used. Counts are kept for rows that were
/// evicted too (a row that comes back keeps its count), in a history bounded to a few times the
/// capacity: when it grows past that, every count is halved and rows at zero are forgotten
/// (TinyLFU's aging), so old popularity fades and memory stays O(capacity).
///
/// A hit only bumps its slot's (count, last use) key: the eviction order is a set of keys that
/// may be stale, and since keys only grow, the first entry whose key is current is the true
/// minimum (lazy deletion). Stale entries are re-filed when they reach the front; pinned ones
/// are set aside until the next part. Hits cost O(1), evictions O(log capacity) amortised.
#[derive(Default)]
pub struct Lfu {
    capacity: usize,
    /// Counts of rows that are not cached.
    history: FxHashMap<u32, u32>,
    /// (count, last use, slot), possibly stale.
    order: BTreeSet<(u32, u64, u32)>,
    /// Slots taken off the front of `order` because the current part reads them.
    held: Vec<u32>,
    /// Per slot: its row (NIL when empty) and its current (count, last use).
    row: Vec<u32>,
    key: Vec<(u32, u64)>,
    tick: u64,
}

impl Lfu {
    /// Takes the slot to evict off the front of `order`: the first current, unpinned entry.
    fn take_victim(&mut self, pinned: &dyn Fn(u32) -> bool) -> Option<u32> {
        loop {
            let (c, t, s) = self.order.pop_first()?;
            let i = s as usize;
            if i >= self.row.len() || self.row[i] == NIL {
                continue;
            }
            if self.key[i] != (c, t) {
                self.order.insert((self.key[i].0, self.key[i].1, s));
            } else if pinned(s) {
                self.held.push(s);
            } else {
                return Some(s);
            }
        }
    }

    fn age(&mut self) {
        for c in self.history.values_mut() {
            *c /= 2;
        }
        self.history.retain(|_, c| *c > 0);
        self.order.clear();
        for (slot, key) in self.key.iter_mut().enumerate() {
            if self.row[slot] != NIL {
                key.0 = (key.0 / 2).max(1);
                self.order.insert((key.0, key.1, slot as u32));
            }
        }
    }
}

impl Policy for Lfu {
    fn name(&self) -> &str {
        "lfu"
    }
    fn reset(&mut self, capacity: usize) {
        *self = Lfu { capacity, row: vec![NIL; capacity], key: vec![(0, 0); capacity], ..Lfu::default() };
    }
    fn begin_part(&mut self) {
        for s in self.held.drain(..) {
            let i = s as usize;
            if self.row[i] != NIL {
                self.order.insert((self.key[i].0, self.key[i].1, s));
            }
        }
    }
    fn hit(&mut self, slot: u32) {
        self.tick += 1;
        let key = &mut self.key[slot as usize];
        *key = (key.0.saturating_add(1), self.tick);
    }
    fn prefetch(&self, slot: u32) {
        if let Some(key) = self.key.get(slot as usize) {
            crate::cpu::prefetch(std::slice::from_ref(&key.0));
        }
    }
    fn admit(&mut self, row: u32, free: Option<u32>, pinned: &dyn Fn(u32) -> bool) -> u32 {
        let slot = match free {
            Some(s) => s,
            None => {
                let s = self.take_victim(pinned).expect("the cache calls admit only when an unpinned slot exists");
                self.history.insert(self.row[s as usize], self.key[s as usize].0);
                s
            }
        };
        let count = self.history.remove(&row).unwrap_or(0).saturating_add(1);
        self.tick += 1;
        self.row[slot as usize] = row;
        self.key[slot as usize] = (count, self.tick);
        self.order.insert((count, self.tick, slot));
        if self.history.len() > 8 * self.capacity + 4096 {
            self.age();
        }
        slot
    }
    fn remove(&mut self, slot: u32) {
        let i = slot as usize;
        if self.row[i] != NIL {
            self.history.insert(self.row[i], self.key[i].0);
            self.row[i] = NIL;
        }
    }
    fn resize(&mut self, capacity: usize) {
        self.capacity = capacity;
        resize_exact(&mut self.row, capacity, NIL);
        resize_exact(&mut self.key, capacity, (0, 0));
        self.held.retain(|&s| (s as usize) < capacity);
        // Entries of slots past the end are skipped when they reach the front.
    }
    fn bytes(&self) -> usize {
        map_bytes(&self.history) + btree_bytes(&self.order) + vec_bytes(&self.held) + vec_bytes(&self.row) + vec_bytes(&self.key)
    }
    fn victim(&mut self, _row: u32, pinned: &dyn Fn(u32) -> bool) -> Option<u32> {
        // The stale and pinned entries in front are re-filed or held as `admit` would; the
        // victim goes back, first in order, so the next `admit` takes the same slot.
        let s = self.take_victim(pinned)?;
        let key = self.key[s as usize];
        self.order.insert((key.0, key.1, s));
        Some(s)
    }
}

/// Adaptive Replacement Cache (Megiddo & Modha, "ARC: A Self-Tuning, Low Overhead Replacement
/// Cache", FAST 2003): rows seen once (T1) and rows seen again (T2), each with a ghost list of
/// rows it recently evicted (B1, B2). A hit in a ghost list moves the target size of T1 toward
/// the list that would have kept the row, so the split between recency and frequency adapts to
/// the id stream.
#[derive(Default)]
pub struct Adaptive {
    capacity: usize,
    /// T1 and T2 over slots.
    slots: Links,
    t1: Ends,
    t2: Ends,
    in_t2: Vec<bool>,
    row: Vec<u32>,
    /// B1 and B2 over ghost nodes, each naming an evicted row.
    ghosts: Links,
    b1: Ends,
    b2: Ends,
    ghost_row: Vec<u32>,
    ghost_in_b2: Vec<bool>,
    ghost_of: FxHashMap<u32, u32>,
    free_ghosts: Vec<u32>,
    /// Target size of T1.
    p: usize,
}

impl Adaptive {
    fn drop_ghost(&mut self, g: u32) {
        if self.ghost_in_b2[g as usize] {
            self.ghosts.unlink(&mut self.b2, g);
        } else {
            self.ghosts.unlink(&mut self.b1, g);
        }
        self.ghost_of.remove(&self.ghost_row[g as usize]);
        self.free_ghosts.push(g);
    }

    fn add_ghost(&mut self, row: u32, b2: bool) {
        if self.free_ghosts.is_empty() {
            // Only when pinned slots bent the invariant |B1| + |B2| ≤ capacity.
            let g = if self.b1.len >= self.b2.len { self.b1.tail } else { self.b2.tail };
            self.drop_ghost(g);
        }
        let g = self.free_ghosts.pop().expect("a ghost node was just freed");
        self.ghost_row[g as usize] = row;
        self.ghost_in_b2[g as usize] = b2;
        self.ghost_of.insert(row, g);
        if b2 {
            self.ghosts.push_front(&mut self.b2, g);
        } else {
            self.ghosts.push_front(&mut self.b1, g);
        }
    }

    /// The slot ARC's REPLACE evicts with target `p`: the least recent unpinned row of T1 or T2.
    fn replace_choice(&self, p: usize, incoming_in_b2: bool, pinned: &dyn Fn(u32) -> bool) -> Option<u32> {
        let prefer_t1 = self.t1.len >= 1 && (self.t1.len > p || (incoming_in_b2 && self.t1.len == p));
        // The preferred list's oldest unpinned row, else the other list's.
        let (first, second) = if prefer_t1 { (&self.t1, &self.t2) } else { (&self.t2, &self.t1) };
        self.slots.oldest(first, pinned).or_else(|| self.slots.oldest(second, pinned))
    }

    /// ARC's REPLACE: evicts the least recent unpinned row of T1 or T2 into its ghost list.
    fn replace(&mut self, incoming_in_b2: bool, pinned: &dyn Fn(u32) -> bool) -> u32 {
        let slot = self.replace_choice(self.p, incoming_in_b2, pinned).expect("the cache calls admit only when an unpinned slot exists");
        let was_t2 = self.in_t2[slot as usize];
        self.unlink_slot(slot);
        self.add_ghost(self.row[slot as usize], was_t2);
        slot
    }

    fn unlink_slot(&mut self, slot: u32) {
        if self.in_t2[slot as usize] {
            self.slots.unlink(&mut self.t2, slot);
        } else {
            self.slots.unlink(&mut self.t1, slot);
        }
    }
}

impl Policy for Adaptive {
    fn name(&self) -> &str {
        "arc"
    }
    fn reset(&mut self, capacity: usize) {
        *self = Adaptive {
            capacity,
            slots: Links::new(capacity),
            in_t2: vec![false; capacity],
            row: vec![NIL; capacity],
            ghosts: Links::new(capacity + 1),
            ghost_row: vec![NIL; capacity + 1],
            ghost_in_b2: vec![false; capacity + 1],
            free_ghosts: (0..capacity as u32 + 1).rev().collect(),
            ..Adaptive::default()
        };
    }
    fn hit(&mut self, slot: u32) {
        self.unlink_slot(slot);
        self.in_t2[slot as usize] = true;
        self.slots.push_front(&mut self.t2, slot);
    }
    fn prefetch(&self, slot: u32) {
        self.slots.prefetch(slot);
    }
    fn prefetch_again(&self, slot: u32) {
        self.slots.prefetch_neighbours(slot);
    }
    fn admit(&mut self, row: u32, free: Option<u32>, pinned: &dyn Fn(u32) -> bool) -> u32 {
        let c = self.capacity;
        let (slot, to_t2) = if let Some(&g) = self.ghost_of.get(&row) {
            // A ghost hit: adapt the target, then make room and keep the row as frequent.
            let in_b2 = self.ghost_in_b2[g as usize];
            let (b1, b2) = (self.b1.len.max(1), self.b2.len.max(1));
            if in_b2 {
                self.p = self.p.saturating_sub((b1 / b2).max(1));
            } else {
                self.p = (self.p + (b2 / b1).max(1)).min(c);
            }
            self.drop_ghost(g);
            (free.unwrap_or_else(|| self.replace(in_b2, pinned)), true)
        } else {
            let slot = if self.t1.len + self.b1.len >= c {
                if self.t1.len < c {
                    if self.b1.len > 0 {
                        self.drop_ghost(self.b1.tail);
                    }
                    free.unwrap_or_else(|| self.replace(false, pinned))
                } else {
                    match free {
                        Some(s) => s,
                        // T1 alone fills the cache: its oldest row goes without a ghost.
                        None => match self.slots.oldest(&self.t1, pinned) {
                            Some(s) => {
                                self.unlink_slot(s);
                                s
                            }
                            None => self.replace(false, pinned),
                        },
                    }
                }
            } else {
                if self.t1.len + self.t2.len + self.b1.len + self.b2.len >= 2 * c && self.b2.len > 0 {
                    self.drop_ghost(self.b2.tail);
                }
                free.unwrap_or_else(|| self.replace(false, pinned))
            };
            (slot, false)
        };
        self.row[slot as usize] = row;
        self.in_t2[slot as usize] = to_t2;
        if to_t2 {
            self.slots.push_front(&mut self.t2, slot);
        } else {
            self.slots.push_front(&mut self.t1, slot);
        }
        slot
    }
    fn remove(&mut self, slot: u32) {
        self.unlink_slot(slot);
        self.row[slot as usize] = NIL;
    }
    fn resize(&mut self, capacity: usize) {
        // T1 and T2 keep their rows; the ghost lists, sized for the old capacity, start afresh.
        self.capacity = capacity;
        self.p = self.p.min(capacity);
        self.slots.resize(capacity);
        resize_exact(&mut self.in_t2, capacity, false);
        resize_exact(&mut self.row, capacity, NIL);
        self.ghosts = Links::new(capacity + 1);
        self.b1 = Ends::default();
        self.b2 = Ends::default();
        self.ghost_row = vec![NIL; capacity + 1];
        self.ghost_in_b2 = vec![false; capacity + 1];
        self.ghost_of.clear();
        self.free_ghosts = (0..capacity as u32 + 1).rev().collect();
    }
    fn victim(&mut self, row: u32, pinned: &dyn Fn(u32) -> bool) -> Option<u32> {
        // `admit(row, None, …)`'s choice, without its changes.
        let c = self.capacity;
        if let Some(&g) = self.ghost_of.get(&row) {
            let in_b2 = self.ghost_in_b2[g as usize];
            let (b1, b2) = (self.b1.len.max(1), self.b2.len.max(1));
            let p = if in_b2 { self.p.saturating_sub((b1 / b2).max(1)) } else { (self.p + (b2 / b1).max(1)).min(c) };
            return self.replace_choice(p, in_b2, pinned);
        }
        if self.t1.len + self.b1.len >= c && self.t1.len >= c {
            if let Some(s) = self.slots.oldest(&self.t1, pinned) {
                return Some(s);
            }
        }
        self.replace_choice(self.p, false, pinned)
    }
    fn bytes(&self) -> usize {
        self.slots.bytes()
            + vec_bytes(&self.in_t2)
            + vec_bytes(&self.row)
            + self.ghosts.bytes()
            + vec_bytes(&self.ghost_row)
            + vec_bytes(&self.ghost_in_b2)
            + map_bytes(&self.ghost_of)
            + vec_bytes(&self.free_ghosts)
    }
}
