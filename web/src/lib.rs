//! edo in the browser: the same engine behind a wasm-bindgen API.
//!
//! `EdoEngine.create()` takes WebGPU when `navigator.gpu` gives an adapter and falls back to the
//! CPU path (plain WASM) otherwise, and says which. Tables are built from a `Float32Array` in any
//! format or read from the bytes of a file (`.edo`, `.npy`, `.safetensors`, word2vec text);
//! `engine.upload(table)` makes them resident for lookups, bags and Hamming search. Every call that
//! touches the GPU returns a Promise; nothing blocks. Errors are exceptions carrying edo's typed
//! message and a stable `code` (an `Error` named `EdoError`).
//!
//! Apps use these exports through the npm package `edo-embeddings` (`web/npm`): a hand-written
//! JavaScript layer with options objects, typed results, `dispose()`, downloads with a cache, a
//! worker and TypeScript typings. The positional arguments and JSON strings here are its
//! internals.

use edo::file::import::{self, FileKind, FileLayout};
use edo::file::{TableFile, Vocab};
use edo::search::{CodeTransform, ItqOptions};
use std::cell::RefCell;

mod live;
pub use live::EdoLiveTable;

use edo::cache::PolicyKind;
use edo::file::remote::{range_header, range_reply, HttpOptions, RangeReader, RemoteTable};
use edo::gpu::{CacheSpec, RecoveryEvent};
use edo::model::{SentenceTransformersLayout, StaticModel};
use edo::{
    AnyTable, AsyncLookup, Backend, Bags, Bounds, Element, Engine, EngineOptions, Format, GpuCache, GpuCodes, GpuLookup, GpuPrunedTable, GpuStaticModel,
    GpuTable, HostRows, Lookup, PackedTable, Placed, Pooling, PrunedTable, RecoveringEngine, Request,
};
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

/// An error as JavaScript gets it: an `Error` named `EdoError` with a stable `code` (the
/// package's wrapper turns it into its `EdoError` class) and edo's typed message.
#[derive(Debug)]
pub struct Failure {
    /// One of the codes of [`edo::Error::code`], or `INVALID_ARGUMENT`.
    pub code: &'static str,
    /// What went wrong, naming the argument or the value.
    pub message: String,
}

impl Failure {
    /// A bad argument from JavaScript (an unknown name, a wrong kind of value).
    fn arg(message: impl Into<String>) -> Failure {
        Failure { code: "INVALID_ARGUMENT", message: message.into() }
    }
}

impl From<Failure> for JsValue {
    fn from(f: Failure) -> JsValue {
        let e = js_sys::Error::new(&f.message);
        e.set_name("EdoError");
        let _ = js_sys::Reflect::set(&e, &"code".into(), &f.code.into());
        e.into()
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

fn err(e: impl Into<edo::Error>) -> Failure {
    let e = e.into();
    Failure { code: e.code(), message: e.to_string() }
}

fn format_of(name: &str) -> Result<Format, Failure> {
    Format::from_name(name).ok_or_else(|| Failure::arg(format!("unknown format {name:?} ({})", Format::ALL.map(Format::name).join(", "))))
}

/// The lookup engine: WebGPU, or the CPU path.
///
/// On WebGPU the engine survives device loss (the GPU process crashed, the driver reset, the
/// tab was moved to another GPU): it rebuilds itself on a new device and uploads every table,
/// cache, model and index made through it again, from the copies it keeps in WASM memory; calls
/// made meanwhile wait and give the rows they would have. `onDeviceEvent` hears of it.
#[wasm_bindgen]
pub struct EdoEngine {
    backend: Backend,
    listeners: Rc<RefCell<Vec<js_sys::Function>>>,
}

/// Whether `key` of `object` is there (neither undefined nor null).
fn has(object: &JsValue, key: &str) -> bool {
    js_sys::Reflect::get(object, &key.into()).is_ok_and(|v| !v.is_undefined() && !v.is_null())
}

/// Why this JavaScript context cannot have a WebGPU adapter, if it cannot: no `navigator.gpu`,
/// or neither a window nor a worker (where wgpu's WebGPU backend would panic) and no `gpu`
/// object given.
fn no_webgpu_here() -> Option<&'static str> {
    let global = js_sys::global();
    if !has(&global, "Window") && !has(&global, "WorkerGlobalScope") {
        return Some("no window or worker here, and no `gpu` given (Node: pass Dawn's, from the `webgpu` package), so no WebGPU");
    }
    let navigator = js_sys::Reflect::get(&global, &"navigator".into()).unwrap_or(JsValue::UNDEFINED);
    if !has(&navigator, "gpu") {
        return Some("no WebGPU here (no navigator.gpu)");
    }
    None
}

/// A wgpu instance over `gpu`, a `GPU` object (`navigator.gpu`, or Dawn's in Node). wgpu's
/// WebGPU backend reads `navigator.gpu` of a window or a worker's global scope while an instance
/// is made, and only then: for that moment, `globalThis.navigator` is `{ gpu }` (and
/// `globalThis.WorkerGlobalScope` is defined where neither is); both are put back before this
/// returns. Synchronous, so no other code runs meanwhile.
fn instance_over(gpu: &JsValue) -> Result<wgpu::Instance, String> {
    use js_sys::{Object, Reflect};
    let global: Object = js_sys::global().unchecked_into();
    let keys = ["navigator", "WorkerGlobalScope"];
    let saved: Vec<JsValue> = keys.iter().map(|k| Object::get_own_property_descriptor(&global, &(*k).into())).collect();
    let define = |key: &str, value: &JsValue| -> Result<bool, JsValue> {
        let descriptor = Object::new();
        Reflect::set(&descriptor, &"value".into(), value)?;
        Reflect::set(&descriptor, &"configurable".into(), &true.into())?;
        Reflect::set(&descriptor, &"writable".into(), &true.into())?;
        Reflect::define_property(&global, &key.into(), &descriptor)
    };
    let shim = || -> Result<bool, JsValue> {
        let navigator = Object::new();
        Reflect::set(&navigator, &"gpu".into(), gpu)?;
        let mut done = define("navigator", &navigator.into())?;
        if done && !has(&global, "Window") && !has(&global, "WorkerGlobalScope") {
            done = define("WorkerGlobalScope", &Object::new().into())?;
        }
        Ok(done)
    };
    let instance = match shim() {
        Ok(true) => {
            let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
            desc.backends = wgpu::Backends::BROWSER_WEBGPU;
            Ok(wgpu::Instance::new(desc))
        }
        Ok(false) => Err("globalThis.navigator cannot be replaced here".to_string()),
        Err(e) => Err(format!("globalThis.navigator cannot be replaced here ({})", e.as_string().unwrap_or_else(|| format!("{e:?}")))),
    };
    for (key, descriptor) in keys.iter().zip(&saved) {
        let _ = if descriptor.is_undefined() {
            Reflect::delete_property(&global, &(*key).into())
        } else {
            Reflect::define_property(&global, &(*key).into(), descriptor.unchecked_ref())
        };
    }
    instance
}

/// Prints every panic's message to the console before the module aborts (the browser build
/// aborts on panic, which JavaScript sees only as `RuntimeError: unreachable`). The package's
/// wrapper calls it once, right after loading the module.
#[wasm_bindgen(js_name = installPanicHook)]
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&format!("edo panicked: {info}").into());
    }));
}

/// Panics, for the package's test of the panic hook (the module is unusable afterwards).
#[doc(hidden)]
#[wasm_bindgen(js_name = __panicForTests)]
pub fn panic_for_tests() {
    panic!("the panic hook's test");
}

/// The names of every format edo stores, in `Format::ALL`'s order.
#[wasm_bindgen(js_name = formatNames)]
pub fn format_names() -> Vec<String> {
    Format::ALL.iter().map(|f| f.name().to_string()).collect()
}

/// The `GPUDevice` behind an engine, for the page's own WebGPU work.
fn device_object(engine: &Engine) -> JsValue {
    engine.device().as_webgpu().map_or(JsValue::NULL, |d| d.clone().into())
}

/// A device event as the object `onDeviceEvent` listeners get.
fn event_object(event: &RecoveryEvent) -> JsValue {
    let object = js_sys::Object::new();
    let set = |key: &str, value: JsValue| {
        let _ = js_sys::Reflect::set(&object, &key.into(), &value);
    };
    match event {
        RecoveryEvent::Lost { reason } => {
            set("type", "lost".into());
            set("reason", reason.into());
        }
        RecoveryEvent::Recovered { generation, residents, failed, bytes, millis } => {
            set("type", "recovered".into());
            set("generation", (*generation as f64).into());
            set("residents", (*residents as f64).into());
            set("failed", failed.iter().map(JsValue::from).collect::<js_sys::Array>().into());
            set("bytes", (*bytes as f64).into());
            set("millis", (*millis).into());
        }
        RecoveryEvent::Failed { reason } => {
            set("type", "failed".into());
            set("reason", reason.into());
        }
    }
    object.into()
}

impl EdoEngine {
    fn on_gpu(engine: Engine) -> EdoEngine {
        let rec = RecoveringEngine::new(engine);
        let listeners: Rc<RefCell<Vec<js_sys::Function>>> = Rc::default();
        let (weak, heard) = (rec.downgrade(), listeners.clone());
        rec.on_event(move |event| {
            let value = event_object(event);
            // After a rebuild the page's own work must move to the new device: it comes along.
            if let (RecoveryEvent::Recovered { .. }, Some(rec)) = (event, weak.upgrade()) {
                let _ = js_sys::Reflect::set(&value, &"device".into(), &device_object(&rec.engine()));
            }
            // Listeners are copied out first: one may add another.
            let fs: Vec<js_sys::Function> = heard.borrow().clone();
            for f in fs {
                let _ = f.call1(&JsValue::NULL, &value);
            }
            // The page recovers by itself: rebuild now rather than at the next call.
            if let (RecoveryEvent::Lost { .. }, Some(rec)) = (event, weak.upgrade()) {
                wasm_bindgen_futures::spawn_local(async move {
                    // A failure reaches the listeners as a "failed" event.
                    let _ = rec.recover().await;
                });
            }
        });
        EdoEngine { backend: Backend::Gpu(rec), listeners }
    }

    fn on_cpu(note: String) -> EdoEngine {
        EdoEngine { backend: Backend::cpu(note), listeners: Rc::default() }
    }

    fn engine(&self) -> Option<Engine> {
        self.backend.engine()
    }

    fn recovering(&self) -> Option<&RecoveringEngine> {
        match &self.backend {
            Backend::Gpu(r) => Some(r),
            Backend::Cpu { .. } => None,
        }
    }
}

#[wasm_bindgen]
impl EdoEngine {
    /// An engine on WebGPU when the browser offers an adapter (and `preferGpu` is not false),
    /// else on the CPU path; `backend` and `note` say which and why. `gpu`, a `GPU` object, is
    /// asked for the adapter instead of the context's `navigator.gpu` (Node with Dawn's `webgpu`
    /// package has no window, no worker and no `navigator.gpu` of its own). `maxShardBytes` lowers the
    /// size of a table shard below the device's binding limit (tests force many shards with it).
    pub async fn create(prefer_gpu: Option<bool>, max_shard_bytes: Option<f64>, gpu: JsValue) -> EdoEngine {
        if prefer_gpu == Some(false) {
            return EdoEngine::on_cpu("CPU path requested".into());
        }
        let options = EngineOptions { max_binding_bytes: max_shard_bytes.map(|b| b as u64), ..Default::default() };
        let engine = if gpu.is_undefined() || gpu.is_null() {
            // wgpu's WebGPU backend looks for a window or a worker's global scope and panics in
            // anything else (Node, Deno without a window): ask for no adapter where there is none.
            if let Some(why) = no_webgpu_here() {
                return EdoEngine::on_cpu(format!("{why}; using the CPU path"));
            }
            Engine::new(options).await
        } else {
            match instance_over(&gpu) {
                Ok(instance) => Engine::from_instance(&instance, options).await,
                Err(why) => return EdoEngine::on_cpu(format!("{why}, so no WebGPU; using the CPU path")),
            }
        };
        match engine {
            Ok(e) => EdoEngine::on_gpu(e),
            Err(e) => EdoEngine::on_cpu(format!("no WebGPU adapter ({e}); using the CPU path")),
        }
    }

    /// Calls `listener(event)` when the WebGPU device is lost and when the engine has recovered:
    /// `{type: "lost", reason}`, `{type: "recovered", generation, residents, failed, bytes,
    /// millis}` (`residents` uploaded again, `failed` the errors of those that could not be, each
    /// tried again at its next call), or `{type: "failed", reason}` when no new device could be
    /// had (calls then fail with the reason, and the next one tries again). Never called on the
    /// CPU path.
    #[wasm_bindgen(js_name = onDeviceEvent)]
    pub fn on_device_event(&self, listener: js_sys::Function) {
        self.listeners.borrow_mut().push(listener);
    }

    /// How many times the engine has been rebuilt after a device loss (0 on the CPU path).
    #[wasm_bindgen(getter)]
    pub fn generation(&self) -> f64 {
        self.recovering().map_or(0.0, |r| r.generation() as f64)
    }

    /// Rebuilds now if the device is lost (the engine also does by itself): resolves to whether
    /// it rebuilt.
    pub async fn recover(&self) -> Result<bool, Failure> {
        match self.recovering() {
            Some(r) => r.recover().await.map_err(err),
            None => Ok(false),
        }
    }

    /// Destroys the WebGPU device, as a GPU-process crash would: for testing a page's handling
    /// of device loss. The engine recovers as from a real loss.
    #[wasm_bindgen(js_name = loseDevice)]
    pub fn lose_device(&self) {
        if let Some(e) = self.engine() {
            e.destroy_device();
        }
    }

    /// `"webgpu"` or `"cpu"`.
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        web_name(self.backend.name()).into()
    }

    /// The `GPUDevice` the engine uses now (a new one after each recovery), for the page's own
    /// WebGPU work on edo's outputs; `null` on the CPU path.
    #[wasm_bindgen(getter, js_name = gpuDevice)]
    pub fn gpu_device(&self) -> JsValue {
        self.recovering().map_or(JsValue::NULL, |r| device_object(&r.engine()))
    }

    /// The adapter, or why there is none.
    #[wasm_bindgen(getter)]
    pub fn note(&self) -> String {
        self.backend.note()
    }

    /// Compiles the lookup kernel of tables of `format` and `dim` ahead of their first lookup;
    /// with `row_alignment` (a table's `rowAlignment`), the gather and small-batch bag kernels of
    /// tables whose rows are aligned so ([`edo::Engine::prepare_rows`]). WebGPU compiles in the
    /// GPU process: start this, build the table meanwhile, then await it. Resolves at once on the
    /// CPU path (after checking the alignment).
    pub async fn prepare(&self, format: String, dim: usize, row_alignment: Option<usize>) -> Result<(), Failure> {
        let format = format_of(&format)?;
        match (self.engine(), row_alignment) {
            (Some(e), Some(bytes)) => e.prepare_rows(format, dim, bytes).await.map_err(err),
            (Some(e), None) => e.prepare_gather(format, dim).await.map_err(err),
            (None, Some(bytes)) => edo::format::check_row_alignment(bytes).map_err(err),
            (None, None) => Ok(()),
        }
    }

    /// The largest storage binding a table shard may use, in bytes (0 on the CPU path).
    #[wasm_bindgen(getter, js_name = maxBindingBytes)]
    pub fn max_binding_bytes(&self) -> f64 {
        self.engine().map_or(0.0, |e| e.max_binding_bytes() as f64)
    }

    /// Makes a table resident for lookups: uploaded in shards on WebGPU, kept as is on the CPU
    /// path.
    pub async fn upload(&self, table: &EdoTable) -> Result<EdoResident, Failure> {
        let inner = match &table.inner {
            AnyTable::Pruned(p) => Resident::Pruned(self.backend.place(p.clone()).await.map_err(err)?),
            t => Resident::Dense(self.backend.place(dense_of(t, "upload")?.clone()).await.map_err(err)?),
        };
        Ok(EdoResident { inner })
    }

    /// A hot-row cache of at most `capacity` rows of `table` on the GPU, the table itself staying
    /// in WASM memory; `policy` is `"lru"`, `"lfu"` (the default), `"arc"`, or one of them behind
    /// W-TinyLFU admission (`"lru+tinylfu"`, `"lfu+tinylfu"`, `"arc+tinylfu"`). Lookups return the
    /// rows the resident table would. On the CPU path the cache is one in WASM memory (worth it
    /// over a remote table; over a table in memory it only counts).
    pub async fn cache(&self, table: &EdoTable, capacity: usize, policy: Option<String>) -> Result<EdoCache, Failure> {
        let policy = policy_of(policy.as_deref())?;
        let spec = CacheSpec { source: Arc::new(table.dense("a cache")?.clone()), capacity, policy };
        Ok(EdoCache::new(CacheInner::Local(self.backend.place(spec).await.map_err(err)?)))
    }

    /// A hot-row cache of at most `capacity` rows over a table file at `url`, read with `fetch`
    /// and `Range` requests: only the header, the checksums and the chunks holding rows that are
    /// looked up are ever downloaded. On the CPU path the cache holds the rows in WASM memory:
    /// a row it holds is never fetched again, and concurrent lookups share their fetches.
    #[wasm_bindgen(js_name = cacheRemote)]
    pub async fn cache_remote(&self, url: String, capacity: usize, policy: Option<String>) -> Result<EdoCache, Failure> {
        let policy = policy_of(policy.as_deref())?;
        let remote = RemoteTable::open(FetchReader::new(url)).await.map_err(err)?;
        let spec = CacheSpec { source: Arc::new(remote), capacity, policy };
        Ok(EdoCache::new(CacheInner::Remote(self.backend.place(spec).await.map_err(err)?)))
    }

    /// Every GPU buffer the engine holds, by owner and purpose, with the total and the budget,
    /// as JSON (`"{}"` on the CPU path).
    #[wasm_bindgen(js_name = memoryReport)]
    pub fn memory_report(&self) -> String {
        self.engine().map_or_else(|| "{}".into(), |e| e.memory_report().to_json().to_string())
    }

    /// Makes binary codes resident for Hamming search.
    #[wasm_bindgen(js_name = uploadCodes)]
    pub async fn upload_codes(&self, codes: &EdoTable) -> Result<EdoCodes, Failure> {
        Ok(EdoCodes { inner: self.backend.place(codes.dense("binary search")?.clone()).await.map_err(err)?, transform: codes.codes.clone() })
    }
}

/// A packed table in host memory (WASM linear memory), with its vocabulary if it has one; or a
/// reordered or pruned one, its rows stored in another order or some left out, looked up by the
/// same ids through its id map.
#[wasm_bindgen]
pub struct EdoTable {
    /// `Dense` or `Pruned` (a reordering, or rows left out).
    inner: AnyTable,
    vocab: Option<Vocab>,
    /// What binary codes went through (centred or ITQ codes); queries go through it too.
    codes: Option<CodeTransform>,
}

#[wasm_bindgen]
impl EdoTable {
    /// Quantises a row-major `rows × dim` table to `format`. With `keep` (a byte a row), only the
    /// rows whose byte is not 0 are stored: the others take no memory and read as zeros (FBGEMM's
    /// pruned tables). Keeping every row makes a plain table. With `row_alignment` (bytes, a power
    /// of two from 4 to 256), each stored row starts on a multiple of it once uploaded to a GPU
    /// ([`PackedTable::with_row_alignment`]).
    #[wasm_bindgen(js_name = fromFloat32)]
    pub fn from_float32(data: &[f32], rows: usize, dim: usize, format: &str, keep: Option<Vec<u8>>, row_alignment: Option<usize>) -> Result<EdoTable, Failure> {
        let format = format_of(format)?;
        // Checked before the rows are quantised.
        let alignment = row_alignment.unwrap_or(edo::format::NO_ROW_ALIGNMENT);
        edo::format::check_row_alignment(alignment).map_err(err)?;
        let inner = match keep.filter(|k| k.len() != rows || k.contains(&0)) {
            None => {
                let table = PackedTable::quantize(format, data, rows, dim).map_err(err)?;
                AnyTable::Dense(table.with_row_alignment(alignment).map_err(err)?)
            }
            Some(keep) => {
                let keep: Vec<bool> = keep.iter().map(|&k| k != 0).collect();
                let pruned = PrunedTable::quantize(format, data, rows, dim, &keep).map_err(err)?;
                AnyTable::Pruned(pruned.with_row_alignment(alignment).map_err(err)?)
            }
        };
        Ok(EdoTable { inner, vocab: None, codes: None })
    }

    /// edo's built-in synthetic table (the demo's default), as f32.
    pub fn synthetic(rows: usize, dim: usize, seed: u32) -> Result<EdoTable, Failure> {
        Ok(EdoTable { inner: AnyTable::Dense(edo::synth::embedding_packed(rows, dim, seed as u64).map_err(err)?), vocab: None, codes: None })
    }

    /// Reads the bytes of a file, its kind from `name`'s extension: an `.edo` table file (checked
    /// against its checksums), or a `.npy` / `.safetensors` / `.gguf` (`tensor`, by default
    /// `token_embd.weight`; ggml blocks kept as they are) / word2vec `.txt` table, which is
    /// quantised to `format` (default: kept as f32, or as packed for byte arrays, whose `layout`
    /// must be named: fbgemm8, fbgemm4, packbits, packbits-lsb, or the format `edo export` wrote
    /// them in; `dim` where the width fits several).
    #[wasm_bindgen(js_name = fromBytes)]
    pub fn from_bytes(
        bytes: Vec<u8>,
        name: &str,
        format: Option<String>,
        layout: Option<String>,
        tensor: Option<String>,
        dim: Option<u32>,
    ) -> Result<EdoTable, Failure> {
        let kind = FileKind::from_path(std::path::Path::new(name))
            .ok_or_else(|| Failure::arg(format!("{name}: edo reads .edo, .npy, .safetensors, .gguf and .txt/.vec files")))?;
        let layout = match layout.as_deref() {
            None | Some("") => FileLayout::Dense,
            Some(l) => FileLayout::from_name(l, dim.map(|d| d as usize)).ok_or_else(|| Failure::arg(format!("unknown layout {l:?}")))?,
        };
        let mut codes = None;
        let imported = match kind {
            FileKind::Edo => {
                // A reordered table's file (it holds an id map) is read with its map; the bytes
                // are shared by the two tries, not copied.
                let bytes = SharedBytes(Arc::new(bytes));
                let file = match TableFile::from_bytes(bytes.clone()) {
                    Err(edo::Error::Unsupported(edo::Unsupported::ReorderedTableFile)) => return EdoTable::reordered_file(bytes, format.as_deref()),
                    file => file.map_err(err)?,
                };
                file.verify().map_err(err)?;
                let vocab = file.vocab().cloned();
                codes = file.code_transform().cloned();
                import::Imported { table: import::Table::Packed(file.into_table()), vocab, lossy_tokens: 0 }
            }
            FileKind::Npy => import::npy(&bytes, layout).map_err(err)?,
            FileKind::Safetensors => import::safetensors(&bytes, tensor.as_deref(), layout).map_err(err)?,
            FileKind::Text => import::text(&bytes).map_err(err)?,
            FileKind::Gguf => {
                let file = edo::file::gguf::Gguf::parse(&bytes).map_err(err)?;
                file.table(&bytes, tensor.as_deref().unwrap_or(edo::file::gguf::EMBEDDING_TENSOR)).map_err(err)?
            }
        };
        let target = match format.as_deref() {
            Some(f) if !f.is_empty() => format_of(f)?,
            _ => imported.format(),
        };
        // Codes made through a transform stay binary codes: in another format their values would
        // be the transformed rows' signs, searched without the transform.
        if let (Some(t), true) = (&codes, target != Format::Binary) {
            return Err(Failure::arg(format!("{name} holds {} codes: they stay binary (make {target} rows from the table they came from)", t.kind())));
        }
        let inner = AnyTable::Dense(imported.to_format(target).map_err(err)?);
        Ok(EdoTable { inner, vocab: imported.vocab, codes })
    }

    /// The same table in another format (decoded and requantised); a reordered or pruned table
    /// keeps its id map.
    pub fn quantize(&self, format: &str) -> Result<EdoTable, Failure> {
        let format = format_of(format)?;
        if let (Some(t), true) = (&self.codes, format != Format::Binary) {
            return Err(Failure::arg(format!("these are {} codes: they stay binary (make {format} rows from the table they came from)", t.kind())));
        }
        let inner = match &self.inner {
            AnyTable::Pruned(p) => AnyTable::Pruned(PrunedTable::from_remap(p.table().requantize(format).map_err(err)?, p.remap().to_vec()).map_err(err)?),
            t => AnyTable::Dense(dense_of(t, "quantize")?.requantize(format).map_err(err)?),
        };
        Ok(EdoTable { inner, vocab: self.vocab.clone(), codes: self.codes.clone() })
    }

    /// The table with its rows stored by lookup count, the most looked-up first (`edo reorder`):
    /// `counts` holds one count a row. Lookups take the same ids and give the same rows; the
    /// rows they touch most lie together. The vocabulary is not carried over (a reordered table
    /// is looked up by id).
    #[wasm_bindgen(js_name = reorderByCounts)]
    pub fn reorder_by_counts(&self, counts: &[u32]) -> Result<EdoTable, Failure> {
        let table = self.dense("reorderByCounts")?;
        if counts.len() != table.rows() {
            return Err(Failure::arg(format!("counts has {} counts; {} were expected (one a row)", counts.len(), table.rows())));
        }
        self.reordered(table, &counts.iter().map(|&c| u64::from(c)).collect::<Vec<_>>())
    }

    /// [`EdoTable::reorder_by_counts`] with the counts of a trace of the ids looked up (an id out
    /// of range is an error).
    #[wasm_bindgen(js_name = reorderByTrace)]
    pub fn reorder_by_trace(&self, ids: &[u32]) -> Result<EdoTable, Failure> {
        let table = self.dense("reorderByTrace")?;
        self.reordered(table, &edo::prune::lookup_counts(ids, table.rows()).map_err(err)?)
    }

    /// Whether the table is reordered or pruned: its rows are stored in another order than its
    /// ids, or some are left out; lookups go through its id map.
    #[wasm_bindgen(getter)]
    pub fn remapped(&self) -> bool {
        matches!(self.inner, AnyTable::Pruned(_))
    }

    /// Bytes each row starts on once uploaded to a GPU: 4 (packed) unless the table asked for
    /// more (`rowAlignment` of `createTable`, or an `.edo` file's).
    #[wasm_bindgen(getter, js_name = rowAlignment)]
    pub fn row_alignment(&self) -> usize {
        self.stored().row_alignment()
    }

    /// Rows stored: `rows` for a plain or reordered table, fewer for a pruned one.
    #[wasm_bindgen(getter, js_name = storedRows)]
    pub fn stored_rows(&self) -> usize {
        self.stored().rows()
    }

    /// Binary codes of this table's rows that keep more neighbours than their signs: `kind`
    /// "centered" (the mean row subtracted first) or "itq" (centred, then rotated by a rotation
    /// trained on the rows, `iterations` steps, default 50; needs more rows than dim). The codes
    /// keep their transform: `uploadCodes` searches with queries put through it, and `toBytes`
    /// stores it.
    #[wasm_bindgen(js_name = quantizeCodes)]
    pub fn quantize_codes(&self, kind: &str, iterations: Option<usize>) -> Result<EdoTable, Failure> {
        let table = self.dense("quantizeCodes")?;
        if matches!(table.format(), Format::Binary | Format::BinaryScaled) {
            // Their values are ±1 (or ±scale) signs already, of rows no longer here.
            return Err(Failure::arg(format!("quantizeCodes of a {} table: make codes from the table of values they came from", table.format())));
        }
        let values = table.dequantize();
        let dim = table.dim();
        let transform = match kind {
            "centered" | "centred" => CodeTransform::centered(&values, dim),
            "itq" => CodeTransform::itq(&values, dim, &ItqOptions { iterations: iterations.unwrap_or(50), ..Default::default() }),
            _ => return Err(Failure::arg(format!("unknown codes {kind:?} (centered, itq)"))),
        }
        .map_err(err)?;
        let inner = AnyTable::Dense(transform.encode(&values).map_err(err)?);
        Ok(EdoTable { inner, vocab: self.vocab.clone(), codes: Some(transform) })
    }

    /// The transform binary codes went through: "centered", "itq", or undefined (plain signs, or
    /// not codes).
    #[wasm_bindgen(getter)]
    pub fn codes(&self) -> Option<String> {
        self.codes.as_ref().map(|t| t.kind().to_string())
    }

    #[wasm_bindgen(getter)]
    pub fn format(&self) -> String {
        self.stored().format().name().into()
    }
    /// Rows the ids address (for a pruned table, counting the rows left out).
    #[wasm_bindgen(getter)]
    pub fn rows(&self) -> usize {
        Lookup::rows(&self.inner)
    }
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        Lookup::dim(&self.inner)
    }
    /// Bytes of packed storage (what the GPU holds; with a reordered or pruned table's id map).
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        Lookup::bytes(&self.inner) as f64
    }
    /// Bytes of the same table as f32 (every row of `rows`).
    #[wasm_bindgen(getter, js_name = f32Bytes)]
    pub fn f32_bytes(&self) -> f64 {
        // In u64: rows × dim × 4 passes a wasm32 usize at 2³² bytes.
        (self.rows() as u64 * self.dim() as u64 * 4) as f64
    }

    /// Decoded rows of `ids` on the CPU path (an id out of range is an error; a pruned row
    /// reads as zeros).
    pub fn gather(&self, ids: &[u32]) -> Result<Vec<f32>, Failure> {
        Ok(self.inner.lookup(&Request::gather(ids, Bounds::Error)).map_err(err)?.into_f32())
    }

    /// The row of `token`, if the table has a vocabulary holding it.
    #[wasm_bindgen(js_name = idOf)]
    pub fn id_of(&self, token: &str) -> Option<u32> {
        self.vocab.as_ref().and_then(|v| v.id(token).ok())
    }

    /// The table as `.edo` file bytes; `chunkBytes` sets the bytes of rows per checksum (default
    /// 1 MiB; small chunks, such as 4096, suit files read remotely row by row).
    #[wasm_bindgen(js_name = toBytes)]
    pub fn to_bytes(&self, chunk_bytes: Option<usize>) -> Result<Vec<u8>, Failure> {
        let table = match &self.inner {
            // Its rows and id map; a pruned table (rows left out) is refused: the format does
            // not hold absent rows.
            AnyTable::Pruned(p) if !p.is_reordering() => {
                return Err(Failure {
                    code: "UNSUPPORTED",
                    message: format!("toBytes of a pruned table ({} of {} rows kept): a .edo file stores every row", p.table().rows(), p.original_rows()),
                })
            }
            AnyTable::Pruned(p) => return p.to_bytes(chunk_bytes, &Default::default()).map_err(err),
            t => dense_of(t, "toBytes")?,
        };
        let mut file = TableFile::new(table.clone());
        if let Some(bytes) = chunk_bytes {
            file = file.with_chunk_bytes(bytes).map_err(err)?;
        }
        if let Some(v) = &self.vocab {
            file = file.with_vocab(v.clone()).map_err(err)?;
        }
        if let Some(t) = &self.codes {
            file = file.with_code_transform(t.clone()).map_err(err)?;
        }
        Ok(file.to_bytes())
    }
}

impl EdoTable {
    /// A reordered table's `.edo` file (one with an id map), requantised to `format` if given.
    fn reordered_file(bytes: SharedBytes, format: Option<&str>) -> Result<EdoTable, Failure> {
        let table = EdoTable { inner: AnyTable::Pruned(PrunedTable::from_file_bytes(bytes).map_err(err)?), vocab: None, codes: None };
        match format.filter(|f| !f.is_empty()) {
            Some(f) => table.quantize(f),
            None => Ok(table),
        }
    }

    /// `table`'s rows stored by `counts` (one a row), most first.
    fn reordered(&self, table: &PackedTable, counts: &[u64]) -> Result<EdoTable, Failure> {
        if let Some(t) = &self.codes {
            return Err(Failure::arg(format!(
                "these are {} codes: a reordered table would not keep their transform (reorder the table before making codes)",
                t.kind()
            )));
        }
        let order = edo::prune::frequency_order(counts);
        Ok(EdoTable { inner: AnyTable::Pruned(PrunedTable::reorder(table, &order).map_err(err)?), vocab: None, codes: None })
    }

    /// The packed table the rows are stored in.
    fn stored(&self) -> &PackedTable {
        match &self.inner {
            AnyTable::Dense(t) => t,
            AnyTable::Pruned(p) => p.table(),
            // (Not made by this API; its hot rows' table.)
            AnyTable::Mixed(m) => m.hot(),
        }
    }

    /// The table, for what needs its rows in id order (`what`, named in the error).
    fn dense(&self, what: &str) -> Result<&PackedTable, Failure> {
        dense_of(&self.inner, what)
    }
}

/// `table` if it is a plain packed one; else an `UNSUPPORTED` failure naming `what`.
fn dense_of<'a>(table: &'a AnyTable, what: &str) -> Result<&'a PackedTable, Failure> {
    match table {
        AnyTable::Dense(t) => Ok(t),
        _ => Err(Failure {
            code: "UNSUPPORTED",
            message: format!("{what} of a reordered or pruned table: its rows are not stored in id order (use the table it was made from)"),
        }),
    }
}

/// A file's bytes, shared by the readers that try them.
#[derive(Clone)]
struct SharedBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// The page's name of a backend: `"webgpu"` or `"cpu"`.
fn web_name(backend: &str) -> &'static str {
    if backend == "gpu" {
        "webgpu"
    } else {
        "cpu"
    }
}

/// A table ready for lookups (on the GPU, its host copy inside for recovery, or on the CPU path).
#[wasm_bindgen]
pub struct EdoResident {
    inner: Resident,
}

/// A placed table of either kind the package makes. (Not `AnyGpuTable`, whose mixed tables would
/// put their kernels in the `.wasm` for nothing.)
enum Resident {
    Dense(Placed<GpuTable>),
    Pruned(Placed<GpuPrunedTable>),
}

/// `$e` with `$p` bound to the `Placed` inside a [`Resident`], whichever kind it is.
macro_rules! each_resident {
    ($r:expr, $p:ident => $e:expr) => {
        match $r {
            Resident::Dense($p) => $e,
            Resident::Pruned($p) => $e,
        }
    };
}

/// PyTorch's `indices` and `offsets`, with per-sample weights if there are any.
fn bags_of<'a>(indices: &'a [u32], offsets: &'a [u32], weights: Option<&'a [f32]>) -> Bags<'a> {
    let bags = Bags::new(indices, offsets);
    match weights {
        Some(w) => bags.weights(w),
        None => bags,
    }
}

fn pooling_of(name: &str) -> Result<Pooling, Failure> {
    Ok(match name {
        "sum" => Pooling::Sum,
        "mean" => Pooling::Mean,
        "max" => Pooling::Max,
        "none" => Pooling::None,
        _ => return Err(Failure::arg(format!("unknown pooling {name:?} (sum, mean, max, none)"))),
    })
}

#[wasm_bindgen]
impl EdoResident {
    /// `"webgpu"` or `"cpu"`.
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        web_name(each_resident!(&self.inner, p => p.backend())).into()
    }
    /// Storage buffers the table is split into (0 on the CPU path).
    #[wasm_bindgen(getter)]
    pub fn shards(&self) -> usize {
        match &self.inner {
            Resident::Dense(Placed::Gpu(g)) => g.latest().map_or(0, |t| t.shard_count()),
            Resident::Pruned(Placed::Gpu(g)) => g.latest().map_or(0, |t| t.shard_count()),
            Resident::Dense(Placed::Cpu(_)) | Resident::Pruned(Placed::Cpu(_)) => 0,
        }
    }

    /// Decoded rows of `ids` (`ids.length × dim` values). An id out of range is an error.
    pub async fn gather(&self, ids: Vec<u32>) -> Result<Vec<f32>, Failure> {
        Ok(self.answer(&Request::gather(&ids, Bounds::Error)).await?.into_f32())
    }

    /// [`EdoResident::gather`] rounded to f16 (nearest even), as the bits of each value
    /// (`ids.length × dim` of them): on WebGPU the gather writes f16 itself, half the bytes.
    #[wasm_bindgen(js_name = gatherF16)]
    pub async fn gather_f16(&self, ids: Vec<u32>) -> Result<Vec<u16>, Failure> {
        let values = self.answer(&Request::gather(&ids, Bounds::Error).element(Element::F16)).await?.into_f16();
        Ok(values.into_iter().map(|v| v.to_bits()).collect())
    }

    /// [`EdoResident::gather`] left on the GPU: the rows in a storage buffer of edo's device
    /// (`EdoEngine.gpuDevice`). Fails with `UNSUPPORTED` on the CPU path.
    #[wasm_bindgen(js_name = gatherGpu)]
    pub async fn gather_gpu(&self, ids: Vec<u32>) -> Result<EdoGpuRows, Failure> {
        self.answer_on_gpu(&Request::gather(&ids, Bounds::Error)).await
    }

    /// [`EdoResident::bag`] left on the GPU (see `gatherGpu`).
    #[wasm_bindgen(js_name = bagGpu)]
    pub async fn bag_gpu(&self, indices: Vec<u32>, offsets: Vec<u32>, pooling: &str, weights: Option<Vec<f32>>) -> Result<EdoGpuRows, Failure> {
        let pooling = pooling_of(pooling)?;
        let bags = bags_of(&indices, &offsets, weights.as_deref());
        self.answer_on_gpu(&Request::bag(&bags, pooling, Bounds::Error)).await
    }

    /// EmbeddingBag with PyTorch's `indices` + `offsets` (one offset per bag), pooling `sum`,
    /// `mean`, `max` or `none`, optional per-sample weights.
    pub async fn bag(&self, indices: Vec<u32>, offsets: Vec<u32>, pooling: &str, weights: Option<Vec<f32>>) -> Result<Vec<f32>, Failure> {
        let pooling = pooling_of(pooling)?;
        let bags = bags_of(&indices, &offsets, weights.as_deref());
        Ok(self.answer(&Request::bag(&bags, pooling, Bounds::Error)).await?.into_f32())
    }
}

impl EdoResident {
    /// Every lookup of the table that comes back to the page: one [`Request`], on either path
    /// (the exports above only build it).
    async fn answer(&self, request: &Request<'_>) -> Result<HostRows, Failure> {
        each_resident!(&self.inner, p => p.lookup(request).await).map_err(err)
    }

    /// Every lookup of the table left on the GPU.
    async fn answer_on_gpu(&self, request: &Request<'_>) -> Result<EdoGpuRows, Failure> {
        EdoGpuRows::new(each_resident!(&self.inner, p => match p {
            Placed::Gpu(rec) => rec.run(async |t| GpuLookup::lookup(t, request).await).await,
            Placed::Cpu(_) => return Err(not_on_gpu()),
        }))
    }
}

fn not_on_gpu() -> Failure {
    Failure { code: "UNSUPPORTED", message: "rows stay on the GPU only on a WebGPU engine; this one runs on the CPU path".into() }
}

/// Rows left on the GPU by a lookup or a model: a storage buffer of the engine's `GPUDevice`
/// holding `rows × dim` values, f32 (`dtype` `"float32"`) or f16 two a word (`"float16"`), row
/// after row. `read()` copies them back; `destroy()` frees the buffer at once (it is freed too
/// when this object is).
#[wasm_bindgen]
pub struct EdoGpuRows {
    inner: Option<edo::GpuRows>,
}

impl EdoGpuRows {
    fn new(rows: Result<edo::GpuRows, edo::Error>) -> Result<EdoGpuRows, Failure> {
        Ok(EdoGpuRows { inner: Some(rows.map_err(err)?) })
    }

    fn live(&self) -> Result<&edo::GpuRows, Failure> {
        self.inner.as_ref().ok_or_else(|| Failure { code: "DISPOSED", message: "these GPU rows were destroyed".into() })
    }
}

#[wasm_bindgen]
impl EdoGpuRows {
    /// The `GPUBuffer` (usages STORAGE, COPY_SRC, COPY_DST); `null` once destroyed.
    #[wasm_bindgen(getter)]
    pub fn buffer(&self) -> JsValue {
        self.inner.as_ref().and_then(|r| r.buffer().as_webgpu()).map_or(JsValue::NULL, |b| b.clone().into())
    }
    /// Rows of the output.
    #[wasm_bindgen(getter)]
    pub fn rows(&self) -> usize {
        self.inner.as_ref().map_or(0, |r| r.rows())
    }
    /// Values per row.
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.inner.as_ref().map_or(0, |r| r.dim())
    }
    /// `"float32"`, or `"float16"` for f16 rows (two values a 32-bit word).
    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> String {
        if self.inner.as_ref().is_some_and(|r| r.is_f16()) { "float16" } else { "float32" }.into()
    }
    /// Bytes of the buffer that hold rows.
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        self.inner.as_ref().map_or(0.0, |r| (r.rows() * r.row_words() * 4) as f64)
    }
    /// The rows read back, as f32 values (f16 rows widened).
    pub async fn read(&self) -> Result<Vec<f32>, Failure> {
        // `GpuRows::read` widens f16 rows itself.
        self.live()?.read().await.map_err(err)
    }
    /// Frees the buffer now (`GPUBuffer.destroy()`); reading it afterwards is a `DISPOSED` error.
    pub fn destroy(&mut self) {
        self.inner = None;
    }
}

/// A cache over a table in WASM memory or over a remote table file.
enum CacheInner {
    Local(Placed<GpuCache<Arc<PackedTable>>>),
    Remote(Placed<GpuCache<Arc<RemoteTable<FetchReader>>>>),
}

/// Reads byte ranges of a URL with `fetch` and a `Range` header. Cross-origin servers must allow
/// the `Range` request header and expose `Content-Range` (CORS).
struct FetchReader {
    url: String,
    options: HttpOptions,
}

/// Why one fetch failed: whether a retry may help, and the error.
struct Attempt {
    retry: bool,
    error: edo::Error,
}

impl FetchReader {
    fn new(url: String) -> FetchReader {
        FetchReader { url, options: HttpOptions::default() }
    }

    fn js(&self, what: &str, e: JsValue) -> edo::Error {
        edo::Error::Remote { location: self.url.clone(), message: format!("{what}: {}", e.as_string().unwrap_or_else(|| format!("{e:?}"))) }
    }

    /// One fetch of `range`, aborted after `timeout_ms` (`AbortSignal.timeout`, which covers
    /// the body too).
    async fn attempt(&self, range: &std::ops::Range<u64>, timeout_ms: u32) -> Result<(Vec<u8>, u64), Attempt> {
        use wasm_bindgen::JsCast;
        use wasm_bindgen_futures::JsFuture;
        let fatal = |error| Attempt { retry: false, error };
        let headers = web_sys::Headers::new().map_err(|e| fatal(self.js("headers", e)))?;
        headers.set("Range", &range_header(range)).map_err(|e| fatal(self.js("headers", e)))?;
        let init = web_sys::RequestInit::new();
        init.set_method("GET");
        init.set_headers(&headers);
        init.set_signal(Some(&web_sys::AbortSignal::timeout_with_u32(timeout_ms)));
        let request = web_sys::Request::new_with_str_and_init(&self.url, &init).map_err(|e| fatal(self.js("request", e)))?;
        let promise = match web_sys::window() {
            Some(w) => w.fetch_with_request(&request),
            None => js_sys::global().unchecked_into::<web_sys::WorkerGlobalScope>().fetch_with_request(&request),
        };
        // fetch rejects on a network failure or the timeout: both worth a retry.
        let response: web_sys::Response = JsFuture::from(promise).await.map_err(|e| Attempt { retry: true, error: self.js("fetch", e) })?.unchecked_into();
        let status = response.status();
        let content_range = response.headers().get("content-range").ok().flatten();
        let (len, total) = range_reply(&self.url, range, status, content_range.as_deref())
            .map_err(|error| Attempt { retry: matches!(status, 429 | 502 | 503 | 504), error })?;
        if len == 0 {
            return Ok((Vec::new(), total));
        }
        let body = response.array_buffer().map_err(|e| fatal(self.js("body", e)))?;
        let buffer = JsFuture::from(body).await.map_err(|e| Attempt { retry: true, error: self.js("body", e) })?;
        let mut bytes = js_sys::Uint8Array::new(&buffer).to_vec();
        if (bytes.len() as u64) < len {
            return Err(Attempt { retry: true, error: self.js("body", format!("cut short: {} of {len} bytes from {}", bytes.len(), range.start).into()) });
        }
        bytes.truncate((range.end - range.start) as usize);
        Ok((bytes, total))
    }
}

/// Resolves after `ms` milliseconds (a timer of the window or the worker).
async fn sleep_ms(ms: u32) {
    use wasm_bindgen::JsCast;
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let _ = match web_sys::window() {
            Some(w) => w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms as i32),
            None => js_sys::global().unchecked_into::<web_sys::WorkerGlobalScope>().set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms as i32),
        };
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

impl RangeReader for FetchReader {
    async fn read(&self, range: std::ops::Range<u64>) -> Result<(Vec<u8>, u64), edo::Error> {
        self.read_by(range, None).await
    }

    /// Retries as `HttpReader` does natively (`HttpOptions`: what is safe to retry, with
    /// doubling waits), each fetch aborted at the request timeout or the call's deadline.
    async fn read_by(&self, range: std::ops::Range<u64>, deadline: Option<web_time::Instant>) -> Result<(Vec<u8>, u64), edo::Error> {
        let left = || deadline.map(|d| d.saturating_duration_since(web_time::Instant::now()));
        let mut wait = self.options.backoff;
        let mut tries = 0;
        loop {
            let timeout = left().map_or(self.options.request_timeout, |l| l.min(self.options.request_timeout));
            if timeout.is_zero() {
                return Err(edo::Error::Remote { location: self.url.clone(), message: "the call's deadline passed (RemoteLimits::deadline)".into() });
            }
            let result = self.attempt(&range, timeout.as_millis().clamp(1, u32::MAX as u128) as u32).await;
            if result.is_err() && left().is_some_and(|l| l.is_zero()) {
                return Err(edo::Error::Remote {
                    location: self.url.clone(),
                    message: format!("the call's deadline passed (RemoteLimits::deadline) while bytes {}..{} were on their way", range.start, range.end),
                });
            }
            match result {
                Ok(r) => return Ok(r),
                Err(Attempt { retry: true, .. }) if tries < self.options.retries && left().is_none_or(|l| l > wait) => {
                    tries += 1;
                    sleep_ms(wait.as_millis().min(u32::MAX as u128) as u32).await;
                    wait = wait.saturating_mul(2);
                }
                Err(Attempt { error: edo::Error::Remote { location, message }, .. }) if tries > 0 => {
                    return Err(edo::Error::Remote { location, message: format!("{message} (after {tries} retr{})", if tries == 1 { "y" } else { "ies" }) });
                }
                Err(Attempt { error, .. }) => return Err(error),
            }
        }
    }

    fn name(&self) -> String {
        self.url.clone()
    }
}

/// A hot-row cache over a table in WASM memory or a remote file (see `EdoEngine.cache` and
/// `cacheRemote`). On WebGPU one lookup at a time: a call made while another is pending is
/// refused with an error. On the CPU path lookups may overlap (they share their fetches).
#[wasm_bindgen]
pub struct EdoCache {
    inner: RefCell<CacheInner>,
    /// Fixed at creation, so reading it never waits on the lookup in flight.
    backend: &'static str,
}

impl EdoCache {
    fn new(inner: CacheInner) -> EdoCache {
        let backend = web_name(match &inner {
            CacheInner::Local(c) => c.backend(),
            CacheInner::Remote(c) => c.backend(),
        });
        EdoCache { inner: RefCell::new(inner), backend }
    }
}

fn policy_of(name: Option<&str>) -> Result<PolicyKind, Failure> {
    match name {
        None => Ok(PolicyKind::Lfu),
        Some(name) => {
            PolicyKind::from_name(name).ok_or_else(|| Failure::arg(format!("unknown policy {name:?} ({})", PolicyKind::ALL.map(|k| k.name()).join(", "))))
        }
    }
}

fn busy() -> Failure {
    Failure { code: "BUSY", message: "this cache is serving another call; await it first".into() }
}

#[wasm_bindgen]
impl EdoCache {
    /// `"webgpu"` or `"cpu"`.
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        self.backend.into()
    }

    /// Decoded rows of `ids` (`ids.length × dim` values), loading missing rows into the cache.
    /// On WebGPU one lookup at a time (a call meanwhile is refused); on the CPU path lookups may
    /// overlap, and a row one of them is fetching is not fetched again by another.
    // The GPU cache stays borrowed while the lookup awaits the GPU: that is the "one lookup at a
    // time" rule, and a call meanwhile gets `busy()` from `try_borrow_mut`, never a panic.
    #[allow(clippy::await_holding_refcell_ref)]
    pub async fn gather(&self, ids: Vec<u32>) -> Result<Vec<f32>, Failure> {
        if self.backend == "cpu" {
            let inner = self.inner.try_borrow().map_err(|_| busy())?;
            return match &*inner {
                CacheInner::Local(c) => c.gather(&ids, Bounds::Error).await.map_err(err),
                CacheInner::Remote(c) => c.gather(&ids, Bounds::Error).await.map_err(err),
            };
        }
        let mut inner = self.inner.try_borrow_mut().map_err(|_| busy())?;
        match &mut *inner {
            CacheInner::Local(c) => c.gather(&ids, Bounds::Error).await.map_err(err),
            CacheInner::Remote(c) => c.gather(&ids, Bounds::Error).await.map_err(err),
        }
    }

    /// Stages the rows of the next batch that are not cached (call it while the current one is
    /// used): on WebGPU uploaded beside the cache, on the CPU path fetched and kept beside it. The
    /// next `gather` takes them instead of loading them; a `gather` on the CPU path that misses a
    /// row this prefetch is still fetching waits for that fetch. Returns how many rows.
    #[allow(clippy::await_holding_refcell_ref)] // as in `gather`
    pub async fn prefetch(&self, ids: Vec<u32>) -> Result<usize, Failure> {
        if self.backend == "cpu" {
            let inner = self.inner.try_borrow().map_err(|_| busy())?;
            return match &*inner {
                CacheInner::Local(c) => c.prefetch(&ids).await.map_err(err),
                CacheInner::Remote(c) => c.prefetch(&ids).await.map_err(err),
            };
        }
        let mut inner = self.inner.try_borrow_mut().map_err(|_| busy())?;
        match &mut *inner {
            CacheInner::Local(c) => c.prefetch(&ids).await.map_err(err),
            CacheInner::Remote(c) => c.prefetch(&ids).await.map_err(err),
        }
    }

    /// Hits, misses, evictions, bytes loaded into the cache (`bytesUploaded`), hit rate,
    /// capacity, rows cached, rows prefetches staged (`prefetched`) and misses served from them
    /// (`servedFromStaging`) and — on the CPU path — ids whose row came from another overlapping
    /// lookup's fetch (`sharedReads`, per id), as JSON; a remote table's requests and bytes
    /// fetched too.
    #[wasm_bindgen(getter)]
    pub fn stats(&self) -> Result<String, Failure> {
        let inner = self.inner.try_borrow().map_err(|_| busy())?;
        /// The cache's figures; a GPU cache being rebuilt after a device loss has none yet.
        fn figures<S: edo::cache::RowSource + Clone + 'static>(c: &Placed<GpuCache<S>>, traffic: Option<(u64, u64)>) -> Result<String, Failure> {
            if let Placed::Gpu(g) = c {
                g.latest().ok_or_else(|| Failure { code: "DEVICE_LOST", message: "the cache is being rebuilt after a device loss".into() })?;
            }
            let (s, (cached, capacity)) = (c.stats(), c.occupancy());
            let traffic = traffic.map_or(String::new(), |(r, b)| format!(r#","requests":{r},"bytesFetched":{b}"#));
            Ok(format!(
                r#"{{"hits":{},"misses":{},"evictions":{},"bytesUploaded":{},"hitRate":{},"capacity":{capacity},"cachedRows":{cached},"sharedReads":{},"prefetched":{},"servedFromStaging":{}{traffic}}}"#,
                s.hits,
                s.misses,
                s.evictions,
                s.bytes_uploaded,
                s.hit_rate(),
                s.shared_reads,
                s.prefetched,
                s.served_from_staging
            ))
        }
        match &*inner {
            CacheInner::Local(c) => figures(c, None),
            CacheInner::Remote(c) => figures(c, Some(c.host().source.traffic())),
        }
    }
}

/// Binary codes ready for Hamming search (on the GPU, their host copy inside for recovery, or on
/// the CPU path).
#[wasm_bindgen]
pub struct EdoCodes {
    inner: Placed<GpuCodes>,
    /// The codes' transform: queries go through it.
    transform: Option<CodeTransform>,
}

/// Search results: `ids` and `distances`, `k` per query, nearest first.
#[wasm_bindgen]
pub struct EdoNeighbors {
    k: usize,
    ids: Vec<u32>,
    distances: Vec<u32>,
}

#[wasm_bindgen]
impl EdoNeighbors {
    #[wasm_bindgen(getter)]
    pub fn k(&self) -> usize {
        self.k
    }
    #[wasm_bindgen(getter)]
    pub fn ids(&self) -> Vec<u32> {
        self.ids.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn distances(&self) -> Vec<u32> {
        self.distances.clone()
    }
}

#[wasm_bindgen]
impl EdoCodes {
    /// Exact Hamming top-`k` of the float `queries` (binarised, `x > 0`, after the codes'
    /// transform if they have one), ties to the lower row.
    pub async fn search(&self, queries: Vec<f32>, k: usize) -> Result<EdoNeighbors, Failure> {
        let dim = self.inner.host().dim();
        let queries = match &self.transform {
            Some(t) => t.encode(&queries),
            None => edo::search::binarize(&queries, dim),
        }
        .map_err(err)?;
        let n = self.inner.hamming_topk(&queries, k).await.map_err(err)?;
        Ok(EdoNeighbors { k: n.k, ids: n.ids, distances: n.distances })
    }
}

/// A static embedding model — model2vec's "potion" models, sentence-transformers'
/// `StaticEmbedding`, WordLlama: tokenizer, table (in any edo format) and pooling. `embed` runs it
/// on the CPU path; `EdoEngine.uploadModel` puts its table on the GPU.
#[wasm_bindgen]
pub struct EdoModel {
    inner: StaticModel,
}

#[wasm_bindgen]
impl EdoModel {
    /// A model from the bytes of an `.edo` model file (`edo quantize-model`).
    #[wasm_bindgen(js_name = fromBytes)]
    pub fn from_bytes(bytes: Vec<u8>) -> Result<EdoModel, Failure> {
        Ok(EdoModel { inner: StaticModel::from_edo_bytes(bytes).map_err(err)? })
    }

    /// A model from a folder's files: `config.json` (`undefined` for none), `tokenizer.json` and
    /// `model.safetensors` (model2vec's layout, or sentence-transformers' `embedding.weight`),
    /// encoded as model2vec encodes them. For sentence-transformers' own encoding of its folders,
    /// make an `.edo` model file of the folder (`edo quantize-model DIR`) and use `fromBytes`.
    /// A sentence-transformers static model from its files: `modules.json` and
    /// `config_sentence_transformers.json` (either may be absent; checked as natively), and its
    /// StaticEmbedding module's `tokenizer.json` and `model.safetensors`.
    #[wasm_bindgen(js_name = fromSentenceTransformers)]
    pub fn from_sentence_transformers(modules: Option<Vec<u8>>, config: Option<Vec<u8>>, tokenizer: &[u8], safetensors: &[u8]) -> Result<EdoModel, Failure> {
        let layout = SentenceTransformersLayout::check(modules.as_deref(), config.as_deref()).map_err(err)?;
        Ok(EdoModel { inner: StaticModel::from_sentence_transformers(tokenizer, safetensors, layout.normalize).map_err(err)? })
    }

    /// The folder of the StaticEmbedding module a `modules.json` names ("" for the top), checked;
    /// undefined when it names none.
    #[wasm_bindgen(js_name = sentenceTransformersModule)]
    pub fn sentence_transformers_module(modules: &[u8]) -> Result<Option<String>, Failure> {
        Ok(SentenceTransformersLayout::check(Some(modules), None).map_err(err)?.module)
    }

    #[wasm_bindgen(js_name = fromFiles)]
    pub fn from_files(config: Option<Vec<u8>>, tokenizer: &[u8], safetensors: &[u8]) -> Result<EdoModel, Failure> {
        let config = config.unwrap_or_else(|| b"{}".to_vec());
        Ok(EdoModel { inner: StaticModel::from_bytes(&config, tokenizer, safetensors).map_err(err)? })
    }

    /// A model from an `.edo` model file at `url`, fetched whole.
    #[wasm_bindgen(js_name = fromUrl)]
    pub async fn from_url(url: String) -> Result<EdoModel, Failure> {
        let bytes = fetch_all(&url).await.map_err(err)?;
        EdoModel::from_bytes(bytes)
    }

    /// The same model with its table in another format.
    pub fn quantize(&self, format: &str) -> Result<EdoModel, Failure> {
        Ok(EdoModel { inner: self.inner.quantize(format_of(format)?).map_err(err)? })
    }

    /// The model as `.edo` model file bytes (table, tokenizer, mapping, weights, settings).
    #[wasm_bindgen(js_name = toBytes)]
    pub fn to_bytes(&self) -> Vec<u8> {
        self.inner.to_edo().to_bytes()
    }

    /// Values per sentence vector.
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.inner.dim()
    }
    /// Token ids the tokenizer can produce.
    #[wasm_bindgen(getter, js_name = vocabSize)]
    pub fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }
    /// Rows of the table (fewer than the vocabulary when tokens share rows).
    #[wasm_bindgen(getter)]
    pub fn rows(&self) -> usize {
        self.inner.table().rows()
    }
    /// The table's format.
    #[wasm_bindgen(getter)]
    pub fn format(&self) -> String {
        self.inner.table().format().name().into()
    }
    /// Bytes each row of the table starts on once uploaded to a GPU: 4 (packed), or what the
    /// model file asks for.
    #[wasm_bindgen(getter, js_name = rowAlignment)]
    pub fn row_alignment(&self) -> usize {
        self.inner.table().row_alignment()
    }
    /// Bytes of the packed table.
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        self.inner.table().bytes() as f64
    }
    /// Whether sentence vectors are L2-normalised.
    #[wasm_bindgen(getter)]
    pub fn normalize(&self) -> bool {
        self.inner.normalize()
    }

    /// The token ids of `text` that count (after the model's cut, truncation and unknown-token
    /// removal).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, Failure> {
        Ok(self.inner.tokenize(&[text]).map_err(err)?.remove(0))
    }

    /// Sentence vectors of `texts` on the CPU path: `texts.length × dim` values.
    pub fn embed(&self, texts: Vec<String>) -> Result<Vec<f32>, Failure> {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        self.inner.encode(&texts).map_err(err)
    }
}

#[wasm_bindgen]
impl EdoEngine {
    /// Makes a model's table resident: on WebGPU the tokens' rows are pooled (and normalised)
    /// on the GPU; on the CPU path the model runs as `EdoModel.embed` does.
    #[wasm_bindgen(js_name = uploadModel)]
    pub async fn upload_model(&self, model: &EdoModel) -> Result<EdoResidentModel, Failure> {
        let placed = self.backend.place(model.inner.clone()).await.map_err(err)?;
        Ok(EdoResidentModel { inner: ModelOn { placed, backend: self.backend.clone() } })
    }
}

#[wasm_bindgen]
impl EdoEngine {
    /// Compiles the kernels a model whose table is in `format` with `dim` values (rows aligned to
    /// `row_alignment` bytes, the model's `rowAlignment`; packed when absent) runs to embed a few
    /// texts, ahead of its first embedding: start it, read the model file meanwhile
    /// (`tableShape` gives the format, dim and row alignment from the file's first bytes), then
    /// await it. At dims up to 256, one `embed` of thousands of texts (2 048 at dim 256) compiles
    /// its own shape of the bag kernel at its first use.
    /// Resolves at once on the CPU path (after checking the alignment).
    #[wasm_bindgen(js_name = prepareModel)]
    pub async fn prepare_model(&self, format: String, dim: usize, row_alignment: Option<usize>) -> Result<(), Failure> {
        let format = format_of(&format)?;
        let bytes = row_alignment.unwrap_or(edo::format::NO_ROW_ALIGNMENT);
        match self.engine() {
            Some(e) => e.prepare_model(format, dim, bytes).await.map_err(err),
            None => edo::format::check_row_alignment(bytes).map_err(err),
        }
    }
}

/// The shape an `.edo` file (table or model) declares in its header.
#[wasm_bindgen]
pub struct EdoShape {
    format: String,
    rows: usize,
    dim: usize,
    row_alignment: usize,
}

#[wasm_bindgen]
impl EdoShape {
    #[wasm_bindgen(getter)]
    pub fn format(&self) -> String {
        self.format.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn rows(&self) -> usize {
        self.rows
    }
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Bytes each row starts on once uploaded to a GPU: 4 (packed), or what the file asks for.
    #[wasm_bindgen(getter, js_name = rowAlignment)]
    pub fn row_alignment(&self) -> usize {
        self.row_alignment
    }
}

/// The format, rows, dim and row alignment of an `.edo` file, read from its header alone (only
/// the header's bytes are copied into WASM memory).
#[wasm_bindgen(js_name = tableShape)]
pub fn table_shape(bytes: &js_sys::Uint8Array) -> Result<EdoShape, Failure> {
    let len = bytes.length();
    let first8 = bytes.subarray(0, len.min(8)).to_vec();
    let header = edo::file::header_bytes(&first8).map_err(err)?;
    let prefix = bytes.subarray(0, len.min(u32::try_from(header).unwrap_or(u32::MAX))).to_vec();
    let shape = edo::file::table_shape(&prefix, len as u64).map_err(err)?;
    Ok(EdoShape { format: shape.format.name().into(), rows: shape.rows, dim: shape.dim, row_alignment: shape.row_alignment })
}

/// A model ready to embed on the engine (see `EdoEngine.uploadModel`).
#[wasm_bindgen]
pub struct EdoResidentModel {
    inner: ModelOn,
}

/// A model on the GPU (its host copy inside, for recovery) or on the CPU path, and the backend
/// its indexes go to.
#[derive(Clone)]
struct ModelOn {
    placed: Placed<GpuStaticModel>,
    backend: Backend,
}

impl ModelOn {
    fn model(&self) -> &StaticModel {
        self.placed.model()
    }
}

/// Texts embedded per GPU job when indexing a corpus: a job's tokens and vectors stay small.
const INDEX_BATCH: usize = 1024;

#[wasm_bindgen]
impl EdoResidentModel {
    /// `"webgpu"` or `"cpu"`.
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        web_name(self.inner.placed.backend()).into()
    }
    /// Values per sentence vector.
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.inner.model().dim()
    }

    /// Sentence vectors of `texts`, `texts.length × dim` values: tokenized here, pooled on the
    /// GPU (or the CPU path).
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<f32>, Failure> {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        self.embed_strs(&texts).await.map_err(err)
    }

    /// Sentence vectors of `texts` left on the GPU (see `EdoGpuRows`); `UNSUPPORTED` on the CPU
    /// path.
    #[wasm_bindgen(js_name = embedGpu)]
    pub async fn embed_gpu(&self, texts: Vec<String>) -> Result<EdoGpuRows, Failure> {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        match &self.inner.placed {
            Placed::Gpu(g) => EdoGpuRows::new(g.run(async |m| m.encode(&texts).await).await),
            Placed::Cpu(_) => Err(not_on_gpu()),
        }
    }

    /// A semantic-search index of `lines`: their sentence vectors, kept as binary codes for the
    /// Hamming search and as INT8 rows for rescoring, resident on the engine.
    pub async fn index(&self, lines: Vec<String>) -> Result<EdoSearchIndex, Failure> {
        let strs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let dim = self.inner.model().dim();
        let mut vectors = Vec::with_capacity(lines.len() * dim);
        for chunk in strs.chunks(INDEX_BATCH) {
            vectors.extend(self.embed_strs(chunk).await.map_err(err)?);
        }
        let rows = lines.len();
        let codes = PackedTable::quantize(Format::Binary, &vectors, rows, dim).map_err(err)?;
        let int8 = PackedTable::quantize(Format::Int8, &vectors, rows, dim).map_err(err)?;
        let backend = &self.inner.backend;
        let tables = IndexOn { codes: backend.place(codes).await.map_err(err)?, int8: backend.place(int8).await.map_err(err)? };
        Ok(EdoSearchIndex { model: EdoResidentModel { inner: self.inner.clone() }, tables })
    }
}

impl EdoResidentModel {
    async fn embed_strs(&self, texts: &[&str]) -> Result<Vec<f32>, edo::Error> {
        self.inner.placed.encode(texts).await
    }
}

/// Sentence vectors of a corpus, searchable by meaning (see `EdoResidentModel.index`).
#[wasm_bindgen]
pub struct EdoSearchIndex {
    model: EdoResidentModel,
    tables: IndexOn,
}

/// An index's binary codes and INT8 rows, both on the model's backend.
struct IndexOn {
    codes: Placed<GpuCodes>,
    int8: Placed<GpuTable>,
}

impl IndexOn {
    fn host(&self) -> (&PackedTable, &PackedTable) {
        (self.codes.host(), self.int8.host())
    }
}

/// Ranked results: `ids` and `scores` (dot products of the query with the INT8 rows), best first.
#[wasm_bindgen]
pub struct EdoScored {
    ids: Vec<u32>,
    scores: Vec<f32>,
}

#[wasm_bindgen]
impl EdoScored {
    #[wasm_bindgen(getter)]
    pub fn ids(&self) -> Vec<u32> {
        self.ids.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn scores(&self) -> Vec<f32> {
        self.scores.clone()
    }
}

#[wasm_bindgen]
impl EdoSearchIndex {
    /// Lines in the index.
    #[wasm_bindgen(getter)]
    pub fn rows(&self) -> usize {
        self.tables.host().0.rows()
    }
    /// Bytes the index holds: binary codes and INT8 rows.
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        let (codes, int8) = self.tables.host();
        (codes.bytes() + int8.bytes()) as f64
    }

    /// The `k` lines nearest `query`: its sentence vector's Hamming top `k × multiplier` (default
    /// 4) among the binary codes, rescored by the dot product with their INT8 rows.
    pub async fn search(&self, query: String, k: usize, multiplier: Option<usize>) -> Result<EdoScored, Failure> {
        let multiplier = multiplier.unwrap_or(4);
        let q = self.model.embed_strs(&[query.as_str()]).await.map_err(err)?;
        let k = k.min(self.rows());
        let found = self.tables.codes.search_rescored(&q, &self.tables.int8, k, multiplier).await.map_err(err)?;
        Ok(EdoScored { ids: found.ids, scores: found.scores })
    }
}

/// The whole body of `url` (`fetch`, no range).
async fn fetch_all(url: &str) -> Result<Vec<u8>, edo::Error> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    let fail = |what: &str, e: JsValue| edo::Error::Remote {
        location: url.to_string(),
        message: format!("{what}: {}", e.as_string().unwrap_or_else(|| format!("{e:?}"))),
    };
    let promise = match web_sys::window() {
        Some(w) => w.fetch_with_str(url),
        None => js_sys::global().unchecked_into::<web_sys::WorkerGlobalScope>().fetch_with_str(url),
    };
    let response: web_sys::Response = JsFuture::from(promise).await.map_err(|e| fail("fetch", e))?.unchecked_into();
    if !response.ok() {
        return Err(edo::Error::Remote { location: url.to_string(), message: format!("HTTP {} {}", response.status(), response.status_text()) });
    }
    let buffer = JsFuture::from(response.array_buffer().map_err(|e| fail("body", e))?).await.map_err(|e| fail("body", e))?;
    Ok(js_sys::Uint8Array::new(&buffer).to_vec())
}

#[wasm_bindgen]
impl EdoEngine {
    /// Runs edo's benchmark suite in this tab — `scale` `"quick"` (the default) or `"tiny"` (toy
    /// tables, for tests) — on this engine's WebGPU adapter and on the CPU path (one thread, as
    /// WASM runs here), and resolves to the results file's JSON: the schema `edo bench compare`
    /// reads beside native runs. `progress(done, total, label)` is called before each case; if it
    /// returns a promise the suite waits for it, so a page can repaint between cases.
    #[wasm_bindgen(js_name = benchSuite)]
    pub async fn bench_suite(&self, scale: Option<String>, user_agent: Option<String>, progress: Option<js_sys::Function>) -> Result<String, Failure> {
        self.suite(None, scale, user_agent, progress).await
    }

    /// [`EdoEngine::bench_suite`] with a static model's embedding cases (1, 32 and 1024 texts).
    #[wasm_bindgen(js_name = benchSuiteWithModel)]
    pub async fn bench_suite_with_model(
        &self,
        model: &EdoModel,
        scale: Option<String>,
        user_agent: Option<String>,
        progress: Option<js_sys::Function>,
    ) -> Result<String, Failure> {
        self.suite(Some(model.inner.clone()), scale, user_agent, progress).await
    }
}

impl EdoEngine {
    async fn suite(
        &self,
        model: Option<StaticModel>,
        scale: Option<String>,
        user_agent: Option<String>,
        progress: Option<js_sys::Function>,
    ) -> Result<String, Failure> {
        use edo_bench::suite::{self, Scale, SuiteOptions};
        let scale = match scale.as_deref().unwrap_or("quick") {
            "quick" => Scale::Quick,
            "tiny" => Scale::Tiny,
            other => return Err(Failure::arg(format!("unknown benchmark scale {other:?} (quick or tiny in a browser)"))),
        };
        let mut options = SuiteOptions::new(scale);
        options.user_agent = user_agent;
        options.model = model;
        let gpus: Vec<Engine> = self.engine().into_iter().collect();
        let results = suite::run(&options, &gpus, |p| {
            let r = progress.as_ref().map(|f| f.call3(&JsValue::NULL, &(p.done as f64).into(), &(p.total as f64).into(), &p.label.as_str().into()));
            async move {
                if let Some(Ok(v)) = r {
                    if let Ok(promise) = v.dyn_into::<js_sys::Promise>() {
                        let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
                    }
                }
            }
        })
        .await
        .map_err(|e| match e {
            suite::SuiteError::NoBackend => Failure { code: "INVALID_ARGUMENT", message: e.to_string() },
            suite::SuiteError::Edo(e) => err(e),
        })?;
        Ok(results.to_json())
    }
}

/// The charts and the table of one or more benchmark results files (their JSON text), as an
/// HTML fragment: the same charts `edo bench suite` and `edo bench compare` write.
#[wasm_bindgen(js_name = benchReport)]
pub fn bench_report(results: Vec<String>) -> Result<String, Failure> {
    let files = results.iter().map(|r| edo_bench::suite::Results::from_json(r)).collect::<Result<Vec<_>, _>>().map_err(err)?;
    Ok(edo_bench::suite::report::fragment(&files))
}

/// The plain-text summary of one or more benchmark results files, as `edo bench compare` prints.
#[wasm_bindgen(js_name = benchSummary)]
pub fn bench_summary(results: Vec<String>) -> Result<String, Failure> {
    let files = results.iter().map(|r| edo_bench::suite::Results::from_json(r)).collect::<Result<Vec<_>, _>>().map_err(err)?;
    Ok(edo_bench::suite::report::text(&files))
}
