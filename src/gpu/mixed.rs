//! A mixed-precision table on the GPU: its hot and cold parts as two tables, looked up in one
//! job — one gather per part into the same output, each writing only the rows it holds.

use std::sync::Arc;

use super::job::{Indices, LookupJob};
use super::lookup::GpuLookup;
use super::table::RowPolicy;
use super::{Engine, GpuTable};
use crate::mixed::MixedTable;
use crate::request::{IdSelect, Request};
use crate::{Bounds, Element, Error};

/// A [`MixedTable`] on the GPU. The row map stays on the host, where the ids are. Cloning gives
/// another handle to the same buffers.
#[derive(Clone)]
pub struct GpuMixedTable {
    hot: GpuTable,
    cold: GpuTable,
    host: Arc<MixedTable>,
}

impl GpuMixedTable {
    /// Uploads both parts of `table`; its row map stays on the host.
    pub async fn upload(engine: &Engine, table: &MixedTable) -> Result<GpuMixedTable, Error> {
        let hot = GpuTable::upload(engine, table.hot()).await?;
        let cold = GpuTable::upload(engine, table.cold()).await?;
        Ok(GpuMixedTable { hot, cold, host: Arc::new(table.clone()) })
    }

    /// Rows of the original table (ids address these).
    pub fn rows(&self) -> usize {
        self.host.rows()
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        self.host.dim()
    }
    /// Bytes of GPU memory: both parts' shards.
    pub fn bytes(&self) -> u64 {
        self.hot.bytes() + self.cold.bytes()
    }
    /// Names both parts in the engine's memory report ("NAME (hot)", "NAME (cold)").
    pub fn set_name(&self, name: &str) {
        self.hot.set_name(&format!("{name} (hot)"));
        self.cold.set_name(&format!("{name} (cold)"));
    }

    /// The formats of the hot and the cold rows.
    pub fn formats(&self) -> (crate::Format, crate::Format) {
        (self.hot.format(), self.cold.format())
    }
    /// The engine the table lives on.
    pub fn engine(&self) -> Engine {
        Engine { ctx: self.hot.res.ctx.clone() }
    }
}

impl GpuMixedTable {
    /// A gather of rows of the original table (ids checked) — hot ones decoded from the hot
    /// part, the others from the cold part — not submitted.
    async fn prepare_rows(&self, ids: &[u32], bounds: Bounds) -> Result<LookupJob, Error> {
        let (hot_ids, cold_ids) = self.host.split_ids(ids, bounds);
        let hot = self.hot.encode_gather(Indices::Host(&hot_ids), RowPolicy::Skip, None, Element::F32).await?;
        let cold = self.cold.encode_gather(Indices::Host(&cold_ids), RowPolicy::Skip, Some(hot.output.buffer.clone()), Element::F32).await?;
        let mut inputs = hot.inputs;
        inputs.extend(cold.inputs);
        Ok(LookupJob::new(self.hot.res.ctx.clone(), vec![hot.pass, cold.pass], inputs, hot.output))
    }
}

impl GpuLookup for GpuMixedTable {
    super::lookup::inherent_accessors!(GpuMixedTable);

    /// Gathers both parts into one output; bags pool the gathered rows in the same job.
    async fn prepare(&self, request: &Request<'_>) -> Result<LookupJob, Error> {
        self.hot.res.ctx.check_lost()?;
        request.check(self.rows(), self.dim())?;
        let mut store = Vec::new();
        let job = match request.narrow(self.rows(), &mut store)? {
            IdSelect::Ids(ids) => self.prepare_rows(ids, request.bounds).await?,
            IdSelect::Bags(bags, pooling) => {
                let ctx = &self.hot.res.ctx;
                super::bag::gather_and_pool(ctx, self.dim(), &bags, pooling, async |part| self.prepare_rows(&bags.indices[part], request.bounds).await).await?
            }
        };
        Ok(job.into_element(request.element).await?)
    }
}
