//! [`GpuLookup`]: one interface over the GPU table kinds that u32 ids look up.
//!
//! A kind implements [`GpuLookup::prepare`], which builds the job of any [`Request`] without
//! submitting it; the verbs (`gather`, `bag`, their f16 forms and `prepare_*` forms) are provided
//! methods built on it, as burn's `ModuleOps::embedding` defaults to select + reshape. A kind
//! without a fused bag kernel answers bags with `bag::gather_and_pool`: every index
//! gathered into dense f32 rows, pooled by the FP32 bag kernel in the same compute pass — the
//! values of a fused bag (rows are decoded exactly as the gather decodes them, then summed in
//! index order), at the cost of `indices × dim × 4` bytes of GPU scratch. f16 outputs a kind does
//! not write itself are rounded by one more pass (`LookupJob::into_element`).
//!
//! The closed enum over the kinds, [`super::AnyGpuTable`], is in `any.rs`.

use super::{Engine, GpuRows, GpuTable, LookupJob};
use crate::request::Request;
use crate::{Bags, Bounds, Element, Error, Pooling};

/// The accessors of [`GpuLookup`] for a kind `$t`, by its inherent methods of the same names
/// (inside its `impl GpuLookup for $t`).
macro_rules! inherent_accessors {
    ($t:ty) => {
        fn rows(&self) -> usize {
            <$t>::rows(self)
        }
        fn dim(&self) -> usize {
            <$t>::dim(self)
        }
        fn bytes(&self) -> u64 {
            <$t>::bytes(self)
        }
        fn set_name(&self, name: &str) {
            <$t>::set_name(self, name)
        }
        fn engine(&self) -> Engine {
            <$t>::engine(self)
        }
    };
}
pub(crate) use inherent_accessors;

/// A table on the GPU whose rows u32 ids look up: gathered into dense rows, or pooled into bags
/// (EmbeddingBag). Every call submits its work and returns at once; the output stays on the GPU
/// in a [`GpuRows`] until read back. The `prepare_*` forms build the same job without
/// submitting it, for a caller's own command encoder ([`LookupJob::encode`]) or to repeat it.
///
/// Bounds are applied as [`Bounds`] says: with [`Bounds::Error`] a bad id fails the call before
/// any work; [`Bounds::Zero`] reads zero rows (which count for mean and take part in max) and
/// [`Bounds::Clamp`] the last row.
#[allow(async_fn_in_trait)] // the futures are awaited where they are made; wasm's are not Send
pub trait GpuLookup {
    /// Rows the ids address (before any pruning or remapping).
    fn rows(&self) -> usize;
    /// Values per row.
    fn dim(&self) -> usize;
    /// Bytes of GPU memory the table holds (shards, remaps).
    fn bytes(&self) -> u64;
    /// Names the table's buffers in the engine's [`super::Engine::memory_report`].
    fn set_name(&self, name: &str);
    /// The engine the table lives on (another handle to it).
    fn engine(&self) -> Engine;

    /// Builds the job of `request` — a row of `dim` values of its element type per id, per bag,
    /// or per index for [`Pooling::None`] — without
    /// submitting it. The request is checked first ([`Request::check`]); nothing is built for a
    /// bad one.
    async fn prepare(&self, request: &Request<'_>) -> Result<LookupJob, Error>;

    /// Runs `request`: its job, submitted (checked: a submission wgpu refuses is
    /// [`Error::Gpu`]). A kind whose submission is more than that (a cache submits under its
    /// lock, a bag part by part) provides its own.
    async fn lookup(&self, request: &Request<'_>) -> Result<GpuRows, Error> {
        let job = self.prepare(request).await?;
        job.submit_checked().await?;
        Ok(job.into_output())
    }

    /// Runs `request` and reads its rows back to the host: the job and the copy of its output
    /// submitted together, then one wait. A kind whose [`GpuLookup::lookup`] is its own
    /// provides this too.
    async fn lookup_host(&self, request: &Request<'_>) -> Result<crate::HostRows, Error> {
        Ok(self.prepare(request).await?.submit_and_read().await?)
    }

    /// Builds a gather of `ids` into `ids.len() × dim` f32 without submitting it.
    async fn prepare_gather(&self, ids: &[u32], bounds: Bounds) -> Result<LookupJob, Error> {
        self.prepare(&Request::gather(ids, bounds)).await
    }

    /// Builds EmbeddingBag over `bags` of rows — `bags.len() × dim` values, `indices.len() × dim`
    /// for [`Pooling::None`] — without submitting it.
    async fn prepare_bag(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<LookupJob, Error> {
        self.prepare(&Request::bag(bags, pooling, bounds)).await
    }

    /// [`GpuLookup::prepare_gather`] writing f16 rows (see [`GpuRows`]): the gathered values
    /// rounded to nearest even, as [`crate::Lookup::gather_f16`] rounds them. A [`super::GpuTable`]
    /// writes f16 from the gather itself, half the bytes of an f32 gather.
    async fn prepare_gather_f16(&self, ids: &[u32], bounds: Bounds) -> Result<LookupJob, Error> {
        self.prepare(&Request::gather(ids, bounds).element(Element::F16)).await
    }

    /// [`GpuLookup::prepare_bag`] writing f16 rows: the bags pool in f32, then a pass rounds
    /// them to f16 (bags are few beside the rows they read).
    async fn prepare_bag_f16(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<LookupJob, Error> {
        self.prepare(&Request::bag(bags, pooling, bounds).element(Element::F16)).await
    }

    /// Gathers `ids` and submits the work.
    async fn gather(&self, ids: &[u32], bounds: Bounds) -> Result<GpuRows, Error> {
        self.lookup(&Request::gather(ids, bounds)).await
    }

    /// Pools `bags` and submits the work.
    async fn bag(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<GpuRows, Error> {
        self.lookup(&Request::bag(bags, pooling, bounds)).await
    }

    /// Gathers `ids` into f16 rows and submits the work.
    async fn gather_f16(&self, ids: &[u32], bounds: Bounds) -> Result<GpuRows, Error> {
        self.lookup(&Request::gather(ids, bounds).element(Element::F16)).await
    }

    /// Pools `bags` into f16 rows and submits the work.
    async fn bag_f16(&self, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Result<GpuRows, Error> {
        self.lookup(&Request::bag(bags, pooling, bounds).element(Element::F16)).await
    }
}

impl GpuLookup for GpuTable {
    inherent_accessors!(GpuTable);

    async fn prepare(&self, request: &Request<'_>) -> Result<LookupJob, Error> {
        Ok(GpuTable::prepare(self, request).await?)
    }
}
