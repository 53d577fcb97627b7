//! [`Request`]: one lookup described once — which rows (ids, or bags with their pooling), the
//! bounds policy, and the element type of the output — for every table kind and both paths.
//!
//! Each kind implements one method for it: [`crate::Lookup::lookup`] on the CPU path,
//! [`crate::GpuLookup::prepare`] on the GPU. The verbs (`gather`, `bag`, `gather_f16`,
//! `bag_f16`, and their `prepare_*` forms) are provided methods built on that one, and every
//! wrapper (`AnyTable`, `AnyGpuTable`, `Recoverable`, `Placed`, the browser crate) forwards it,
//! so a new output kind or selection is a variant here and an arm in each kind, not a verb in
//! every layer.

use half::f16;

use crate::bags::{BagPlan, Bags, Pooling};
use crate::{Bounds, Error};

/// Which rows a [`Request`] looks up.
#[derive(Clone, Copy, Debug)]
pub enum Select<'a> {
    /// A gather: one output row per id.
    Ids(&'a [u32]),
    /// EmbeddingBag: one output row per bag (per index for [`Pooling::None`]).
    Bags(Bags<'a>, Pooling),
}

/// The element type of a lookup's output rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Element {
    /// f32 values.
    F32,
    /// f16 values, rounded from the f32 result to nearest even (beyond f16's range ±inf); on the
    /// GPU two a 32-bit word (see [`crate::GpuRows`]).
    F16,
}

/// One lookup: its rows, its bounds policy, its output's element type.
///
/// ```
/// use edo::{Bounds, Element, Format, HostRows, Lookup, PackedTable, Request};
/// let data: Vec<f32> = (0..100 * 8).map(|i| i as f32 * 0.25).collect();
/// let table = PackedTable::quantize(Format::F16, &data, 100, 8)?;
/// let request = Request::gather(&[3, 99], Bounds::Error).element(Element::F16);
/// let HostRows::F16(rows) = table.lookup(&request)? else { unreachable!() };
/// assert_eq!(rows, table.gather_f16(&[3, 99], Bounds::Error)?);
/// # Ok::<(), edo::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The rows to look up.
    pub select: Select<'a>,
    /// What a bad id does ([`Bounds::Error`]: the request fails before any work).
    pub bounds: Bounds,
    /// The output's element type.
    pub element: Element,
}

impl<'a> Request<'a> {
    /// A gather of `ids` into f32 rows.
    pub fn gather(ids: &'a [u32], bounds: Bounds) -> Request<'a> {
        Request { select: Select::Ids(ids), bounds, element: Element::F32 }
    }

    /// EmbeddingBag over `bags`, into f32 rows.
    pub fn bag(bags: &Bags<'a>, pooling: Pooling, bounds: Bounds) -> Request<'a> {
        Request { select: Select::Bags(*bags, pooling), bounds, element: Element::F32 }
    }

    /// The same request, writing `element`s.
    pub fn element(self, element: Element) -> Request<'a> {
        Request { element, ..self }
    }

    /// The ids the request reads (a gather's ids, or the bags' indices).
    pub fn indices(&self) -> &'a [u32] {
        match self.select {
            Select::Ids(ids) => ids,
            Select::Bags(bags, _) => bags.indices,
        }
    }

    /// Checks the request against a table of `rows × dim` (ids under [`Bounds::Error`]; offsets,
    /// weights and pooling of bags) before anything is computed or built.
    pub fn check(&self, rows: usize, dim: usize) -> Result<(), Error> {
        match self.select {
            Select::Ids(ids) => Ok(self.bounds.check(ids, rows)?),
            Select::Bags(bags, pooling) => Ok(BagPlan::new(&[(rows, dim)], bags.len(), &bags, pooling, self.bounds).map(|_| ())?),
        }
    }

    /// The request's answer from f32 values computed for it: as they are, or rounded to f16.
    pub fn finish(&self, values: Vec<f32>) -> HostRows {
        match self.element {
            Element::F32 => HostRows::F32(values),
            Element::F16 => HostRows::F16(crate::cpu::to_f16(&values)),
        }
    }

    /// Answers the request on the CPU path from a kind's own gather of f32 rows (`gather(ids,
    /// bounds)`, with ids already checked): bags gather every index and pool the rows as the CPU
    /// bag pools a table, in index order — the values of a fused bag.
    pub fn answer_by_gather(&self, rows: usize, dim: usize, gather: impl FnOnce(&[u32], Bounds) -> Result<Vec<f32>, Error>) -> Result<HostRows, Error> {
        self.check(rows, dim)?;
        let values = match self.select {
            Select::Ids(ids) => gather(ids, self.bounds)?,
            Select::Bags(bags, pooling) => crate::cpu::pool_rows(gather(bags.indices, self.bounds)?, dim, &bags, pooling)?,
        };
        Ok(self.finish(values))
    }
}

/// Rows looked up on the host, `rows × dim` values row-major, of the request's [`Element`].
#[derive(Clone, Debug, PartialEq)]
pub enum HostRows {
    /// f32 values.
    F32(Vec<f32>),
    /// f16 values.
    F16(Vec<f16>),
}

impl HostRows {
    /// The values as f32 (f16 values widened, which is exact).
    pub fn into_f32(self) -> Vec<f32> {
        match self {
            HostRows::F32(v) => v,
            HostRows::F16(v) => v.into_iter().map(f16::to_f32).collect(),
        }
    }

    /// The values as f16 (f32 values rounded to nearest even).
    pub fn into_f16(self) -> Vec<f16> {
        match self {
            HostRows::F32(v) => crate::cpu::to_f16(&v),
            HostRows::F16(v) => v,
        }
    }
}

/// Lookups whose results come back to the host, awaited: what runs on either path — a GPU
/// (reading its output back, recovering from a device loss) or the CPU path. Implemented by
/// [`crate::Recoverable`] and [`crate::Placed`], which forward [`AsyncLookup::lookup`]; the verbs
/// are built on it.
#[allow(async_fn_in_trait)] // the futures are awaited where they are made; wasm's are not Send
pub trait AsyncLookup {
    /// Rows the ids address.
    fn rows(&self) -> usize;
    /// Values per row.
    fn dim(&self) -> usize;

    /// Answers `request` on the host: a row of `dim` values of its element type per id, per
    /// bag, or per index for [`Pooling::None`].
    async fn lookup(&self, request: &Request<'_>) -> Result<HostRows, Error>;

    /// Decoded rows of `ids`, `ids.len() × dim` f32.
    async fn gather(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
        Ok(self.lookup(&Request::gather(ids, bounds)).await?.into_f32())
    }

    /// Pooled bags (EmbeddingBag).
    async fn bag(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<Vec<f32>, Error> {
        Ok(self.lookup(&Request::bag(bags, pooling, bounds)).await?.into_f32())
    }

    /// [`AsyncLookup::gather`] rounded to f16 (on a GPU the kernel writes f16 itself).
    async fn gather_f16(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f16>, Error> {
        Ok(self.lookup(&Request::gather(ids, bounds).element(Element::F16)).await?.into_f16())
    }

    /// [`AsyncLookup::bag`] rounded to f16.
    async fn bag_f16(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<Vec<f16>, Error> {
        Ok(self.lookup(&Request::bag(bags, pooling, bounds).element(Element::F16)).await?.into_f16())
    }
}
