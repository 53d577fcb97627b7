//! Device-loss recovery: an engine that rebuilds itself and re-uploads what it holds
//! ([`RecoveringEngine`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Poll, Waker};

use wgpu::WasmNotSendSync;

use super::lookup::Reupload;
use super::{Engine, GpuCodes, GpuLookup, GpuStaticModel};
use crate::format::PackedTable;
use crate::request::{AsyncLookup, HostRows, Request};
use crate::Error;

/// What a [`RecoveringEngine`] tells its listeners ([`RecoveringEngine::on_event`]).
#[derive(Clone, Debug, PartialEq)]
pub enum RecoveryEvent {
    /// The engine's device was lost; the next call (or [`RecoveringEngine::recover`]) rebuilds.
    Lost {
        /// The driver's or the browser's reason.
        reason: String,
    },
    /// A new engine is in place and the tables are on it.
    Recovered {
        /// How many rebuilds the engine has been through (1 after the first).
        generation: u64,
        /// Tables, caches and models uploaded again.
        residents: usize,
        /// Those that could not be (each with its error); each tries again at its next call.
        failed: Vec<String>,
        /// GPU bytes the new engine holds after the uploads.
        bytes: u64,
        /// How long the rebuild took, in milliseconds.
        millis: f64,
    },
    /// No new engine could be made (no adapter, no device); calls return [`Error::DeviceLost`]
    /// with this reason, and the next call tries again.
    Failed {
        /// Why.
        reason: String,
    },
}

pub use crate::cache::CacheSpec;

/// A listener of [`RecoveringEngine::on_event`] (in a browser one thread calls it).
#[cfg(native)]
type Listener = Box<dyn Fn(&RecoveryEvent) + Send + Sync>;
#[cfg(web)]
type Listener = Box<dyn Fn(&RecoveryEvent)>;

/// An [`Engine`] that survives device loss.
///
/// A device is lost when the driver resets, the GPU is removed or a browser's GPU process
/// crashes. Every call on a lost [`Engine`], its tables and its outputs then returns
/// [`Error::DeviceLost`]. A `RecoveringEngine` keeps, beside each table it uploads, the host copy
/// the table was made from; the first call that meets the loss makes a new engine the way the lost
/// one was made ([`Engine::rebuild`]), uploads every live table again (a cache loads the rows it
/// held), and repeats the call on the new engine. Calls on other threads meanwhile wait for the
/// rebuild and repeat theirs too, so a loss costs the callers time, never a wrong row or an error
/// — unless no device can be made again, and then they get [`Error::DeviceLost`] saying why.
///
/// The price is the host copies: a table uploaded through a `RecoveringEngine` stays in host
/// memory too (a memory-mapped file costs address space, not memory).
///
/// Cheap to clone (reference counted); the clones share the engine, its tables and listeners.
#[derive(Clone)]
pub struct RecoveringEngine {
    shared: Arc<Shared>,
}

/// A [`RecoveringEngine`] that may have been dropped ([`RecoveringEngine::downgrade`]).
#[derive(Clone)]
pub struct WeakRecoveringEngine {
    shared: Weak<Shared>,
}

impl WeakRecoveringEngine {
    /// The engine, while any handle to it lives.
    pub fn upgrade(&self) -> Option<RecoveringEngine> {
        self.shared.upgrade().map(|shared| RecoveringEngine { shared })
    }
}

struct Shared {
    state: Mutex<State>,
    /// Everything uploaded through the engine that is still alive.
    residents: Mutex<Vec<Weak<dyn ReuploadSlot>>>,
    listeners: Mutex<Vec<Listener>>,
}

struct State {
    engine: Engine,
    /// Rebuilds so far; a resident made on `engine` carries the same number.
    generation: u64,
    /// A call is rebuilding the engine; others wait on `wakers`.
    rebuilding: bool,
    wakers: Vec<Waker>,
    /// Rebuilds attempted, and why the last one failed (`None` when it succeeded).
    attempts: u64,
    failure: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The state stays consistent whatever a panicking holder did: each change is one assignment.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn emit(&self, event: &RecoveryEvent) {
        lock(&self.listeners).iter().for_each(|f| f(event));
    }
}

/// Tells the listeners when `engine`'s device is lost (while the recovering engine lives).
fn watch(shared: &Arc<Shared>, engine: &Engine) {
    let weak = Arc::downgrade(shared);
    #[cfg(web)]
    let weak = super::OneThread(weak);
    engine.on_device_lost(move |reason| {
        #[cfg(web)]
        let weak = weak.get();
        if let Some(shared) = weak.upgrade() {
            shared.emit(&RecoveryEvent::Lost { reason: reason.to_string() });
        }
    });
}

/// Resolves when no rebuild is in progress.
struct Rebuilt<'a>(&'a Shared);

impl Future for Rebuilt<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        let mut st = lock(&self.0.state);
        if st.rebuilding {
            st.wakers.push(cx.waker().clone());
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

/// Ends a rebuild however its future ends (done, failed, dropped), waking the calls that wait.
struct RebuildGuard<'a>(&'a Shared);

impl Drop for RebuildGuard<'_> {
    fn drop(&mut self) {
        let wakers = {
            let mut st = lock(&self.0.state);
            st.rebuilding = false;
            std::mem::take(&mut st.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }
}

impl RecoveringEngine {
    /// Watches `engine` and rebuilds it when its device is lost. `engine` may already hold
    /// tables of its own; only those uploaded through [`RecoveringEngine::upload`] come back.
    pub fn new(engine: Engine) -> RecoveringEngine {
        let state = State { engine: engine.clone(), generation: 0, rebuilding: false, wakers: Vec::new(), attempts: 0, failure: None };
        // In a browser nothing runs on another thread; the Arc only shares the state with handles.
        #[cfg_attr(web, allow(clippy::arc_with_non_send_sync))]
        let shared = Arc::new(Shared { state: Mutex::new(state), residents: Mutex::new(Vec::new()), listeners: Mutex::new(Vec::new()) });
        watch(&shared, &engine);
        RecoveringEngine { shared }
    }

    /// A handle that does not keep the engine alive (for a listener that recovers by itself:
    /// a listener holding the engine itself would keep it forever).
    pub fn downgrade(&self) -> WeakRecoveringEngine {
        WeakRecoveringEngine { shared: Arc::downgrade(&self.shared) }
    }

    /// The engine in use now (a new one after each rebuild).
    pub fn engine(&self) -> Engine {
        lock(&self.shared.state).engine.clone()
    }

    /// How many times the engine has been rebuilt.
    pub fn generation(&self) -> u64 {
        lock(&self.shared.state).generation
    }

    /// Calls `listener` on each [`RecoveryEvent`]: natively on the thread that meets it (wgpu's
    /// for [`RecoveryEvent::Lost`]), so it should return quickly and must not register listeners.
    pub fn on_event(&self, listener: impl Fn(&RecoveryEvent) + WasmNotSendSync + 'static) {
        lock(&self.shared.listeners).push(Box::new(listener));
    }

    /// Rebuilds now if the device is lost, rather than at the next call: `Ok(true)` when it
    /// rebuilt (or waited for a rebuild in progress), `Ok(false)` when the device is fine.
    pub async fn recover(&self) -> Result<bool, Error> {
        Rebuilt(&self.shared).await;
        let (generation, engine) = {
            let st = lock(&self.shared.state);
            (st.generation, st.engine.clone())
        };
        match engine.ctx.check_lost() {
            Ok(()) => Ok(false),
            Err(_) => self.recover_after(generation).await.map(|()| true),
        }
    }

    /// Uploads `host` as a `T` ([`super::GpuTable`] from a [`PackedTable`], [`super::GpuCache`] from a
    /// [`CacheSpec`], …) and keeps `host` to upload it again after a device loss.
    pub async fn upload<T>(&self, host: T::Host) -> Result<Recoverable<T>, Error>
    where
        T: Reupload + WasmNotSendSync + 'static,
        T::Host: WasmNotSendSync,
    {
        let slot = Arc::new(Slot { host, current: Mutex::new(None) });
        let recoverable = Recoverable { slot, owner: self.clone() };
        recoverable.run(async |_| Ok(())).await?;
        let weak: Weak<Slot<T>> = Arc::downgrade(&recoverable.slot);
        let mut residents = lock(&self.shared.residents);
        residents.retain(|r| r.strong_count() > 0);
        residents.push(weak);
        Ok(recoverable)
    }

    /// Whether the engine of generation `seen` is lost (or already replaced after a loss).
    fn lost_since(&self, seen: u64) -> bool {
        let st = lock(&self.shared.state);
        st.generation != seen || st.engine.is_lost()
    }

    /// Rebuilds the engine of generation `seen`, after a call on it met a lost device; returns
    /// at once if another call has rebuilt it already, waits if one is rebuilding it now.
    async fn recover_after(&self, seen: u64) -> Result<(), Error> {
        let shared = &*self.shared;
        let attempts = lock(&shared.state).attempts;
        loop {
            Rebuilt(shared).await;
            let lost = {
                let mut st = lock(&shared.state);
                if st.generation != seen {
                    return Ok(());
                }
                if st.rebuilding {
                    continue;
                }
                if st.attempts > attempts {
                    // A rebuild for this generation failed while this call waited: its reason.
                    if let Some(failure) = &st.failure {
                        return Err(Error::DeviceLost(failure.clone()));
                    }
                }
                st.rebuilding = true;
                st.attempts += 1;
                st.engine.clone()
            };
            let _guard = RebuildGuard(shared);
            let start = web_time::Instant::now();
            let engine = match lost.rebuild().await {
                Ok(engine) => engine,
                Err(e) => {
                    // Formatted as edo's error: one Display for both crates' cases in the .wasm.
                    let e = Error::from(e);
                    let why = match lost.ctx.check_lost() {
                        Err(edo_gpu::Error::DeviceLost(why)) => why,
                        _ => "the device was lost".to_string(),
                    };
                    let reason = format!("{why}; no new device could be made: {e}");
                    lock(&shared.state).failure = Some(reason.clone());
                    shared.emit(&RecoveryEvent::Failed { reason: reason.clone() });
                    return Err(Error::DeviceLost(reason));
                }
            };
            watch(&self.shared, &engine);
            let residents: Vec<Arc<dyn ReuploadSlot>> = lock(&shared.residents).iter().filter_map(Weak::upgrade).collect();
            let mut failed = Vec::new();
            for resident in &residents {
                if let Err(e) = resident.reupload(&engine, seen + 1).await {
                    failed.push(e.to_string());
                }
            }
            {
                let mut st = lock(&shared.state);
                st.engine = engine.clone();
                st.generation = seen + 1;
                st.failure = None;
            }
            let millis = start.elapsed().as_secs_f64() * 1e3;
            shared.emit(&RecoveryEvent::Recovered { generation: seen + 1, residents: residents.len(), failed, bytes: engine.allocated_bytes(), millis });
            return Ok(());
        }
    }
}

/// One resident's host copy and its GPU form of some generation.
struct Slot<T: Reupload> {
    host: T::Host,
    current: Mutex<Option<(u64, Arc<T>)>>,
}

/// What the rebuild needs of a slot, whatever it holds.
trait ReuploadSlot: WasmNotSendSync {
    fn reupload<'a>(&'a self, engine: &'a Engine, generation: u64) -> Pin<Box<dyn Future<Output = Result<(), Error>> + 'a>>;
}

impl<T: Reupload + WasmNotSendSync> ReuploadSlot for Slot<T>
where
    T::Host: WasmNotSendSync,
{
    fn reupload<'a>(&'a self, engine: &'a Engine, generation: u64) -> Pin<Box<dyn Future<Output = Result<(), Error>> + 'a>> {
        Box::pin(async move {
            let lost = lock(&self.current).as_ref().map(|(_, t)| t.clone());
            let new = T::reupload(engine, &self.host, lost.as_deref()).await?;
            let mut current = lock(&self.current);
            if current.as_ref().is_none_or(|(g, _)| *g < generation) {
                *current = Some((generation, Arc::new(new)));
            }
            Ok(())
        })
    }
}

/// A table (or cache, codes, model) uploaded through a [`RecoveringEngine`]: its calls survive
/// a device loss. Cheap to clone; the clones share the GPU form and the host copy.
pub struct Recoverable<T: Reupload> {
    slot: Arc<Slot<T>>,
    owner: RecoveringEngine,
}

impl<T: Reupload> Clone for Recoverable<T> {
    fn clone(&self) -> Self {
        Recoverable { slot: self.slot.clone(), owner: self.owner.clone() }
    }
}

impl<T: Reupload + WasmNotSendSync> Recoverable<T>
where
    T::Host: WasmNotSendSync,
{
    /// The host copy it is uploaded from.
    pub fn host(&self) -> &T::Host {
        &self.slot.host
    }

    /// The GPU form as it is now, without waiting: on the engine in use, or on a lost one
    /// before the rebuild has uploaded it again (`None` before its first upload).
    pub fn latest(&self) -> Option<Arc<T>> {
        lock(&self.slot.current).as_ref().map(|(_, t)| t.clone())
    }

    /// The GPU form on the engine in use now, uploaded again first if it is from an engine
    /// before a rebuild (after a loss whose rebuild could not upload it). Outputs made with it
    /// stay on its engine: a loss before they are read is the caller's to handle, or use
    /// [`Recoverable::run`].
    pub async fn current(&self) -> Result<Arc<T>, Error> {
        self.current_of().await.map(|(_, t)| t)
    }

    /// [`Recoverable::current`] and the generation of the engine it is on.
    async fn current_of(&self) -> Result<(u64, Arc<T>), Error> {
        Rebuilt(&self.owner.shared).await;
        let (generation, engine) = {
            let st = lock(&self.owner.shared.state);
            (st.generation, st.engine.clone())
        };
        if let Some((g, t)) = &*lock(&self.slot.current) {
            if *g >= generation {
                return Ok((*g, t.clone()));
            }
        }
        // Not on this engine yet: a new resident, or one the rebuild could not upload.
        self.slot.reupload(&engine, generation).await?;
        let current = lock(&self.slot.current);
        // (Set by the upload just made, unless a newer one replaced it: either is current.)
        current.clone().ok_or(Error::gpu("recovery", "an upload left no table"))
    }

    /// Runs `op` on the GPU form; if it meets a lost device, rebuilds the engine (or waits for
    /// the rebuild another call started) and runs `op` once more on the new one. `op` should
    /// include everything that touches the GPU — reading its output back too — so that a loss
    /// anywhere in it is recovered from.
    pub async fn run<R>(&self, op: impl AsyncFn(&T) -> Result<R, Error>) -> Result<R, Error> {
        let mut tries = 0;
        loop {
            // The generation of the engine the call runs on, read before anything can fail.
            let mut generation = self.owner.generation();
            let result = match self.current_of().await {
                Ok((g, t)) => {
                    generation = g;
                    op(&t).await
                }
                Err(e) => Err(e),
            };
            match result {
                // Any failure on an engine that is lost now: a call that met the loss half-way
                // may see a destroyed buffer rather than the loss itself.
                Err(e) if tries == 0 && (matches!(e, Error::DeviceLost(_)) || self.owner.lost_since(generation)) => {
                    tries += 1;
                    self.owner.recover_after(generation).await?;
                }
                result => return result,
            }
        }
    }
}

impl<T: Reupload + GpuLookup + WasmNotSendSync> AsyncLookup for Recoverable<T>
where
    T::Host: WasmNotSendSync,
{
    fn rows(&self) -> usize {
        lock(&self.slot.current).as_ref().map_or(0, |(_, t)| t.rows())
    }
    fn dim(&self) -> usize {
        lock(&self.slot.current).as_ref().map_or(0, |(_, t)| t.dim())
    }
    /// [`GpuLookup::lookup_host`]: the lookup and its readback in one submission, recovered
    /// from a device loss.
    async fn lookup(&self, request: &Request<'_>) -> Result<HostRows, Error> {
        self.run(async |t| GpuLookup::lookup_host(t, request).await).await
    }
}

impl Recoverable<GpuStaticModel> {
    /// Sentence vectors of `texts` (see [`GpuStaticModel::encode`]), recovered from a loss.
    pub async fn encode(&self, texts: &[&str]) -> Result<Vec<f32>, Error> {
        self.run(async |m| Ok(m.encode(texts).await?.read().await?)).await
    }
}

impl Recoverable<GpuCodes> {
    /// Hamming top-`k` of binary `queries` (see [`GpuCodes::hamming_topk`]), recovered from a loss.
    pub async fn hamming_topk(&self, queries: &PackedTable, k: usize) -> Result<crate::search::Neighbors, Error> {
        self.run(async |c| c.hamming_topk(queries, k).await).await
    }
}
