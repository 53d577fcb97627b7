//! Live tables in the browser (`edo::live`): rows by 64-bit key that take new keys, updates,
//! update logs and snapshot swaps, on the CPU path. Keys cross as `BigUint64Array`s.

use wasm_bindgen::prelude::*;

use crate::{err, format_of, policy_of, pooling_of, Failure};
use edo::live::{Init, LiveOptions, LiveTable, Missing, UpdateLog};
use edo::Bags;

fn missing_of(name: &str) -> Result<Missing, Failure> {
    Missing::from_name(name).ok_or_else(|| Failure::arg(format!("unknown missing {name:?} (error, zero, init)")))
}

/// A live table: see `edo::live::LiveTable`.
#[wasm_bindgen]
pub struct EdoLiveTable {
    inner: LiveTable,
}

#[wasm_bindgen]
impl EdoLiveTable {
    /// An empty table of `format` rows of `dim` values; `init` is a new key's first row (zeros
    /// without it); past `max_rows` keys a new key evicts by `policy`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        format: &str,
        dim: usize,
        capacity: Option<usize>,
        max_rows: Option<usize>,
        policy: Option<String>,
        init: Option<Vec<f32>>,
    ) -> Result<EdoLiveTable, Failure> {
        let options = options(LiveOptions::new(format_of(format)?, dim), capacity, max_rows, policy, init)?;
        Ok(EdoLiveTable { inner: LiveTable::new(options).map_err(err)? })
    }

    /// A table holding the rows of `.edo` file bytes: a live table's snapshot, or a plain table
    /// whose row `i` is key `i`.
    #[wasm_bindgen(js_name = fromBytes)]
    pub fn from_bytes(bytes: Vec<u8>, max_rows: Option<usize>, policy: Option<String>) -> Result<EdoLiveTable, Failure> {
        let file = edo::file::TableFile::from_bytes_stored(bytes).map_err(err)?;
        let t = file.table();
        let options = options(LiveOptions::new(t.format(), t.dim()), Some(t.rows().max(1)), max_rows, policy, None)?;
        Ok(EdoLiveTable { inner: LiveTable::from_file(&file, options).map_err(err)? })
    }

    #[wasm_bindgen(getter)]
    pub fn format(&self) -> String {
        self.inner.format().name().into()
    }
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.inner.dim()
    }
    /// Keys held.
    #[wasm_bindgen(getter)]
    pub fn keys(&self) -> usize {
        self.inner.len()
    }
    #[wasm_bindgen(getter)]
    pub fn capacity(&self) -> usize {
        self.inner.capacity()
    }
    #[wasm_bindgen(getter)]
    pub fn version(&self) -> f64 {
        self.inner.version() as f64
    }
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        self.inner.bytes() as f64
    }
    pub fn has(&self, key: u64) -> bool {
        self.inner.contains(key)
    }

    pub fn gather(&self, keys: &[u64], missing: &str) -> Result<Vec<f32>, Failure> {
        self.inner.gather(keys, missing_of(missing)?).map_err(err)
    }

    #[wasm_bindgen(js_name = findOrInsert)]
    pub fn find_or_insert(&self, keys: &[u64]) -> Result<Vec<f32>, Failure> {
        self.inner.find_or_insert(keys).map_err(err)
    }

    pub fn bag(&self, keys: &[u64], offsets: &[u32], pooling: &str, missing: &str, weights: Option<Vec<f32>>) -> Result<Vec<f32>, Failure> {
        let mut bags = Bags::new(keys, offsets).include_last_offset(true);
        if let Some(w) = &weights {
            bags = bags.weights(w);
        }
        self.inner.bag(&bags, pooling_of(pooling)?, missing_of(missing)?).map_err(err)
    }

    /// Writes `values` as the rows of `keys` (new keys inserted): `[sequence, inserted, evicted]`.
    pub fn update(&self, keys: &[u64], values: &[f32]) -> Result<Vec<f64>, Failure> {
        let r = self.inner.update(keys, values).map_err(err)?;
        Ok(vec![r.sequence as f64, r.inserted as f64, r.evicted as f64])
    }

    /// Replays an update log's bytes; every batch checked first. Returns the batches applied.
    #[wasm_bindgen(js_name = applyLog)]
    pub fn apply_log(&self, bytes: &[u8]) -> Result<usize, Failure> {
        let log = UpdateLog::from_bytes(bytes).map_err(err)?;
        Ok(self.inner.apply_log(&log).map_err(err)?.len())
    }

    pub fn remove(&self, keys: &[u64]) -> Result<usize, Failure> {
        self.inner.remove(keys).map_err(err)
    }

    pub fn usage(&self, keys: &[u64]) -> Vec<u64> {
        self.inner.usage(keys)
    }

    /// Swaps in `.edo` file bytes once verified: `[version, keys, oldBytes, newBytes]`.
    pub fn swap(&self, bytes: Vec<u8>) -> Result<Vec<f64>, Failure> {
        let r = self.inner.swap_bytes(bytes).map_err(err)?;
        Ok(vec![r.version as f64, r.keys as f64, r.old_bytes as f64, r.new_bytes as f64])
    }

    /// The table as a keyed `.edo` file's bytes.
    #[wasm_bindgen(js_name = toBytes)]
    pub fn to_bytes(&self) -> Result<Vec<u8>, Failure> {
        Ok(self.inner.snapshot().map_err(err)?.to_bytes())
    }
}

/// The bytes of an update-log batch (`EDOUPDT1`), with the header first when `header` is set.
#[wasm_bindgen(js_name = updateLogBytes)]
pub fn update_log_bytes(dim: usize, keys: &[u64], values: &[f32], header: bool) -> Result<Vec<u8>, Failure> {
    if values.len() != keys.len() * dim {
        return Err(Failure::arg(format!("{} values for {} keys of dim {dim}", values.len(), keys.len())));
    }
    let mut out = if header { UpdateLog::header(dim) } else { Vec::new() };
    out.extend_from_slice(&UpdateLog::batch_bytes(keys, values));
    Ok(out)
}

fn options(
    mut o: LiveOptions,
    capacity: Option<usize>,
    max_rows: Option<usize>,
    policy: Option<String>,
    init: Option<Vec<f32>>,
) -> Result<LiveOptions, Failure> {
    o = o.policy(policy_of(policy.as_deref())?);
    if let Some(c) = capacity {
        o = o.capacity(c);
    }
    if let Some(m) = max_rows {
        o = o.max_rows(m);
    }
    if let Some(row) = init {
        o = o.init(Init::Row(row));
    }
    Ok(o)
}
