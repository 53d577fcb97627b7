//! A mixed-precision table on the GPU: its hot and cold parts as two tables, looked up in one
//! job — one gather per part into the same output, each writing only the rows it holds.

use std::sync::Arc;

use super::bag::Indices;
use super::table::{LookupJob, POLICY_SKIP};
use super::{Engine, GpuTable};
use crate::mixed::MixedTable;
use crate::{Bounds, Error};

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

    /// A gather of rows of the original table — hot ones decoded from the hot part, the others
    /// from the cold part — not submitted. (Bags: [`GpuLookup::bag`](super::GpuLookup::bag) pools
    /// the gathered rows.)
    pub async fn prepare_gather(&self, ids: &[u32], bounds: Bounds) -> Result<LookupJob, Error> {
        self.hot.res.ctx.check_lost()?;
        bounds.check(ids, self.rows())?;
        let (hot_ids, cold_ids) = self.host.split_ids(ids, bounds);
        let (p1, d1, mut inputs, output) = self.hot.encode_gather_with(Indices::Host(&hot_ids), POLICY_SKIP, None).await?;
        let (p2, d2, more, _) = self.cold.encode_gather_with(Indices::Host(&cold_ids), POLICY_SKIP, Some(output.buffer.clone())).await?;
        inputs.extend(more);
        Ok(LookupJob::new(self.hot.res.ctx.clone(), vec![(p1, d1), (p2, d2)], inputs, output))
    }
}
