//! edo for Python (the `edo._edo` extension module): tables, lookups, binary codes, static models
//! and the GPU engine over numpy arrays. The Python package (`python/edo/__init__.py`) checks and
//! converts arguments (dtypes, orders, PyTorch's conventions) and documents the API; this module
//! takes contiguous arrays of the exact dtypes and releases the GIL for every lookup and encode.

use std::path::PathBuf;
use std::sync::Arc;

use edo::cache::{CacheSpec, RowSource};
use edo::file::import::{self, FileLayout};
use edo::file::remote::{HttpReader, RemoteTable};
use edo::file::TableFile;
use edo::format::{Format, PackedTable};
use edo::model::StaticModel;
use edo::plan::{Access, Choice, PlanOptions, TableSpec};
use edo::search::{CodeTransform, ItqOptions};
use edo::{AnyGpuTable, AnyTable, AsyncLookup, Backend, Bags, Bounds, GpuCache, Lookup, Placed, Pooling};
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::PyType;

/// edo's errors as Python exceptions: the class `edo._error_class` gives for the error's code
/// (`edo.IdOutOfRangeError`, an `IndexError` too; `edo.BadFileError`; `edo.DeviceLostError`; …),
/// with edo's message and the code as `.code`.
fn err(e: impl Into<edo::Error>) -> PyErr {
    let e = e.into();
    raise(e.code(), e.to_string())
}

/// A bad argument found here (a format's name, a mode): `edo.InvalidArgumentError`.
fn invalid(message: String) -> PyErr {
    raise("INVALID_ARGUMENT", message)
}

fn raise(code: &'static str, message: String) -> PyErr {
    Python::attach(|py| {
        let class = py.import("edo").and_then(|m| m.getattr("_error_class")).and_then(|f| f.call1((code,)));
        match class.map(|c| c.cast_into::<PyType>()) {
            Ok(Ok(class)) => PyErr::from_type(class, (message, code)),
            Ok(Err(_)) => PyRuntimeError::new_err(format!("edo._error_class({code:?}) is not a class; the error: {message}")),
            Err(lookup) => lookup,
        }
    })
}

fn format_of(name: &str) -> PyResult<Format> {
    Format::from_name(name).ok_or_else(|| invalid(format!("unknown format {name:?} ({})", Format::ALL.map(Format::name).join(", "))))
}

fn pooling_of(mode: &str) -> PyResult<Pooling> {
    match mode {
        "sum" => Ok(Pooling::Sum),
        "mean" => Ok(Pooling::Mean),
        "max" => Ok(Pooling::Max),
        _ => Err(invalid(format!("mode must be 'sum', 'mean' or 'max' (got {mode:?})"))),
    }
}

fn slice<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, what: &str) -> PyResult<&'a [T]> {
    a.as_slice().map_err(|_| invalid(format!("{what} must be contiguous")))
}

/// The bags of a `bag` call: its arrays as slices (contiguous, checked), PyTorch's conventions;
/// indices are row ids (u32) or a live table's keys (u64).
fn bags_of<'a, I: numpy::Element>(
    indices: &'a PyReadonlyArray1<'_, I>,
    offsets: &'a PyReadonlyArray1<'_, u32>,
    weights: Option<&'a PyReadonlyArray1<'_, f32>>,
    include_last_offset: bool,
) -> PyResult<Bags<'a, I>> {
    let per_sample_weights = weights.map(|w| slice(w, "per_sample_weights")).transpose()?;
    Ok(Bags { indices: slice(indices, "indices")?, offsets: slice(offsets, "offsets")?, include_last_offset, per_sample_weights })
}

/// `values`, rows of `dim` after one another, as a new `(rows, dim)` array (no copy).
fn rows_of(py: Python<'_>, values: Vec<f32>, dim: usize) -> PyResult<Bound<'_, PyArray2<f32>>> {
    let rows = values.len() / dim.max(1);
    PyArray1::from_vec(py, values).reshape([rows, dim])
}

/// A packed table in host memory.
#[pyclass(module = "edo._edo", frozen)]
struct Table {
    inner: PackedTable,
}

#[pymethods]
impl Table {
    #[getter]
    fn format(&self) -> &'static str {
        self.inner.format().name()
    }
    #[getter]
    fn rows(&self) -> usize {
        self.inner.rows()
    }
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    #[getter]
    fn nbytes(&self) -> u64 {
        self.inner.bytes()
    }

    /// Rows of `ids` (uint32, contiguous) into a new `(n, dim)` float32 array.
    fn gather<'py>(&self, py: Python<'py>, ids: PyReadonlyArray1<'py, u32>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let ids = slice(&ids, "ids")?;
        let out = PyArray2::<f32>::zeros(py, [ids.len(), self.inner.dim()], false);
        {
            let mut write = out.readwrite();
            let dst = write.as_slice_mut().expect("a new array is contiguous");
            py.detach(|| edo::cpu::gather_into(&self.inner, ids, Bounds::Error, dst)).map_err(err)?;
        }
        Ok(out)
    }

    /// EmbeddingBag over uint32 `indices` and PyTorch's `offsets` (uint32, one start per bag, or
    /// with the end too when `include_last_offset`): a new `(bags, dim)` float32 array.
    #[pyo3(signature = (indices, offsets, mode, per_sample_weights=None, include_last_offset=false))]
    fn bag<'py>(
        &self,
        py: Python<'py>,
        indices: PyReadonlyArray1<'py, u32>,
        offsets: PyReadonlyArray1<'py, u32>,
        mode: &str,
        per_sample_weights: Option<PyReadonlyArray1<'py, f32>>,
        include_last_offset: bool,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let pooling = pooling_of(mode)?;
        let bags = bags_of(&indices, &offsets, per_sample_weights.as_ref(), include_last_offset)?;
        let values = py.detach(|| edo::cpu::embedding_bag(&self.inner, &bags, pooling, Bounds::Error)).map_err(err)?;
        rows_of(py, values, self.inner.dim())
    }

    /// Every row decoded: a new `(rows, dim)` float32 array.
    fn dequantize<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let values = py.detach(|| self.inner.dequantize());
        rows_of(py, values, self.inner.dim())
    }

    /// The same rows in another format.
    fn quantize(&self, py: Python<'_>, format: &str) -> PyResult<Table> {
        let format = format_of(format)?;
        let values = py.detach(|| self.inner.dequantize());
        Ok(Table { inner: py.detach(|| PackedTable::quantize(format, &values, self.inner.rows(), self.inner.dim())).map_err(err)? })
    }

    /// Writes the table as an `.edo` file.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| TableFile::new(self.inner.clone()).write(&path)).map_err(err)
    }

    /// The table placed on `engine`: resident on its GPU, or on the CPU path when it has none.
    fn to(&self, py: Python<'_>, engine: &Engine) -> PyResult<GpuTable> {
        engine.place(py, AnyTable::Dense(self.inner.clone()))
    }
}

/// Quantises a C-contiguous `(rows, dim)` float32 array to `format`.
#[pyfunction]
fn quantize(py: Python<'_>, values: PyReadonlyArray2<'_, f32>, format: &str) -> PyResult<Table> {
    let format = format_of(format)?;
    let [rows, dim] = [values.shape()[0], values.shape()[1]];
    let data = values.as_slice().map_err(|_| invalid("values must be C-contiguous".into()))?;
    Ok(Table { inner: py.detach(|| PackedTable::quantize(format, data, rows, dim)).map_err(err)? })
}

/// A table from a file: `.edo` as it is; safetensors, `.npy`, GGUF, word2vec text as `format`
/// (their floats quantised) or as stored (FBGEMM's fused rows with `layout`; 4-bit rows with
/// their `dim`, which a row's width leaves open).
#[pyfunction]
#[pyo3(signature = (path, format=None, tensor=None, layout="dense", dim=None))]
fn load(py: Python<'_>, path: PathBuf, format: Option<&str>, tensor: Option<&str>, layout: &str, dim: Option<usize>) -> PyResult<Table> {
    let format = format.map(format_of).transpose()?;
    if dim.is_some() && layout != "fbgemm4" {
        return Err(invalid(format!("dim is for layout='fbgemm4' (whose rows do not say it); layout is {layout:?}")));
    }
    let layout = match layout {
        "dense" => FileLayout::Dense,
        "fbgemm8" => FileLayout::Fbgemm8,
        "fbgemm4" => FileLayout::Fbgemm4 { dim },
        other => return Err(invalid(format!("layout must be 'dense', 'fbgemm8' or 'fbgemm4' (got {other:?})"))),
    };
    let inner = py.detach(|| -> Result<PackedTable, edo::Error> {
        let is_edo = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("edo"));
        let table = if is_edo {
            TableFile::open(&path)?.into_table()
        } else {
            match import::path(&path, tensor, layout)?.table {
                import::Table::Dense { data, rows, dim } => return Ok(PackedTable::quantize(format.unwrap_or(Format::F32), &data, rows, dim)?),
                import::Table::Packed(t) => t,
            }
        };
        match format {
            Some(f) if f != table.format() => Ok(PackedTable::quantize(f, &table.dequantize(), table.rows(), table.dim())?),
            _ => Ok(table),
        }
    });
    Ok(Table { inner: inner.map_err(err)? })
}

/// What a search found: ids and scores, `(queries, k)` each.
type Found<'py> = (Bound<'py, PyArray2<u32>>, Bound<'py, PyArray2<f32>>);

/// Binary codes of a table's rows, with the transform they went through, for Hamming search.
#[pyclass(module = "edo._edo", frozen)]
struct Codes {
    codes: PackedTable,
    transform: Option<CodeTransform>,
}

#[pymethods]
impl Codes {
    #[getter]
    fn rows(&self) -> usize {
        self.codes.rows()
    }
    #[getter]
    fn dim(&self) -> usize {
        self.codes.dim()
    }
    #[getter]
    fn transform(&self) -> Option<String> {
        self.transform.as_ref().map(|t| t.kind().to_string())
    }
    #[getter]
    fn nbytes(&self) -> u64 {
        self.codes.bytes()
    }

    /// The top `k` rows of each query (C-contiguous `(n, dim)` float32): Hamming top `k ×
    /// multiplier` rescored with `rescore` (a table of the same rows), or ordered by the
    /// asymmetric score against the codes. Returns `(ids, scores)`, `(n, k')` each.
    #[pyo3(signature = (queries, k, rescore=None, multiplier=10))]
    fn search<'py>(&self, py: Python<'py>, queries: PyReadonlyArray2<'py, f32>, k: usize, rescore: Option<&Table>, multiplier: usize) -> PyResult<Found<'py>> {
        let n = queries.shape()[0];
        let q = queries.as_slice().map_err(|_| invalid("queries must be C-contiguous".into()))?;
        let (table, multiplier) = match rescore {
            Some(t) => (&t.inner, multiplier),
            None => (&self.codes, 1),
        };
        let scored = py.detach(|| edo::search::search_rescored_with(&self.codes, self.transform.as_ref(), q, table, k, multiplier)).map_err(err)?;
        let k = scored.k;
        Ok((PyArray1::from_vec(py, scored.ids).reshape([n, k])?, PyArray1::from_vec(py, scored.scores).reshape([n, k])?))
    }
}

/// Binary codes of the rows of a C-contiguous `(rows, dim)` float32 array: plain signs
/// (`transform=None`), centred, or ITQ-rotated.
#[pyfunction]
#[pyo3(signature = (values, transform=None, iterations=50))]
fn binary_codes(py: Python<'_>, values: PyReadonlyArray2<'_, f32>, transform: Option<&str>, iterations: usize) -> PyResult<Codes> {
    let [rows, dim] = [values.shape()[0], values.shape()[1]];
    let data = values.as_slice().map_err(|_| invalid("values must be C-contiguous".into()))?;
    py.detach(|| -> Result<Codes, PyErr> {
        let transform = match transform {
            None => None,
            Some("centered" | "centred") => Some(CodeTransform::centered(data, dim).map_err(err)?),
            Some("itq") => Some(CodeTransform::itq(data, dim, &ItqOptions { iterations, ..Default::default() }).map_err(err)?),
            Some(other) => return Err(invalid(format!("transform must be None, 'centered' or 'itq' (got {other:?})"))),
        };
        let codes = match &transform {
            Some(t) => t.encode(data).map_err(err)?,
            None => PackedTable::quantize(Format::Binary, data, rows, dim).map_err(err)?,
        };
        Ok(Codes { codes, transform })
    })
}

/// A static embedding model (model2vec, sentence-transformers' StaticEmbedding, an `.edo` model).
#[pyclass(module = "edo._edo", frozen)]
struct Model {
    inner: StaticModel,
    /// The model with the other `normalize` setting, made on the first `encode` that asks for it
    /// (a copy of the table, once, not one a call).
    flipped: std::sync::OnceLock<StaticModel>,
}

impl Model {
    fn new(inner: StaticModel) -> Model {
        Model { inner, flipped: std::sync::OnceLock::new() }
    }

    /// Encodes `texts` straight into `out` (a new, contiguous array of `len(texts) × dim`), the
    /// GIL released.
    fn encode_into<D: numpy::ndarray::Dimension>(
        &self,
        py: Python<'_>,
        texts: &[&str],
        normalize: Option<bool>,
        out: &Bound<'_, numpy::PyArray<f32, D>>,
    ) -> PyResult<()> {
        let mut write = out.readwrite();
        let dst = write.as_slice_mut().expect("a new array is contiguous");
        py.detach(|| match normalize {
            Some(n) if n != self.inner.normalize() => self.flipped.get_or_init(|| self.inner.clone().with_normalize(n)).encode_into(texts, dst),
            _ => self.inner.encode_into(texts, dst),
        })
        .map_err(err)
    }
}

#[pymethods]
impl Model {
    /// A model folder (model2vec's or sentence-transformers') or an `.edo` model file.
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<Model> {
        Ok(Model::new(py.detach(|| StaticModel::open(&path)).map_err(err)?))
    }
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    #[getter]
    fn normalize(&self) -> bool {
        self.inner.normalize()
    }
    #[getter]
    fn format(&self) -> &'static str {
        self.inner.table().format().name()
    }
    /// Sentence vectors of `texts`: a new `(len(texts), dim)` float32 array.
    #[pyo3(signature = (texts, normalize=None))]
    fn encode<'py>(&self, py: Python<'py>, texts: Vec<PyBackedStr>, normalize: Option<bool>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        // Borrowed: each str's own UTF-8 (CPython keeps it, for ASCII the str's data), no copy.
        let texts: Vec<&str> = texts.iter().map(|t| &**t).collect();
        let out = PyArray2::<f32>::zeros(py, [texts.len(), self.inner.dim()], false);
        self.encode_into(py, &texts, normalize, &out)?;
        Ok(out)
    }
    /// The sentence vector of one text: a new `(dim,)` float32 array (model2vec's `encode` of a
    /// string), without a list in or a row view out.
    #[pyo3(signature = (text, normalize=None))]
    fn encode_one<'py>(&self, py: Python<'py>, text: PyBackedStr, normalize: Option<bool>) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let out = PyArray1::<f32>::zeros(py, self.inner.dim(), false);
        self.encode_into(py, &[&*text], normalize, &out)?;
        Ok(out)
    }
    /// The token ids of `text` that count.
    fn tokenize(&self, py: Python<'_>, text: &str) -> PyResult<Vec<u32>> {
        Ok(py.detach(|| self.inner.tokenize(&[text])).map_err(err)?.remove(0))
    }
    /// The same model with its table in another format.
    fn quantize(&self, py: Python<'_>, format: &str) -> PyResult<Model> {
        let format = format_of(format)?;
        Ok(Model::new(py.detach(|| self.inner.quantize(format)).map_err(err)?))
    }
    /// Writes the model as one `.edo` model file.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.inner.to_edo().write(&path)).map_err(err)
    }
}

/// Where lookups run: a GPU (wgpu: Vulkan, Metal, DX12), recovered from device losses, or the
/// CPU path (`edo::Backend`).
#[pyclass(module = "edo._edo", frozen)]
struct Engine {
    inner: Backend,
}

#[pymethods]
impl Engine {
    /// `backend`: "auto" (a GPU when there is one, else the CPU path, saying why), "gpu" (an
    /// error without one) or "cpu". `memory_budget` caps the bytes edo allocates on the GPU.
    #[new]
    #[pyo3(signature = (backend="auto", memory_budget=None))]
    fn new(py: Python<'_>, backend: &str, memory_budget: Option<u64>) -> PyResult<Engine> {
        let options = edo::EngineOptions { memory_budget, ..Default::default() };
        let inner = match backend {
            "auto" => py.detach(|| edo::block_on(Backend::new(options))),
            "gpu" => Backend::Gpu(edo::RecoveringEngine::new(py.detach(|| edo::block_on(edo::Engine::new(options))).map_err(err)?)),
            "cpu" => Backend::cpu("the CPU path, as asked (backend='cpu')"),
            other => return Err(invalid(format!("backend must be 'auto', 'gpu' or 'cpu' (got {other:?})"))),
        };
        Ok(Engine { inner })
    }
    /// "gpu" or "cpu".
    #[getter]
    fn backend(&self) -> &'static str {
        self.inner.name()
    }
    /// The GPU adapter in words, or why the CPU path.
    #[getter]
    fn note(&self) -> String {
        self.inner.note()
    }
    /// The adapter, in words (None on the CPU path).
    #[getter]
    fn adapter(&self) -> Option<String> {
        self.inner.engine().map(|e| e.adapter().to_string())
    }
    /// Every GPU buffer edo holds, by owner, and the budget: (text, JSON text); None on the CPU path.
    fn memory_report(&self) -> Option<(String, String)> {
        self.inner.engine().map(|e| {
            let report = e.memory_report();
            (report.to_string(), report.to_json().to_string())
        })
    }
    /// A row cache of `capacity` rows over `table` or the remote `.edo` file at `url`, evicting
    /// by `policy`: its slots on the GPU, or in host memory on the CPU path.
    #[pyo3(signature = (capacity, policy, table=None, url=None))]
    fn cache(&self, py: Python<'_>, capacity: usize, policy: &str, table: Option<&Table>, url: Option<String>) -> PyResult<Cache> {
        let policy = policy_of(policy)?;
        let source = match (table, url) {
            (Some(t), None) => Source::Table(t.inner.clone()),
            (None, Some(url)) => Source::Remote(Arc::new(py.detach(|| edo::block_on(RemoteTable::open(HttpReader::new(url)))).map_err(err)?)),
            _ => return Err(invalid("a cache reads from a table or a url: give one of them".into())),
        };
        let inner = py.detach(|| edo::block_on(self.inner.place::<GpuCache<Source>>(CacheSpec { source, capacity, policy }))).map_err(err)?;
        Ok(Cache { inner })
    }
}

impl Engine {
    /// `table` placed on this engine's backend.
    fn place(&self, py: Python<'_>, table: AnyTable) -> PyResult<GpuTable> {
        let dim = table.dim();
        let inner = py.detach(|| edo::block_on(self.inner.place::<AnyGpuTable>(table))).map_err(err)?;
        Ok(GpuTable { inner, dim })
    }
}

/// A table placed on an engine: resident on its GPU, or its host rows on the CPU path.
#[pyclass(module = "edo._edo", frozen)]
struct GpuTable {
    inner: Placed<AnyGpuTable>,
    dim: usize,
}

#[pymethods]
impl GpuTable {
    #[getter]
    fn dim(&self) -> usize {
        self.dim
    }
    /// "gpu" or "cpu".
    #[getter]
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    /// Rows of `ids` (uint32, contiguous): a new `(n, dim)` float32 array.
    fn gather<'py>(&self, py: Python<'py>, ids: PyReadonlyArray1<'py, u32>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let ids = slice(&ids, "ids")?;
        let values = py.detach(|| edo::block_on(self.inner.gather(ids, Bounds::Error))).map_err(err)?;
        rows_of(py, values, self.dim)
    }
    /// EmbeddingBag (see `Table.bag`).
    #[pyo3(signature = (indices, offsets, mode, per_sample_weights=None, include_last_offset=false))]
    fn bag<'py>(
        &self,
        py: Python<'py>,
        indices: PyReadonlyArray1<'py, u32>,
        offsets: PyReadonlyArray1<'py, u32>,
        mode: &str,
        per_sample_weights: Option<PyReadonlyArray1<'py, f32>>,
        include_last_offset: bool,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let pooling = pooling_of(mode)?;
        let bags = bags_of(&indices, &offsets, per_sample_weights.as_ref(), include_last_offset)?;
        let values = py.detach(|| edo::block_on(self.inner.bag(&bags, pooling, Bounds::Error))).map_err(err)?;
        rows_of(py, values, self.dim)
    }
}

/// What a cache reads its misses from: a table in host memory (a mapped `.edo` file's rows
/// included) or a remote `.edo` file read with HTTP range requests.
#[derive(Clone)]
enum Source {
    Table(PackedTable),
    Remote(Arc<RemoteTable<HttpReader>>),
}

impl RowSource for Source {
    fn format(&self) -> Format {
        match self {
            Source::Table(t) => t.format(),
            Source::Remote(r) => r.format(),
        }
    }
    fn rows(&self) -> usize {
        match self {
            Source::Table(t) => t.rows(),
            Source::Remote(r) => r.rows(),
        }
    }
    fn dim(&self) -> usize {
        match self {
            Source::Table(t) => t.dim(),
            Source::Remote(r) => r.dim(),
        }
    }
    async fn read_rows(&self, rows: &[u32], out: &mut Vec<u32>) -> Result<(), edo::Error> {
        match self {
            Source::Table(t) => t.read_rows(rows, out).await,
            Source::Remote(r) => r.read_rows(rows, out).await,
        }
    }
}

/// A row cache placed on an engine (see `Engine.cache`).
#[pyclass(module = "edo._edo", frozen)]
struct Cache {
    inner: Placed<GpuCache<Source>>,
}

#[pymethods]
impl Cache {
    #[getter]
    fn dim(&self) -> usize {
        self.inner.host().source.dim()
    }
    #[getter]
    fn rows(&self) -> usize {
        self.inner.host().source.rows()
    }
    #[getter]
    fn format(&self) -> &'static str {
        self.inner.host().source.format().name()
    }
    #[getter]
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    /// (rows held now, rows it may hold).
    fn occupancy(&self) -> (usize, usize) {
        self.inner.occupancy()
    }
    /// Rows of `ids` through the cache: a new `(n, dim)` float32 array.
    fn gather<'py>(&self, py: Python<'py>, ids: PyReadonlyArray1<'py, u32>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let ids = slice(&ids, "ids")?;
        let values = py.detach(|| edo::block_on(self.inner.gather(ids, Bounds::Error))).map_err(err)?;
        rows_of(py, values, self.dim())
    }
    /// EmbeddingBag through the cache (see `Table.bag`).
    #[pyo3(signature = (indices, offsets, mode, per_sample_weights=None, include_last_offset=false))]
    fn bag<'py>(
        &self,
        py: Python<'py>,
        indices: PyReadonlyArray1<'py, u32>,
        offsets: PyReadonlyArray1<'py, u32>,
        mode: &str,
        per_sample_weights: Option<PyReadonlyArray1<'py, f32>>,
        include_last_offset: bool,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let pooling = pooling_of(mode)?;
        let bags = bags_of(&indices, &offsets, per_sample_weights.as_ref(), include_last_offset)?;
        let values = py.detach(|| edo::block_on(self.inner.bag(&bags, pooling, Bounds::Error))).map_err(err)?;
        rows_of(py, values, self.dim())
    }
    /// Reads the rows of `ids` the cache misses ahead of the lookup that needs them; how many.
    fn prefetch(&self, py: Python<'_>, ids: PyReadonlyArray1<'_, u32>) -> PyResult<usize> {
        let ids = slice(&ids, "ids")?;
        py.detach(|| edo::block_on(self.inner.prefetch(ids))).map_err(err)
    }
    /// The counters, by name.
    fn stats(&self) -> Vec<(&'static str, u64)> {
        let s = self.inner.stats();
        vec![
            ("lookups", s.lookups),
            ("hits", s.hits),
            ("misses", s.misses),
            ("evictions", s.evictions),
            ("prefetched", s.prefetched),
            ("served_from_staging", s.served_from_staging),
            ("batches", s.batches),
            ("parts", s.parts),
            ("bytes_uploaded", s.bytes_uploaded),
            ("shared_reads", s.shared_reads),
        ]
    }
    fn reset_stats(&self) {
        self.inner.reset_stats()
    }
}

fn policy_of(policy: &str) -> PyResult<edo::cache::PolicyKind> {
    edo::cache::PolicyKind::from_name(policy)
        .ok_or_else(|| invalid(format!("unknown policy {policy:?} ({})", edo::cache::PolicyKind::ALL.map(edo::cache::PolicyKind::name).join(", "))))
}

/// One table to plan for, as the Python layer passes it: (name, rows, dim, Zipf exponent, lookup
/// counts, lookups relative to the others, sample rows).
type PlanArgs<'py> = (String, usize, usize, Option<f64>, Option<PyReadonlyArray1<'py, u64>>, f64, Option<PyReadonlyArray2<'py, f32>>);

/// Plans `tables` into `budget` GPU bytes (`edo::plan::plan`).
#[pyfunction]
fn plan(py: Python<'_>, tables: Vec<PlanArgs<'_>>, budget: u64, formats: Vec<String>, mixed: bool, min_hit_rate: f64, miss_cost: f64) -> PyResult<Plan> {
    let specs = tables
        .into_iter()
        .map(|(name, rows, dim, zipf, counts, lookups, sample)| {
            let access = match (zipf, counts) {
                (None, None) => Access::Uniform,
                (Some(s), None) => Access::Zipf(s),
                (None, Some(c)) => Access::Counts(slice(&c, "counts")?.to_vec()),
                (Some(_), Some(_)) => return Err(invalid(format!("{name}: give a Zipf exponent or counts, not both"))),
            };
            let sample = match sample {
                Some(v) if v.shape()[1] != dim => return Err(invalid(format!("{name}: sample rows of {} values, the table's are {dim}", v.shape()[1]))),
                Some(v) => Some(v.as_slice().map_err(|_| invalid("sample must be C-contiguous".into()))?.to_vec()),
                None => None,
            };
            Ok(TableSpec { name, rows, dim, access, lookups, sample })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let formats = formats.iter().map(|f| format_of(f)).collect::<PyResult<Vec<_>>>()?;
    let options = PlanOptions { formats, min_hit_rate, mixed, miss_cost };
    let inner = py.detach(|| edo::plan::plan(&specs, budget, &options)).map_err(err)?;
    Ok(Plan { inner, specs: specs.into_iter().map(|s| TableSpec { sample: None, ..s }).collect() })
}

/// What the planner chose for every table (`edo::plan::Plan`), and the tables it planned for.
#[pyclass(module = "edo._edo", frozen)]
struct Plan {
    inner: edo::plan::Plan,
    specs: Vec<TableSpec>,
}

/// One table's plan: (name, choice, bytes, expected error, hit rate, INT8 bytes, INT8 error,
/// cache capacity).
type PlanRow = (String, String, u64, f64, f64, u64, f64, Option<usize>);

#[pymethods]
impl Plan {
    #[getter]
    fn budget(&self) -> u64 {
        self.inner.budget
    }
    #[getter]
    fn bytes(&self) -> u64 {
        self.inner.bytes
    }
    #[getter]
    fn expected_error(&self) -> f64 {
        self.inner.expected_error
    }
    #[getter]
    fn int8_bytes(&self) -> u64 {
        self.inner.int8_bytes
    }
    #[getter]
    fn int8_error(&self) -> f64 {
        self.inner.int8_error
    }
    fn tables(&self) -> Vec<PlanRow> {
        let row = |t: &edo::plan::TablePlan| {
            (t.name.clone(), t.choice.to_string(), t.bytes, t.expected_error, t.hit_rate, t.int8_bytes, t.int8_error, t.choice.cache_capacity())
        };
        self.inner.tables.iter().map(row).collect()
    }
    /// The plan as `edo plan` prints it.
    fn __str__(&self) -> String {
        self.inner.to_string()
    }
    /// The plan as `edo plan --json` prints it.
    fn json(&self) -> String {
        self.inner.to_json().to_string()
    }
    /// Table `index` of the plan made from its values (C-contiguous `(rows, dim)` float32).
    fn build(&self, py: Python<'_>, index: usize, values: PyReadonlyArray2<'_, f32>) -> PyResult<PlannedTable> {
        let (spec, choice) = (&self.specs[index], &self.inner.tables[index].choice);
        if values.shape() != [spec.rows, spec.dim] {
            return Err(invalid(format!("{}: values of shape {:?}, planned for ({}, {})", spec.name, values.shape(), spec.rows, spec.dim)));
        }
        let data = values.as_slice().map_err(|_| invalid("values must be C-contiguous".into()))?;
        let table = py.detach(|| choice.build(data, spec.rows, spec.dim, &spec.access)).map_err(err)?;
        Ok(PlannedTable { table, choice: choice.clone() })
    }
}

/// A table built as its plan says: one format, or mixed precision (hot rows in one format, the
/// rest in another); a cached choice is its host table, cached when placed on an engine.
#[pyclass(module = "edo._edo", frozen)]
struct PlannedTable {
    table: AnyTable,
    choice: Choice,
}

#[pymethods]
impl PlannedTable {
    #[getter]
    fn choice(&self) -> String {
        self.choice.to_string()
    }
    #[getter]
    fn rows(&self) -> usize {
        self.table.rows()
    }
    #[getter]
    fn dim(&self) -> usize {
        self.table.dim()
    }
    #[getter]
    fn nbytes(&self) -> u64 {
        self.table.bytes()
    }
    /// The rows a cache of this choice holds (None unless cached).
    #[getter]
    fn cache_capacity(&self) -> Option<usize> {
        self.choice.cache_capacity()
    }
    fn gather<'py>(&self, py: Python<'py>, ids: PyReadonlyArray1<'py, u32>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let ids = slice(&ids, "ids")?;
        let values = py.detach(|| Lookup::gather(&self.table, ids, Bounds::Error)).map_err(err)?;
        rows_of(py, values, self.table.dim())
    }
    #[pyo3(signature = (indices, offsets, mode, per_sample_weights=None, include_last_offset=false))]
    fn bag<'py>(
        &self,
        py: Python<'py>,
        indices: PyReadonlyArray1<'py, u32>,
        offsets: PyReadonlyArray1<'py, u32>,
        mode: &str,
        per_sample_weights: Option<PyReadonlyArray1<'py, f32>>,
        include_last_offset: bool,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let pooling = pooling_of(mode)?;
        let bags = bags_of(&indices, &offsets, per_sample_weights.as_ref(), include_last_offset)?;
        let values = py.detach(|| Lookup::bag(&self.table, &bags, pooling, Bounds::Error)).map_err(err)?;
        rows_of(py, values, self.table.dim())
    }
    /// Placed on `engine` as a resident table (one format or mixed).
    fn to_table(&self, py: Python<'_>, engine: &Engine) -> PyResult<GpuTable> {
        engine.place(py, self.table.clone())
    }
    /// Placed on `engine` behind a cache of `cache_capacity` rows, evicting the least frequently
    /// used (what the planner assumed).
    fn to_cache(&self, py: Python<'_>, engine: &Engine) -> PyResult<Cache> {
        match (&self.table, self.choice.cache_capacity()) {
            (AnyTable::Dense(t), Some(capacity)) => {
                let spec = CacheSpec { source: Source::Table(t.clone()), capacity, policy: edo::cache::PolicyKind::Lfu };
                let inner = py.detach(|| edo::block_on(engine.inner.place::<GpuCache<Source>>(spec))).map_err(err)?;
                Ok(Cache { inner })
            }
            _ => Err(invalid(format!("the plan chose {}, not a cache", self.choice))),
        }
    }
}

fn missing_of(missing: &str) -> PyResult<edo::live::Missing> {
    edo::live::Missing::from_name(missing).ok_or_else(|| invalid(format!("missing must be 'error', 'zero' or 'init' (got {missing:?})")))
}

/// What an update did: (sequence, inserted, evicted).
type Update = (u64, usize, usize);

/// A table of rows by 64-bit key that takes new keys, updates and snapshot swaps while other
/// threads look rows up (`edo::live::LiveTable`).
#[pyclass(module = "edo._edo", frozen)]
struct LiveTable {
    inner: edo::live::LiveTable,
}

#[pymethods]
impl LiveTable {
    #[new]
    #[pyo3(signature = (format, dim, capacity=1024, max_rows=None, policy="lru", init=None, hashed=None, memory_budget=None, path=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        format: &str,
        dim: usize,
        capacity: usize,
        max_rows: Option<usize>,
        policy: &str,
        init: Option<PyReadonlyArray1<'_, f32>>,
        hashed: Option<&Table>,
        memory_budget: Option<u64>,
        path: Option<PathBuf>,
    ) -> PyResult<LiveTable> {
        let policy = policy_of(policy)?;
        let mut options = edo::live::LiveOptions::new(format_of(format)?, dim).capacity(capacity).policy(policy);
        if let Some(m) = max_rows {
            options = options.max_rows(m);
        }
        if let Some(b) = memory_budget {
            options = options.memory_budget(b);
        }
        options = match (init, hashed) {
            (Some(_), Some(_)) => return Err(invalid("give init (a row) or hashed (a table), not both".into())),
            (Some(row), None) => options.init(edo::live::Init::Row(slice(&row, "init")?.to_vec())),
            (None, Some(t)) => options.init(edo::live::Init::Hashed(t.inner.clone())),
            (None, None) => options,
        };
        let inner = py
            .detach(|| match &path {
                Some(p) => edo::live::LiveTable::open(p, options),
                None => edo::live::LiveTable::new(options),
            })
            .map_err(err)?;
        Ok(LiveTable { inner })
    }

    #[getter]
    fn format(&self) -> &'static str {
        self.inner.format().name()
    }
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    #[getter]
    fn capacity(&self) -> usize {
        self.inner.capacity()
    }
    #[getter]
    fn version(&self) -> u64 {
        self.inner.version()
    }
    #[getter]
    fn nbytes(&self) -> u64 {
        self.inner.bytes()
    }
    fn __len__(&self) -> usize {
        self.inner.len()
    }
    fn __contains__(&self, key: u64) -> bool {
        self.inner.contains(key)
    }

    /// Counters: (lookups, unknown, inserts, evictions, update_batches, rows_updated, swaps).
    fn stats(&self) -> (u64, u64, u64, u64, u64, u64, u64) {
        let s = self.inner.stats();
        (s.lookups, s.unknown, s.inserts, s.evictions, s.update_batches, s.rows_updated, s.swaps)
    }

    fn gather<'py>(&self, py: Python<'py>, keys: PyReadonlyArray1<'py, u64>, missing: &str) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let (keys, missing) = (slice(&keys, "keys")?, missing_of(missing)?);
        let values = py.detach(|| self.inner.gather(keys, missing)).map_err(err)?;
        rows_of(py, values, self.inner.dim())
    }

    fn find_or_insert<'py>(&self, py: Python<'py>, keys: PyReadonlyArray1<'py, u64>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let keys = slice(&keys, "keys")?;
        let values = py.detach(|| self.inner.find_or_insert(keys)).map_err(err)?;
        rows_of(py, values, self.inner.dim())
    }

    #[pyo3(signature = (keys, offsets, mode, missing, per_sample_weights=None, include_last_offset=false))]
    #[allow(clippy::too_many_arguments)] // PyTorch's arguments, and the lookup's own
    fn bag<'py>(
        &self,
        py: Python<'py>,
        keys: PyReadonlyArray1<'py, u64>,
        offsets: PyReadonlyArray1<'py, u32>,
        mode: &str,
        missing: &str,
        per_sample_weights: Option<PyReadonlyArray1<'py, f32>>,
        include_last_offset: bool,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let (pooling, missing) = (pooling_of(mode)?, missing_of(missing)?);
        let bags = bags_of(&keys, &offsets, per_sample_weights.as_ref(), include_last_offset)?;
        let values = py.detach(|| self.inner.bag(&bags, pooling, missing)).map_err(err)?;
        rows_of(py, values, self.inner.dim())
    }

    fn update(&self, py: Python<'_>, keys: PyReadonlyArray1<'_, u64>, values: PyReadonlyArray2<'_, f32>) -> PyResult<Update> {
        let keys = slice(&keys, "keys")?;
        let values = values.as_slice().map_err(|_| invalid("values must be C-contiguous".into()))?;
        let r = py.detach(|| self.inner.update(keys, values)).map_err(err)?;
        Ok((r.sequence, r.inserted, r.evicted))
    }

    fn apply_log(&self, py: Python<'_>, path: PathBuf) -> PyResult<Vec<Update>> {
        let reports = py.detach(|| edo::live::UpdateLog::read(&path).and_then(|log| self.inner.apply_log(&log))).map_err(err)?;
        Ok(reports.into_iter().map(|r| (r.sequence, r.inserted, r.evicted)).collect())
    }

    fn remove(&self, py: Python<'_>, keys: PyReadonlyArray1<'_, u64>) -> PyResult<usize> {
        let keys = slice(&keys, "keys")?;
        py.detach(|| self.inner.remove(keys)).map_err(err)
    }

    fn usage<'py>(&self, py: Python<'py>, keys: PyReadonlyArray1<'py, u64>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let keys = slice(&keys, "keys")?;
        Ok(PyArray1::from_vec(py, py.detach(|| self.inner.usage(keys))))
    }

    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.inner.snapshot()?.write(&path)).map_err(err)
    }

    /// Swaps in the table file at `path`: (version, keys, old_bytes, new_bytes, pause_seconds).
    fn swap(&self, py: Python<'_>, path: PathBuf) -> PyResult<(u64, usize, u64, u64, f64)> {
        let r = py.detach(|| self.inner.swap_file(&path)).map_err(err)?;
        Ok((r.version, r.keys, r.old_bytes, r.new_bytes, r.pause.as_secs_f64()))
    }
}

/// The format, dim and rows of the `.edo` file at `path` (keyed, reordered or plain).
#[pyfunction]
fn stored_shape(py: Python<'_>, path: PathBuf) -> PyResult<(&'static str, usize, usize)> {
    let file = py.detach(|| TableFile::open_stored(&path)).map_err(err)?;
    Ok((file.table().format().name(), file.table().dim(), file.table().rows()))
}

/// An update-log batch appended to the file at `path` (written with its header when new).
#[pyfunction]
fn append_updates(py: Python<'_>, path: PathBuf, keys: PyReadonlyArray1<'_, u64>, values: PyReadonlyArray2<'_, f32>) -> PyResult<()> {
    let dim = values.shape()[1];
    let keys = slice(&keys, "keys")?;
    let values = values.as_slice().map_err(|_| invalid("values must be C-contiguous".into()))?;
    py.detach(|| edo::live::UpdateLog::append(&path, dim, keys, values)).map_err(err)
}

/// int64 ids (numpy's and PyTorch's) as uint32, checked in one pass: a negative id or one past
/// 2³²−1 is an `InvalidArgumentError` naming it (the fast path of `edo._ids`).
#[pyfunction]
fn ids_u32<'py>(py: Python<'py>, ids: PyReadonlyArray1<'py, i64>, name: &str) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let converted = match ids.as_slice() {
        Ok(s) => s.iter().map(|&i| u32::try_from(i).map_err(|_| i)).collect::<Result<Vec<u32>, i64>>(),
        Err(_) => ids.as_array().iter().map(|&i| u32::try_from(i).map_err(|_| i)).collect(),
    };
    match converted {
        Ok(v) => Ok(PyArray1::from_vec(py, v)),
        Err(bad) => Err(invalid(format!("{name} holds {bad}: ids are integers from 0 to 4294967295"))),
    }
}

#[pymodule]
fn _edo(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FORMATS", Format::ALL.map(Format::name).to_vec())?;
    m.add_class::<Table>()?;
    m.add_class::<Codes>()?;
    m.add_class::<Model>()?;
    m.add_class::<Engine>()?;
    m.add_class::<GpuTable>()?;
    m.add_class::<Cache>()?;
    m.add_class::<Plan>()?;
    m.add_class::<PlannedTable>()?;
    m.add_class::<LiveTable>()?;
    m.add_function(wrap_pyfunction!(append_updates, m)?)?;
    m.add_function(wrap_pyfunction!(stored_shape, m)?)?;
    m.add_function(wrap_pyfunction!(quantize, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(binary_codes, m)?)?;
    m.add_function(wrap_pyfunction!(ids_u32, m)?)?;
    Ok(())
}
