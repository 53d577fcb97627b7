//! The host twin of [`crate::GpuLookup`]: one interface for looking rows up on the CPU path from
//! every table kind that u32 ids address, and the closed enum [`AnyTable`] over them.
//!
//! `gather` is the primitive; `bag` defaults to gathering every index and pooling the gathered
//! rows with the CPU bag, which gives the values of a fused bag (rows decode the same way and are
//! summed in index order). [`PackedTable`] and [`PrunedTable`] pool as they decode instead.

use crate::bags::BagPlan;
use crate::bags::{Bags, Pooling};
use crate::format::{Format, PackedTable};
use crate::mixed::MixedTable;
use crate::prune::PrunedTable;
use crate::{Bounds, Error};
use half::f16;

/// A table on the host whose rows u32 ids look up, on all cores: the CPU path, and the oracle of
/// the GPU's [`crate::GpuLookup`] (the same values, bit for bit for gathers).
pub trait Lookup {
    /// Rows the ids address (before any pruning or remapping).
    fn rows(&self) -> usize;
    /// Values per row.
    fn dim(&self) -> usize;
    /// Bytes the table holds in memory.
    fn bytes(&self) -> u64;

    /// Gathers `ids` into `ids.len() × dim` f32. With [`Bounds::Error`] a bad id fails the call
    /// before anything is computed.
    fn gather(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error>;

    /// EmbeddingBag: pools `bags` of rows into `bags.len() × dim` values (`indices.len() × dim`
    /// for [`Pooling::None`]).
    fn bag(&self, bags: &Bags, pooling: Pooling, bounds: Bounds) -> Result<Vec<f32>, Error> {
        // Offsets, weights and bounds are checked before any row is read.
        BagPlan::new(&[(self.rows(), self.dim())], bags.len(), bags, pooling, bounds)?;
        let rows = self.gather(bags.indices, bounds)?;
        pool_dense(rows, self.dim(), bags, pooling)
    }

    /// [`Lookup::gather`] rounded to f16 (nearest even; beyond f16's range ±inf), as the GPU's
    /// [`crate::GpuLookup::gather_f16`] writes it: the same values bit for bit.
    fn gather_f16(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f16>, Error> {
        Ok(to_f16(&self.gather(ids, bounds)?))
    }

    /// [`Lookup::bag`] rounded to f16, as [`crate::GpuLookup::bag_f16`] writes it.
    fn bag_f16(&self, bags: &Bags, pooling: Pooling, bounds: Bounds) -> Result<Vec<f16>, Error> {
        Ok(to_f16(&self.bag(bags, pooling, bounds)?))
    }
}

/// f32 values rounded to f16, to nearest even (`half`'s conversion; beyond f16's range ±inf):
/// how edo's f16 outputs round, on the CPU path and in `f16_common.wgsl` alike.
pub fn to_f16(values: &[f32]) -> Vec<f16> {
    values.iter().map(|&v| f16::from_f32(v)).collect()
}

/// Pools rows already gathered, one per index of `bags` in order, as the CPU bag pools a table.
pub(crate) fn pool_dense<I>(rows: Vec<f32>, dim: usize, bags: &Bags<'_, I>, pooling: Pooling) -> Result<Vec<f32>, Error> {
    let n = bags.indices.len();
    if n > u32::MAX as usize {
        return Err(Error::LimitExceeded { what: "indices of one bag call", requested: n as u64, max: u32::MAX as u64 });
    }
    // An FP32 table's words are its values' bits: the Vec is reused, not copied.
    let words: Vec<u32> = rows.into_iter().map(f32::to_bits).collect();
    let dense = PackedTable::from_words(Format::F32, n, dim, words)?;
    let iota: Vec<u32> = (0..n as u32).collect();
    crate::cpu::embedding_bag(&dense, &bags.with_indices(&iota), pooling, Bounds::Error)
}

impl Lookup for PackedTable {
    fn rows(&self) -> usize {
        self.rows()
    }
    fn dim(&self) -> usize {
        self.dim()
    }
    fn bytes(&self) -> u64 {
        self.bytes()
    }
    fn gather(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
        crate::cpu::gather(self, ids, bounds)
    }
    fn bag(&self, bags: &Bags, pooling: Pooling, bounds: Bounds) -> Result<Vec<f32>, Error> {
        crate::cpu::embedding_bag(self, bags, pooling, bounds)
    }
}

impl Lookup for PrunedTable {
    fn rows(&self) -> usize {
        self.original_rows()
    }
    fn dim(&self) -> usize {
        self.dim()
    }
    fn bytes(&self) -> u64 {
        self.bytes()
    }
    /// Pruned rows read as zeros.
    fn gather(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
        crate::cpu::gather(self.table(), &self.map_ids(ids, bounds)?, Bounds::Zero)
    }
    /// Pruned rows read as zero rows (counted by mean, taking part in max).
    fn bag(&self, bags: &Bags, pooling: Pooling, bounds: Bounds) -> Result<Vec<f32>, Error> {
        let mapped = self.map_ids(bags.indices, bounds)?;
        crate::cpu::embedding_bag(self.table(), &Bags { indices: &mapped, ..*bags }, pooling, Bounds::Zero)
    }
}

impl Lookup for MixedTable {
    fn rows(&self) -> usize {
        self.rows()
    }
    fn dim(&self) -> usize {
        self.dim()
    }
    fn bytes(&self) -> u64 {
        self.bytes()
    }
    /// Each row decoded from its part, hot or cold, on all cores.
    fn gather(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
        let dim = self.dim();
        bounds.check(ids, self.rows())?;
        let mut out = crate::cpu::zeroed(ids.len(), dim, "gather output")?;
        crate::par::for_each_chunk_mut(&mut out, dim, 256, |first, block| {
            for (&id, dst) in ids[first..].iter().zip(block.chunks_exact_mut(dim)) {
                if let Some(r) = bounds.resolve(id, self.rows()) {
                    match self.locate(r) {
                        (true, i) => self.hot().decode_row_into(i, dst),
                        (false, i) => self.cold().decode_row_into(i, dst),
                    }
                }
            }
            None::<()>
        });
        Ok(out)
    }
}

/// Any of the host table kinds of [`Lookup`], for code that chooses one at run time (what
/// [`crate::plan::Choice::build`] returns): a closed enum, so no `dyn` and no boxing.
#[derive(Clone, Debug)]
pub enum AnyTable {
    /// A packed table of one format.
    Dense(PackedTable),
    /// A compact table of kept rows and its remap.
    Pruned(PrunedTable),
    /// Hot rows in one format, cold rows in another.
    Mixed(MixedTable),
}

macro_rules! each {
    ($self:expr, $t:ident => $e:expr) => {
        match $self {
            AnyTable::Dense($t) => $e,
            AnyTable::Pruned($t) => $e,
            AnyTable::Mixed($t) => $e,
        }
    };
}

impl AnyTable {
    /// Uploads the table to `engine` as the matching GPU kind.
    pub async fn upload(&self, engine: &crate::Engine) -> Result<crate::AnyGpuTable, Error> {
        Ok(match self {
            AnyTable::Dense(t) => crate::GpuTable::upload(engine, t).await?.into(),
            AnyTable::Pruned(t) => crate::GpuPrunedTable::upload(engine, t).await?.into(),
            AnyTable::Mixed(t) => crate::GpuMixedTable::upload(engine, t).await?.into(),
        })
    }
}

impl Lookup for AnyTable {
    fn rows(&self) -> usize {
        each!(self, t => Lookup::rows(t))
    }
    fn dim(&self) -> usize {
        each!(self, t => Lookup::dim(t))
    }
    fn bytes(&self) -> u64 {
        each!(self, t => Lookup::bytes(t))
    }
    fn gather(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
        each!(self, t => Lookup::gather(t, ids, bounds))
    }
    fn bag(&self, bags: &Bags, pooling: Pooling, bounds: Bounds) -> Result<Vec<f32>, Error> {
        each!(self, t => Lookup::bag(t, bags, pooling, bounds))
    }
}

impl From<PackedTable> for AnyTable {
    fn from(t: PackedTable) -> Self {
        AnyTable::Dense(t)
    }
}
impl From<PrunedTable> for AnyTable {
    fn from(t: PrunedTable) -> Self {
        AnyTable::Pruned(t)
    }
}
impl From<MixedTable> for AnyTable {
    fn from(t: MixedTable) -> Self {
        AnyTable::Mixed(t)
    }
}
