//! What an engine holds: every GPU buffer edo allocated, by owner and purpose, against the
//! engine's budget; and the pool of idle buffers that lookups reuse.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The engine's ledger of live buffers. Shared by the buffers themselves, so a buffer dropped
/// anywhere (a finished lookup, the last handle of a table) leaves it at once — or, for the
/// buffers of a lookup (ids, parameters, outputs, readback), goes idle into the pool, still
/// counted, until a later lookup takes it or the pool lets it go.
#[derive(Default)]
pub struct Registry {
    allocated: AtomicU64,
    next_id: AtomicU64,
    next_owner: AtomicU64,
    entries: Mutex<BTreeMap<u64, Entry>>,
    pool: Mutex<Pool>,
}

/// What the buffers of a lookup are pooled by: their usages and their size (a size class for
/// scratch, the exact size for outputs, whose size a caller sees).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PoolKey {
    pub usage: u32,
    pub size: u64,
}

/// Idle buffers by key, and how much they may hold.
#[derive(Default)]
struct Pool {
    idle: HashMap<PoolKey, Vec<Idle>>,
    idle_bytes: u64,
    /// Most bytes of idle buffers kept ([`super::EngineOptions::pool_bytes`]; 0: none).
    cap: u64,
    /// Engine bytes from which a dropped buffer is released, not kept (a share of the budget).
    ceiling: Option<u64>,
    /// Set when the device is lost: nothing is kept any more.
    closed: bool,
    /// Counts the buffers parked, to tell the oldest idle one.
    parked: u64,
}

/// An idle buffer, its entry in the ledger, and when it was parked.
struct Idle {
    buffer: wgpu::Buffer,
    id: u64,
    seq: u64,
}

/// What the ledger calls an idle buffer.
pub const IDLE: &str = "idle (pooled for reuse)";

struct Entry {
    what: &'static str,
    bytes: u64,
    owner: Option<Arc<str>>,
}

impl Registry {
    pub fn allocated(&self) -> u64 {
        self.allocated.load(Ordering::Relaxed)
    }

    /// Counts `bytes` for a buffer about to be created; the returned guard gives them back when
    /// dropped (the buffer's last clone goes, or the creation failed).
    pub fn reserve(self: &Arc<Self>, what: &'static str, bytes: u64) -> (Counted, u64) {
        let held = self.allocated.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut e) = self.entries.lock() {
            e.insert(id, Entry { what, bytes, owner: None });
        }
        (Counted { bytes, id, registry: self.clone(), buffer: None, pool: None, exported: AtomicBool::new(false) }, held)
    }

    /// Sets how many bytes of idle buffers the pool keeps, and the engine's bytes from which it
    /// keeps none.
    pub fn configure_pool(&self, cap: u64, ceiling: Option<u64>) {
        if let Ok(mut pool) = self.pool.lock() {
            pool.cap = cap;
            pool.ceiling = ceiling;
        }
    }

    /// An idle buffer of `key`, now counted as `what`, or `None`.
    pub fn take(self: &Arc<Self>, key: PoolKey, what: &'static str) -> Option<Counted> {
        let idle = {
            let mut pool = self.pool.lock().ok()?;
            let list = pool.idle.get_mut(&key)?;
            let idle = list.pop()?;
            if list.is_empty() {
                pool.idle.remove(&key);
            }
            pool.idle_bytes -= key.size;
            idle
        };
        self.relabel(idle.id, what);
        Some(Counted { bytes: key.size, id: idle.id, registry: self.clone(), buffer: Some(idle.buffer), pool: Some(key), exported: AtomicBool::new(false) })
    }

    /// Keeps `buffer` idle for reuse, making room by releasing the longest idle buffers (so
    /// the pool follows the sizes lookups use now); unless the pool is closed, the buffer alone
    /// is over its cap, or the engine is near its budget: then it is handed back to be
    /// destroyed.
    fn park(&self, key: PoolKey, buffer: wgpu::Buffer, id: u64) -> Result<(), wgpu::Buffer> {
        let Ok(mut pool) = self.pool.lock() else { return Err(buffer) };
        let over_ceiling = pool.ceiling.is_some_and(|c| self.allocated() > c);
        if pool.closed || over_ceiling || key.size > pool.cap {
            return Err(buffer);
        }
        while pool.idle_bytes + key.size > pool.cap {
            // The longest idle: the first of some list (each list is in the order parked).
            let Some(oldest) = pool.idle.iter().min_by_key(|(_, list)| list[0].seq).map(|(k, _)| *k) else { break };
            let list = pool.idle.get_mut(&oldest).expect("the key just found");
            let gone = list.remove(0);
            if list.is_empty() {
                pool.idle.remove(&oldest);
            }
            pool.idle_bytes -= oldest.size;
            gone.buffer.destroy();
            self.forget(gone.id, oldest.size);
        }
        pool.idle_bytes += key.size;
        pool.parked += 1;
        let seq = pool.parked;
        pool.idle.entry(key).or_default().push(Idle { buffer, id, seq });
        // Relabelled under the pool's lock: no `take` can relabel it first.
        self.relabel(id, IDLE);
        Ok(())
    }

    /// The pool keeps nothing from now on (the device is lost).
    pub fn close_pool(&self) {
        if let Ok(mut pool) = self.pool.lock() {
            pool.closed = true;
        }
    }

    /// Destroys every idle buffer and gives its bytes back; how many bytes.
    pub fn release_idle(&self) -> u64 {
        let idle: Vec<(u64, Idle)> = {
            let Ok(mut pool) = self.pool.lock() else { return 0 };
            pool.idle_bytes = 0;
            pool.idle.drain().flat_map(|(key, list)| list.into_iter().map(move |i| (key.size, i))).collect()
        };
        let mut bytes = 0;
        for (size, Idle { buffer, id, .. }) in idle {
            buffer.destroy();
            self.forget(id, size);
            bytes += size;
        }
        bytes
    }

    /// Bytes of idle buffers in the pool.
    pub fn idle_bytes(&self) -> u64 {
        self.pool.lock().map_or(0, |p| p.idle_bytes)
    }

    fn relabel(&self, id: u64, what: &'static str) {
        if let Ok(mut e) = self.entries.lock() {
            if let Some(entry) = e.get_mut(&id) {
                entry.what = what;
            }
        }
    }

    /// Gives back the bytes of a buffer that is gone.
    fn forget(&self, id: u64, bytes: u64) {
        self.allocated.fetch_sub(bytes, Ordering::Relaxed);
        if let Ok(mut e) = self.entries.lock() {
            e.remove(&id);
        }
    }

    /// A fresh owner name: `kind` and a number unique in this engine ("table 3").
    pub fn owner_name(&self, kind: &str) -> String {
        format!("{kind} {}", self.next_owner.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// Names the owner of `buffers` in reports.
    pub fn set_owner<'a>(&self, buffers: impl IntoIterator<Item = &'a Buffer>, owner: &str) {
        let owner: Arc<str> = owner.into();
        if let Ok(mut e) = self.entries.lock() {
            for b in buffers {
                if let Some(entry) = e.get_mut(&b.counted.id) {
                    entry.owner = Some(owner.clone());
                }
            }
        }
    }

    pub fn report(&self, budget: Option<u64>) -> MemoryReport {
        let mut groups: BTreeMap<(String, &'static str), (usize, u64)> = BTreeMap::new();
        let mut buffers = Vec::new();
        if let Ok(e) = self.entries.lock() {
            for entry in e.values() {
                let owner = entry.owner.as_deref().unwrap_or(UNOWNED).to_string();
                buffers.push(MemoryBuffer { owner: owner.clone(), what: entry.what, bytes: entry.bytes });
                let g = groups.entry((owner, entry.what)).or_default();
                g.0 += 1;
                g.1 += entry.bytes;
            }
        }
        let entries: Vec<MemoryEntry> = groups.into_iter().map(|((owner, what), (buffers, bytes))| MemoryEntry { owner, what, buffers, bytes }).collect();
        let total = entries.iter().map(|e| e.bytes).sum();
        let idle = entries.iter().filter(|e| e.what == IDLE).map(|e| e.bytes).sum();
        MemoryReport { budget, total, idle, entries, buffers }
    }
}

/// The owner of buffers no table or cache holds: lookup outputs, ids, parameters, staging.
const UNOWNED: &str = "outputs and scratch";

/// Bytes of one live buffer, given back to the [`Registry`] when dropped, and the buffer itself,
/// destroyed then.
pub struct Counted {
    bytes: u64,
    id: u64,
    registry: Arc<Registry>,
    /// Set once the buffer exists. Destroyed when the last clone of the [`Buffer`] goes: wgpu's
    /// WebGPU buffers do nothing on drop (the browser would hold their memory until its garbage
    /// collector ran), and natively it frees the memory without waiting for wgpu's next poll.
    /// Work already submitted that reads the buffer still completes (WebGPU and wgpu-core keep
    /// the memory until it has); every edo job holds each buffer it binds, its tables' shards too.
    #[doc(hidden)]
    pub buffer: Option<wgpu::Buffer>,
    /// Set for the buffers of a lookup: goes idle into the engine's pool under this key rather
    /// than being destroyed (if the pool takes it).
    #[doc(hidden)]
    pub pool: Option<PoolKey>,
    /// Set once the `wgpu::Buffer` was handed to a caller ([`super::GpuRows::buffer`]): the
    /// caller may hold a handle edo cannot see, so the buffer is destroyed as before, never
    /// reused under the caller's feet. Also set while a readback buffer is being mapped.
    #[doc(hidden)]
    pub exported: AtomicBool,
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            let kept = match self.pool {
                Some(key) if !self.exported.load(Ordering::Relaxed) => self.registry.park(key, buffer, self.id),
                _ => Err(buffer),
            };
            match kept {
                Ok(()) => return,
                Err(buffer) => buffer.destroy(),
            }
        }
        self.registry.forget(self.id, self.bytes);
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // wgpu's WebGPU buffers do nothing on drop: destroy the idle ones.
        if let Ok(pool) = self.pool.get_mut() {
            pool.idle.drain().flat_map(|(_, list)| list).for_each(|i| i.buffer.destroy());
        }
    }
}

/// A GPU buffer edo allocated: its bytes count in the engine's [`super::Engine::allocated_bytes`]
/// (and against its budget) until it is dropped. Derefs to the `wgpu::Buffer`.
#[derive(Clone)]
pub struct Buffer {
    #[doc(hidden)]
    pub inner: wgpu::Buffer,
    /// Shared by clones: the bytes are given back once, when the last clone goes.
    #[doc(hidden)]
    pub counted: Arc<Counted>,
}

impl Buffer {
    /// The buffer, for a caller to hold: from now on it is destroyed when edo's last handle
    /// goes, never pooled for another lookup.
    #[doc(hidden)]
    pub fn export(&self) -> &wgpu::Buffer {
        self.counted.exported.store(true, Ordering::Relaxed);
        &self.inner
    }

    /// Whether the buffer is kept out of the pool when its last handle goes (a readback
    /// buffer while it is mapped; never edo's buffers handed to a caller, which stay out).
    #[doc(hidden)]
    pub fn keep_out_of_pool(&self, out: bool) {
        self.counted.exported.store(out, Ordering::Relaxed);
    }
}

impl std::ops::Deref for Buffer {
    type Target = wgpu::Buffer;
    fn deref(&self) -> &wgpu::Buffer {
        &self.inner
    }
}

/// Every buffer an engine holds, grouped by owner (a table, a cache — named with `set_name`, or
/// numbered) and purpose, and one by one, with the total and the budget. `Display` prints the
/// groups as a table; [`MemoryReport::to_json`] gives the groups and every buffer as JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryReport {
    /// The engine's memory budget, if it has one.
    pub budget: Option<u64>,
    /// Bytes of all the buffers.
    pub total: u64,
    /// Bytes of the idle buffers kept for the next lookups (part of `total`).
    pub idle: u64,
    /// Buffers grouped by owner and purpose (what `Display` prints).
    pub entries: Vec<MemoryEntry>,
    /// Every buffer on its own (each shard of each table, each page of each cache), in the
    /// order they were allocated.
    pub buffers: Vec<MemoryBuffer>,
}

/// One live buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryBuffer {
    /// Who holds the buffer (a table's or cache's name, or "engine").
    pub owner: String,
    /// What the buffer is for ("table shard", "gather output", …).
    pub what: &'static str,
    /// Its bytes.
    pub bytes: u64,
}

/// Buffers of one owner and purpose.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryEntry {
    /// "table 1", a name given with `set_name`, or "outputs and scratch".
    pub owner: String,
    /// What the buffers are: "table shard", "cache slots", "gather output", …
    pub what: &'static str,
    /// How many buffers.
    pub buffers: usize,
    /// Their bytes.
    pub bytes: u64,
}

impl MemoryReport {
    /// Bytes held by `owner`.
    pub fn owner_bytes(&self, owner: &str) -> u64 {
        self.entries.iter().filter(|e| e.owner == owner).map(|e| e.bytes).sum()
    }

    /// `total / budget`, when there is a budget.
    pub fn pressure(&self) -> Option<f64> {
        self.budget.map(|b| self.total as f64 / b.max(1) as f64)
    }

    /// The report as JSON: budget, total, entries and buffers.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "budget": self.budget,
            "total": self.total,
            "idle": self.idle,
            "pressure": self.pressure(),
            "entries": self.entries.iter().map(|e| serde_json::json!({
                "owner": e.owner, "what": e.what, "buffers": e.buffers, "bytes": e.bytes,
            })).collect::<Vec<_>>(),
            "buffers": self.buffers.iter().map(|b| serde_json::json!({
                "owner": b.owner, "what": b.what, "bytes": b.bytes,
            })).collect::<Vec<_>>(),
        })
    }
}

impl std::fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{:<24} {:<20} {:>8} {:>14}", "owner", "buffers of", "count", "bytes")?;
        for e in &self.entries {
            writeln!(f, "{:<24} {:<20} {:>8} {:>14}", e.owner, e.what, e.buffers, e.bytes)?;
        }
        write!(f, "{:<24} {:<20} {:>8} {:>14}", "total", "", self.entries.iter().map(|e| e.buffers).sum::<usize>(), self.total)?;
        if let Some(budget) = self.budget {
            write!(f, "\n{:<24} {:<20} {:>8} {:>14}  ({:.1} % used)", "budget", "", "", budget, 100.0 * self.total as f64 / budget.max(1) as f64)?;
        }
        Ok(())
    }
}
