//! Tables made resident on an engine, their lookups, and rows left on the GPU.

use super::*;

/// The page's name of a backend: `"webgpu"` or `"cpu"`.
pub(crate) fn web_name(backend: &str) -> &'static str {
    if backend == "gpu" {
        "webgpu"
    } else {
        "cpu"
    }
}

/// A table ready for lookups (on the GPU, its host copy inside for recovery, or on the CPU path).
#[wasm_bindgen]
pub struct EdoResident {
    pub(crate) inner: Resident,
}

/// A placed table of either kind the package makes. (Not `AnyGpuTable`, whose mixed tables would
/// put their kernels in the `.wasm` for nothing.)
pub(crate) enum Resident {
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
pub(crate) fn bags_of<'a>(indices: &'a [u32], offsets: &'a [u32], weights: Option<&'a [f32]>) -> Bags<'a> {
    let bags = Bags::new(indices, offsets);
    match weights {
        Some(w) => bags.weights(w),
        None => bags,
    }
}

pub(crate) fn pooling_of(name: &str) -> Result<Pooling, Failure> {
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

pub(crate) fn not_on_gpu() -> Failure {
    Failure { code: "UNSUPPORTED", message: "rows stay on the GPU only on a WebGPU engine; this one runs on the CPU path".into() }
}

/// Rows left on the GPU by a lookup or a model: a storage buffer of the engine's `GPUDevice`
/// holding `rows × dim` values, f32 (`dtype` `"float32"`) or f16 two a word (`"float16"`), row
/// after row. `read()` copies them back; `destroy()` frees the buffer at once (it is freed too
/// when this object is).
#[wasm_bindgen]
pub struct EdoGpuRows {
    pub(crate) inner: Option<edo::GpuRows>,
}

impl EdoGpuRows {
    pub(crate) fn new(rows: Result<edo::GpuRows, edo::Error>) -> Result<EdoGpuRows, Failure> {
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
