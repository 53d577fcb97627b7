//! Hamming search over binary codes, and indexes of sentence vectors.

use super::*;

/// Binary codes ready for Hamming search (on the GPU, their host copy inside for recovery, or on
/// the CPU path).
#[wasm_bindgen]
pub struct EdoCodes {
    pub(crate) inner: Placed<GpuCodes>,
    /// The codes' transform: queries go through it.
    pub(crate) transform: Option<CodeTransform>,
}

/// Search results: `ids` and `distances`, `k` per query, nearest first.
#[wasm_bindgen]
pub struct EdoNeighbors {
    pub(crate) k: usize,
    pub(crate) ids: Vec<u32>,
    pub(crate) distances: Vec<u32>,
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

/// Sentence vectors of a corpus, searchable by meaning (see `EdoResidentModel.index`).
#[wasm_bindgen]
pub struct EdoSearchIndex {
    pub(crate) model: EdoResidentModel,
    pub(crate) tables: IndexOn,
}

/// An index's binary codes and INT8 rows, both on the model's backend.
pub(crate) struct IndexOn {
    pub(crate) codes: Placed<GpuCodes>,
    pub(crate) int8: Placed<GpuTable>,
}

impl IndexOn {
    fn host(&self) -> (&PackedTable, &PackedTable) {
        (self.codes.host(), self.int8.host())
    }
}

/// Ranked results: `ids` and `scores` (dot products of the query with the INT8 rows), best first.
#[wasm_bindgen]
pub struct EdoScored {
    pub(crate) ids: Vec<u32>,
    pub(crate) scores: Vec<f32>,
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
