//! [`GpuLookup`]: one interface over the GPU table kinds, whatever their ids (u32, or 64-bit
//! through [`Request::gather_keys`]).
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
//! [`Reupload`] (made again after a device loss) and [`Placeable`] (placed on a GPU or the CPU
//! path) are here too, so that a kind's GPU file holds all three of its impls: a new kind is its
//! host side, its GPU side and its exports. The closed enum over the kinds,
//! [`super::AnyGpuTable`], is in `any.rs`.

use std::future::Future;

use wgpu::WasmNotSendSync;

use super::{Engine, GpuRows, GpuTable, LookupJob};
use crate::format::PackedTable;
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

/// Something on the GPU that can be made again on a new engine from what the host keeps of it:
/// what [`super::RecoveringEngine::upload`] accepts. A kind implements it in its own file, beside
/// its [`GpuLookup`].
pub trait Reupload: Sized {
    /// What the host keeps to make it again (the table it was uploaded from).
    type Host;
    /// Makes it on `engine` from `host`. `lost` is the one on the lost device, when there is one
    /// (a cache loads the rows that one held, so it starts warm).
    fn reupload(engine: &Engine, host: &Self::Host, lost: Option<&Self>) -> impl Future<Output = Result<Self, Error>>;
}

/// What [`crate::Backend::place`] accepts: a GPU form that can be made again from its host copy,
/// and its form on the CPU path — the host copy itself (tables and models), or for a cache a
/// [`crate::cache::HostCache`] over it.
pub trait Placeable: Reupload + WasmNotSendSync + 'static {
    /// What the CPU path keeps and looks up in.
    type Cpu: WasmNotSendSync;
    /// The CPU path's form of `host`, refusing a host copy the GPU form would refuse for what
    /// it is (not for the device's limits): binary codes of another format, say.
    fn place_cpu(host: Self::Host) -> Result<Self::Cpu, Error>;
    /// The host copy inside the CPU path's form.
    fn cpu_host(cpu: &Self::Cpu) -> &Self::Host;
}

/// [`Placeable`] for kinds whose CPU path looks up in the host copy itself (tables, models).
macro_rules! placed_as_is {
    ($($t:ty),*) => {$(
        impl $crate::gpu::Placeable for $t {
            type Cpu = <$t as $crate::gpu::Reupload>::Host;
            fn place_cpu(host: Self::Host) -> Result<Self::Cpu, $crate::Error> {
                Ok(host)
            }
            fn cpu_host(cpu: &Self::Cpu) -> &Self::Host {
                cpu
            }
        }
    )*};
}
pub(crate) use placed_as_is;

impl Reupload for GpuTable {
    type Host = PackedTable;
    async fn reupload(engine: &Engine, host: &PackedTable, _: Option<&Self>) -> Result<Self, Error> {
        Ok(GpuTable::upload(engine, host).await?)
    }
}

placed_as_is!(GpuTable);
