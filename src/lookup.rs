//! The host twin of [`crate::GpuLookup`]: one interface for looking rows up on the CPU path from
//! every table kind that u32 ids address, and the closed enum [`AnyTable`] over them.
//!
//! Each kind answers a [`Request`] in [`Lookup::lookup`]; the verbs are provided methods. A kind
//! without a bag of its own ([`MixedTable`]) gathers every index and pools the gathered rows with
//! the CPU bag, which gives the values of a fused bag (rows decode the same way and are summed in
//! index order); [`PackedTable`] and [`PrunedTable`] pool as they decode.

use crate::format::PackedTable;
use crate::mixed::MixedTable;
use crate::prune::PrunedTable;
use crate::request::{HostRows, IdSelect, Request};
use crate::{Bags, Bounds, Element, Error, Pooling};
use half::f16;

/// A table on the host whose rows u32 ids look up, on all cores: the CPU path, and the oracle of
/// the GPU's [`crate::GpuLookup`] (the same values, bit for bit for gathers).
///
/// A kind implements [`Lookup::lookup`], which answers any [`Request`]; the verbs are built on
/// it. A kind without a bag of its own answers bags with [`Request::answer_by_gather`].
pub trait Lookup {
    /// Rows the ids address (before any pruning or remapping).
    fn rows(&self) -> usize;
    /// Values per row.
    fn dim(&self) -> usize;
    /// Bytes the table holds in memory.
    fn bytes(&self) -> u64;

    /// Answers `request`: a row of `dim` values of its element type per id, per bag, or per
    /// index for [`Pooling::None`]. With [`Bounds::Error`]
    /// a bad id fails the call before anything is computed.
    fn lookup(&self, request: &Request<'_>) -> Result<HostRows, Error>;

    /// Gathers `ids` into `ids.len() × dim` f32.
    fn gather(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
        Ok(self.lookup(&Request::gather(ids, bounds))?.into_f32())
    }

    /// EmbeddingBag: pools `bags` of rows into `bags.len() × dim` values (`indices.len() × dim`
    /// for [`Pooling::None`]).
    fn bag(&self, bags: &Bags, pooling: Pooling, bounds: Bounds) -> Result<Vec<f32>, Error> {
        Ok(self.lookup(&Request::bag(bags, pooling, bounds))?.into_f32())
    }

    /// [`Lookup::gather`] rounded to f16 (nearest even; beyond f16's range ±inf), as the GPU's
    /// [`crate::GpuLookup::gather_f16`] writes it: the same values bit for bit.
    fn gather_f16(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f16>, Error> {
        Ok(self.lookup(&Request::gather(ids, bounds).element(Element::F16))?.into_f16())
    }

    /// [`Lookup::bag`] rounded to f16, as [`crate::GpuLookup::bag_f16`] writes it.
    fn bag_f16(&self, bags: &Bags, pooling: Pooling, bounds: Bounds) -> Result<Vec<f16>, Error> {
        Ok(self.lookup(&Request::bag(bags, pooling, bounds).element(Element::F16))?.into_f16())
    }
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
    /// Bags pool as they decode.
    fn lookup(&self, request: &Request<'_>) -> Result<HostRows, Error> {
        let mut store = Vec::new();
        let values = match request.narrow(self.rows(), &mut store)? {
            IdSelect::Ids(ids) => crate::cpu::gather(self, ids, request.bounds)?,
            IdSelect::Bags(bags, pooling) => crate::cpu::embedding_bag(self, &bags, pooling, request.bounds)?,
        };
        Ok(request.finish(values))
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
    /// Pruned rows read as zeros (in bags, zero rows counted by mean, taking part in max).
    fn lookup(&self, request: &Request<'_>) -> Result<HostRows, Error> {
        let mut store = Vec::new();
        let select = request.narrow(self.original_rows(), &mut store)?;
        let mapped = self.map_ids(select.indices(), request.bounds)?;
        let values = match select {
            IdSelect::Ids(_) => crate::cpu::gather(self.table(), &mapped, Bounds::Zero)?,
            IdSelect::Bags(bags, pooling) => crate::cpu::embedding_bag(self.table(), &Bags { indices: &mapped, ..bags }, pooling, Bounds::Zero)?,
        };
        Ok(request.finish(values))
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
    /// Each row decoded from its part, hot or cold, on all cores; bags pool the gathered rows.
    fn lookup(&self, request: &Request<'_>) -> Result<HostRows, Error> {
        request.answer_by_gather(self.rows(), self.dim(), |ids, bounds| self.gather_rows(ids, bounds))
    }
}

impl MixedTable {
    /// Rows of `ids` (checked), each decoded from its part, hot or cold, on all cores.
    fn gather_rows(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
        let dim = self.dim();
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

/// `$e` with `$t` bound to the table inside `$self`, whichever kind it is.
macro_rules! each_host_kind {
    ($self:expr, $t:ident => $e:expr) => {
        match $self {
            AnyTable::Dense($t) => $e,
            AnyTable::Pruned($t) => $e,
            AnyTable::Mixed($t) => $e,
        }
    };
}

impl Lookup for AnyTable {
    fn rows(&self) -> usize {
        each_host_kind!(self, t => Lookup::rows(t))
    }
    fn dim(&self) -> usize {
        each_host_kind!(self, t => Lookup::dim(t))
    }
    fn bytes(&self) -> u64 {
        each_host_kind!(self, t => Lookup::bytes(t))
    }
    fn lookup(&self, request: &Request<'_>) -> Result<HostRows, Error> {
        each_host_kind!(self, t => Lookup::lookup(t, request))
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
