//! [`Request`]: one lookup described once — which rows (ids, or bags with their pooling), the
//! bounds policy, and the element type of the output — for every table kind and both paths.
//!
//! Each kind of `edo` implements one method for it (`edo::Lookup::lookup` on the CPU path,
//! `edo::GpuLookup::prepare` on the GPU); the verbs are provided methods built on that one, so a
//! new output kind or selection is a variant here and an arm in each kind, not a verb in every
//! layer.

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
    /// GPU two a 32-bit word.
    F16,
}

/// One lookup: its rows, its bounds policy, its output's element type.
///
/// ```
/// use edo_core::{Bounds, Element, HostRows, Request};
/// let request = Request::gather(&[3, 99], Bounds::Error).element(Element::F16);
/// assert!(request.check(100, 8).is_ok());
/// assert!(request.check(99, 8).is_err()); // id 99 is past a table of 99 rows
/// let HostRows::F16(rows) = request.finish(vec![0.5; 2 * 8]) else { unreachable!() };
/// assert_eq!(rows.len(), 16);
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
    pub fn answer_by_gather<E: From<Error>>(&self, rows: usize, dim: usize, gather: impl FnOnce(&[u32], Bounds) -> Result<Vec<f32>, E>) -> Result<HostRows, E> {
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
