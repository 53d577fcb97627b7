//! [`AsyncLookup`]: the awaited lookup of either path. [`Request`] and its parts are edo-core's
//! (re-exported here, where they always were).

use half::f16;

pub use edo_core::request::{Element, HostRows, IdSelect, Request, Select};

use crate::bags::{Bags, Pooling};
use crate::{Bounds, Error};

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
