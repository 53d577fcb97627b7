//! The engine: WebGPU (rebuilt after a device loss) or the CPU path, and what it makes tables,
//! caches and codes resident with.

use super::*;

/// The lookup engine: WebGPU, or the CPU path.
///
/// On WebGPU the engine survives device loss (the GPU process crashed, the driver reset, the
/// tab was moved to another GPU): it rebuilds itself on a new device and uploads every table,
/// cache, model and index made through it again, from the copies it keeps in WASM memory; calls
/// made meanwhile wait and give the rows they would have. `onDeviceEvent` hears of it.
#[wasm_bindgen]
pub struct EdoEngine {
    pub(crate) backend: Backend,
    pub(crate) listeners: Rc<RefCell<Vec<js_sys::Function>>>,
}

/// Whether `key` of `object` is there (neither undefined nor null).
pub(crate) fn has(object: &JsValue, key: &str) -> bool {
    js_sys::Reflect::get(object, &key.into()).is_ok_and(|v| !v.is_undefined() && !v.is_null())
}

/// Why this JavaScript context cannot have a WebGPU adapter, if it cannot: no `navigator.gpu`,
/// or neither a window nor a worker (where wgpu's WebGPU backend would panic) and no `gpu`
/// object given.
pub(crate) fn no_webgpu_here() -> Option<&'static str> {
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
pub(crate) fn instance_over(gpu: &JsValue) -> Result<wgpu::Instance, String> {
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

/// The `GPUDevice` behind an engine, for the page's own WebGPU work.
pub(crate) fn device_object(engine: &Engine) -> JsValue {
    engine.device().as_webgpu().map_or(JsValue::NULL, |d| d.clone().into())
}

/// A device event as the object `onDeviceEvent` listeners get.
pub(crate) fn event_object(event: &RecoveryEvent) -> JsValue {
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

    pub(crate) fn engine(&self) -> Option<Engine> {
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
            // As edo's error: one Display for both crates' cases in the .wasm.
            Err(e) => EdoEngine::on_cpu(format!("no WebGPU adapter ({}); using the CPU path", edo::Error::from(e))),
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

// The suite is in the benchmark module only (feature `suite`, `edo_web_suite.js`): the module a
// page loads first stays without it (scripts/web/build-web.sh builds both).
#[cfg(feature = "suite")]
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

#[cfg(feature = "suite")]
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
