//! A live table's copy on a GPU: its rows and its key index (mirrored bucket for bucket), and
//! the lookups that run there, their keys found on the host or by the probe kernel
//! (`crate::gpu::GpuKeyIndex`).

use std::sync::atomic::Ordering;

use super::index::Changes;
use super::{Init, LiveTable, Missing, State};
use crate::{Bags, Bounds, Error, Pooling};

/// Where a lookup on a live table's GPU copy ([`LiveTable::gather_gpu`], [`LiveTable::bag_gpu`])
/// finds the rows of its keys: translated on the host under the read lock and the rows
/// uploaded, or by a kernel probing the GPU's copy of the index (the keys uploaded, the rows
/// never leaving the GPU). A lookup whose unknown keys are an error ([`Missing::Error`]) is
/// always translated on the host, which must refuse it before anything is submitted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyLookup {
    /// The kernel for calls of [`PROBE_MIN_KEYS`] keys or more, the host below (where a
    /// dispatch costs more than the host's translation).
    #[default]
    Auto,
    /// Always on the host.
    Host,
    /// Always the kernel (but under [`Missing::Error`]).
    Gpu,
}

/// Keys from which [`KeyLookup::Auto`] probes on the GPU: see docs/live.md for the
/// measurement behind it.
pub const PROBE_MIN_KEYS: usize = 1024;

impl KeyLookup {
    pub(super) fn code(self) -> u8 {
        self as u8
    }
    fn from_code(code: u8) -> KeyLookup {
        match code {
            1 => KeyLookup::Host,
            2 => KeyLookup::Gpu,
            _ => KeyLookup::Auto,
        }
    }
}

/// A live table's copy on a GPU: its rows, and its index with a lookup count per slot — `None`
/// where the index does not fit one storage binding of the device (then every GPU lookup's keys
/// are found on the host).
pub(super) struct GpuCopy {
    pub(super) table: crate::GpuTable,
    pub(super) index: Option<crate::gpu::GpuKeyIndex>,
}

impl GpuCopy {
    /// Uploads `st`'s rows and index to `engine` (the index's changes so far taken: the copy
    /// has them all).
    pub(super) fn upload(engine: &crate::Engine, st: &mut State) -> Result<GpuCopy, Error> {
        let table = pollster::block_on(crate::GpuTable::upload(engine, &st.table))?;
        st.index.take_changes();
        let index = upload_index(&table, st)?;
        Ok(GpuCopy { table, index })
    }
}

/// `st`'s index and a zeroed lookup count per slot on `table`'s engine, or `None` where they do
/// not fit a storage binding.
fn upload_index(table: &crate::GpuTable, st: &State) -> Result<Option<crate::gpu::GpuKeyIndex>, Error> {
    Ok(pollster::block_on(crate::gpu::GpuKeyIndex::upload(table, st.index.words(), st.index.mask(), st.capacity()))?)
}

/// Brings the GPU copy's index up to the host's: the buckets changed since written, or
/// after a rebuild the whole index uploaded again (its lookup counts, taken before any
/// change, start from zero).
pub(super) fn mirror_index(st: &mut State, gpu: GpuCopy) -> Result<GpuCopy, Error> {
    match (st.index.take_changes(), &gpu.index) {
        (Changes::None, _) | (Changes::Buckets(_), None) => Ok(gpu),
        (Changes::Buckets(changed), Some(index)) => index.write_buckets(st.index.words(), &changed).map(|()| gpu).map_err(Into::into),
        (Changes::All, _) => {
            let index = upload_index(&gpu.table, st)?;
            Ok(GpuCopy { index, ..gpu })
        }
    }
}

/// Lookups on a GPU copy of the table: keys are found (on the host, or by the probe kernel) and
/// the GPU job submitted under the read lock, so every row it reads is the one the keys had at
/// that moment (an update, insertion or swap writes the GPU copy — rows and index — under the
/// write lock, and the queue runs the job before any write queued after it).
impl LiveTable {
    /// Keeps a copy of the table on `engine`'s GPU from now on (uploaded now, under the write
    /// lock), for [`LiveTable::gather_gpu`] and [`LiveTable::bag_gpu`]; CPU lookups go on as
    /// before. Growth uploads the table again (lookups wait for it); updates write their rows.
    pub fn attach_gpu(&self, engine: &crate::Engine) -> Result<(), Error> {
        let mut st = self.write();
        let gpu = GpuCopy::upload(engine, &mut st)?;
        st.gpu = Some(gpu);
        Ok(())
    }

    /// Drops the GPU copy.
    pub fn detach_gpu(&self) {
        self.write().gpu = None;
    }

    /// Whether a GPU copy is attached (a GPU failure during a change drops it).
    pub fn has_gpu(&self) -> bool {
        self.read().gpu.is_some()
    }

    /// Where GPU lookups find their keys' rows from now on ([`KeyLookup::Auto`] at first).
    pub fn set_key_lookup(&self, how: KeyLookup) {
        self.key_lookup.store(how.code(), Ordering::Relaxed);
    }

    /// Gathers the rows of `keys` on the GPU: submitted, the rows left on the GPU. Unknown keys
    /// follow `missing`.
    pub fn gather_gpu(&self, keys: &[u64], missing: Missing) -> Result<crate::GpuRows, Error> {
        self.gather_gpu_with(keys, missing, |job| {
            job.submit()?;
            Ok(job.into_output())
        })
    }

    /// [`LiveTable::bag`] on the GPU: submitted, the pooled rows left on the GPU.
    pub fn bag_gpu(&self, bags: &Bags<'_, u64>, pooling: Pooling, missing: Missing) -> Result<crate::GpuRows, Error> {
        self.bag_gpu_with(bags, pooling, missing, |job| {
            job.submit()?;
            Ok(job.into_output())
        })
    }

    /// Builds the job of [`LiveTable::gather_gpu`] and hands it to `submit` under the read lock:
    /// whatever `submit` does — submit it, encode it into the caller's own command encoder and
    /// submit that — sees the rows the keys have now. A job kept past `submit` and submitted
    /// later may read rows changed meanwhile.
    pub fn gather_gpu_with<R>(&self, keys: &[u64], missing: Missing, submit: impl FnOnce(crate::LookupJob) -> Result<R, Error>) -> Result<R, Error> {
        let st = self.read();
        let gpu = st.gpu.as_ref().ok_or(Error::Unsupported(crate::Unsupported::LiveTableWithoutGpu))?;
        match (gpu.index.as_ref(), self.probe_missing(missing, keys.len())) {
            (Some(index), Some(probe)) => {
                let job = pollster::block_on(index.gather(&gpu.table, keys, probe, st.fallback))?;
                self.submit_probed(&st, keys.len(), job, submit)
            }
            _ => {
                let rows = self.rows_of(&st, keys, missing, true)?;
                submit(pollster::block_on(crate::GpuLookup::prepare(&gpu.table, &crate::Request::gather(&rows, Bounds::Zero)))?)
            }
        }
    }

    /// [`LiveTable::gather_gpu_with`] for [`LiveTable::bag_gpu`].
    pub fn bag_gpu_with<R>(
        &self,
        bags: &Bags<'_, u64>,
        pooling: Pooling,
        missing: Missing,
        submit: impl FnOnce(crate::LookupJob) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let st = self.read();
        let gpu = st.gpu.as_ref().ok_or(Error::Unsupported(crate::Unsupported::LiveTableWithoutGpu))?;
        match (gpu.index.as_ref(), self.probe_missing(missing, bags.indices.len())) {
            (Some(index), Some(probe)) => {
                let job = pollster::block_on(index.bag(&gpu.table, bags, pooling, probe, st.fallback))?;
                self.submit_probed(&st, bags.indices.len(), job, submit)
            }
            _ => {
                let rows = self.rows_of(&st, bags.indices, missing, true)?;
                submit(pollster::block_on(crate::GpuLookup::prepare(&gpu.table, &crate::Request::bag(&bags.with_indices(&rows), pooling, Bounds::Zero)))?)
            }
        }
    }

    /// Where a GPU lookup of `keys` keys finds their rows (see [`KeyLookup`]): `Some` (what the
    /// probe reads for an unknown key) to probe the GPU's index, `None` to translate them here.
    fn probe_missing(&self, missing: Missing, keys: usize) -> Option<crate::gpu::ProbeMissing> {
        use crate::gpu::ProbeMissing;
        let probe = match KeyLookup::from_code(self.key_lookup.load(Ordering::Relaxed)) {
            KeyLookup::Host => false,
            KeyLookup::Gpu => true,
            KeyLookup::Auto => keys >= PROBE_MIN_KEYS,
        };
        match (probe, missing, &self.options.init) {
            // An unknown key must fail the call before it is submitted: the host answers.
            (false, ..) | (true, Missing::Error, _) => None,
            (true, Missing::Zero, _) | (true, Missing::Init, Init::Zeros) => Some(ProbeMissing::Zero),
            (true, Missing::Init, Init::Row(_)) => Some(ProbeMissing::FirstRow),
            (true, Missing::Init, Init::Hashed(_)) => Some(ProbeMissing::Hashed),
        }
    }

    /// Hands a probing job of `keys` keys to `submit`, then counts the lookup (its unknown keys
    /// are not counted: the GPU knows them) and marks the GPU's lookup counts as pending — after
    /// `submit`, so that counts taken meanwhile (`usage()` on another thread) cannot clear the
    /// mark before the job's own counts are in the queue.
    fn submit_probed<R>(&self, st: &State, keys: usize, job: crate::LookupJob, submit: impl FnOnce(crate::LookupJob) -> Result<R, Error>) -> Result<R, Error> {
        let submitted = submit(job);
        self.lookups.fetch_add(keys as u64, Ordering::Relaxed);
        st.probed.store(true, Ordering::Release);
        submitted
    }
}
