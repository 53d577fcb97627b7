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
    /// A gather of 64-bit ids: the keys of quotient-remainder tables, which cover more ids than
    /// u32 counts. Tables of u32 ids answer it too ([`Request::narrow`]).
    Keys(&'a [u64]),
    /// EmbeddingBag over 64-bit ids.
    KeyBags(Bags<'a, u64>, Pooling),
}

/// A [`Select`] of u32 ids only: what a table of u32 ids looks up ([`Request::narrow`]).
#[derive(Clone, Copy, Debug)]
pub enum IdSelect<'a> {
    /// A gather.
    Ids(&'a [u32]),
    /// EmbeddingBag.
    Bags(Bags<'a>, Pooling),
}

impl<'a> IdSelect<'a> {
    /// The ids it reads (a gather's ids, or the bags' indices).
    pub fn indices(&self) -> &'a [u32] {
        match self {
            IdSelect::Ids(ids) => ids,
            IdSelect::Bags(bags, _) => bags.indices,
        }
    }
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

    /// A gather of 64-bit `keys` into f32 rows.
    pub fn gather_keys(keys: &'a [u64], bounds: Bounds) -> Request<'a> {
        Request { select: Select::Keys(keys), bounds, element: Element::F32 }
    }

    /// EmbeddingBag over bags of 64-bit ids, into f32 rows.
    pub fn bag_keys(bags: &Bags<'a, u64>, pooling: Pooling, bounds: Bounds) -> Request<'a> {
        Request { select: Select::KeyBags(*bags, pooling), bounds, element: Element::F32 }
    }

    /// The same request, writing `element`s.
    pub fn element(self, element: Element) -> Request<'a> {
        Request { element, ..self }
    }

    /// What a table of `rows` rows addressed by u32 ids looks up: the request's u32 ids, or its
    /// 64-bit ids as u32 ids in `store`. Under [`Bounds::Error`] an id past the table is
    /// [`Error::IdOutOfRange64`]; otherwise it becomes an id past the table (`u32::MAX`), which
    /// reads what the policy reads for one. `u32::MAX` is also the GPU's skip sentinel: a kind
    /// resolves narrowed ids by the bounds policy before any pass of its own skips rows.
    pub fn narrow<'s>(&self, rows: usize, store: &'s mut Vec<u32>) -> Result<IdSelect<'s>, Error>
    where
        'a: 's,
    {
        let keys = match self.select {
            Select::Ids(ids) => return Ok(IdSelect::Ids(ids)),
            Select::Bags(bags, pooling) => return Ok(IdSelect::Bags(bags, pooling)),
            Select::Keys(keys) => keys,
            Select::KeyBags(bags, _) => bags.indices,
        };
        store.clear();
        store.try_reserve_exact(keys.len()).map_err(|_| Error::HostOutOfMemory { what: "a request's ids", bytes: 4 * keys.len() as u64 })?;
        for (index, &id) in keys.iter().enumerate() {
            store.push(match u32::try_from(id) {
                Ok(id) if (id as usize) < rows => id,
                // Within the table but past u32 (or the table is so large that u32::MAX is one
                // of its rows): u32 ids cannot say it.
                _ if id < rows as u64 || rows > u32::MAX as usize => {
                    return Err(Error::LimitExceeded { what: "a 64-bit id of a table of u32 ids", requested: id, max: u32::MAX as u64 - 1 })
                }
                _ if self.bounds == Bounds::Error => return Err(Error::IdOutOfRange64 { index, id, max: rows as u64 }),
                _ => u32::MAX,
            });
        }
        Ok(match self.select {
            Select::KeyBags(bags, pooling) => IdSelect::Bags(bags.with_indices(store), pooling),
            _ => IdSelect::Ids(store),
        })
    }

    /// Checks the request against a table of `rows × dim` (ids under [`Bounds::Error`]; offsets,
    /// weights and pooling of bags) before anything is computed or built.
    pub fn check(&self, rows: usize, dim: usize) -> Result<(), Error> {
        match self.select {
            Select::Ids(ids) => Ok(self.bounds.check(ids, rows)?),
            Select::Bags(bags, pooling) => Ok(BagPlan::new(&[(rows, dim)], bags.len(), &bags, pooling, self.bounds).map(|_| ())?),
            Select::Keys(_) | Select::KeyBags(..) => {
                let mut store = Vec::new();
                let select = match self.narrow(rows, &mut store)? {
                    IdSelect::Ids(ids) => Select::Ids(ids),
                    IdSelect::Bags(bags, pooling) => Select::Bags(bags, pooling),
                };
                Request { select, ..*self }.check(rows, dim)
            }
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
        let mut store = Vec::new();
        let values = match self.narrow(rows, &mut store)? {
            IdSelect::Ids(ids) => gather(ids, self.bounds)?,
            IdSelect::Bags(bags, pooling) => crate::cpu::pool_rows(gather(bags.indices, self.bounds)?, dim, &bags, pooling)?,
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
