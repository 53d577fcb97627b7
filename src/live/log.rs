//! The update log: batches of rows by key, as a file a trainer appends to.

use crate::Error;

/// Batches of row updates, as a file: what a trainer appends to and [`super::LiveTable::apply_log`]
/// (`edo update TABLE UPDATES` on the command line) replays, in order.
///
/// The file, little-endian: the magic `EDOUPDT1` (8 bytes), the dim (u32), a zero u32; then each
/// batch: its row count `n` (u32), the CRC-32 of the rest of the batch (u32), `n` keys (u64),
/// and `n × dim` values (f32, row after row). A writer appends batches ([`UpdateLog::append`]);
/// a reader refuses the whole file when a batch is truncated or fails its checksum.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UpdateLog {
    dim: usize,
    batches: Vec<(Vec<u64>, Vec<f32>)>,
}

/// The first bytes of an update log.
pub const UPDATE_LOG_MAGIC: &[u8; 8] = b"EDOUPDT1";

impl UpdateLog {
    /// An empty log of rows of `dim` values.
    pub fn new(dim: usize) -> UpdateLog {
        UpdateLog { dim, batches: Vec::new() }
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// The batches, in order: keys, and their rows (`keys.len() × dim` values).
    pub fn batches(&self) -> &[(Vec<u64>, Vec<f32>)] {
        &self.batches
    }
    /// Adds a batch.
    pub fn push(&mut self, keys: Vec<u64>, values: Vec<f32>) -> Result<(), Error> {
        if values.len() != keys.len() * self.dim {
            return Err(Error::ShapeMismatch { what: "values of the batch (keys × dim)", expected: keys.len() * self.dim, actual: values.len() });
        }
        if keys.len() > u32::MAX as usize {
            return Err(Error::LimitExceeded { what: "rows in one update batch", requested: keys.len() as u64, max: u32::MAX as u64 });
        }
        self.batches.push((keys, values));
        Ok(())
    }

    /// The header of a log of rows of `dim` values (what a new log file starts with).
    pub fn header(dim: usize) -> Vec<u8> {
        let mut out = UPDATE_LOG_MAGIC.to_vec();
        out.extend_from_slice(&(dim as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out
    }

    /// The bytes of one batch (appended to a log file after its header).
    pub fn batch_bytes(keys: &[u64], values: &[f32]) -> Vec<u8> {
        let mut body = Vec::with_capacity(8 * keys.len() + 4 * values.len());
        for k in keys {
            body.extend_from_slice(&k.to_le_bytes());
        }
        for v in values {
            body.extend_from_slice(&v.to_le_bytes());
        }
        let mut out = Vec::with_capacity(8 + body.len());
        out.extend_from_slice(&(keys.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// The whole log's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Self::header(self.dim);
        for (k, v) in &self.batches {
            out.extend_from_slice(&Self::batch_bytes(k, v));
        }
        out
    }

    /// Appends a batch to the log file at `path`, writing the header first when the file is new
    /// or empty (a log of another dim is refused).
    #[cfg(native)]
    pub fn append(path: impl AsRef<std::path::Path>, dim: usize, keys: &[u64], values: &[f32]) -> Result<(), Error> {
        use std::io::Write;
        let path = path.as_ref();
        if values.len() != keys.len() * dim {
            return Err(Error::ShapeMismatch { what: "values of the batch (keys × dim)", expected: keys.len() * dim, actual: values.len() });
        }
        let mut f = std::fs::OpenOptions::new().create(true).append(true).read(true).open(path).map_err(|e| Error::io(path.display(), e))?;
        let len = f.metadata().map_err(|e| Error::io(path.display(), e))?.len();
        let mut out = Vec::new();
        if len == 0 {
            out = Self::header(dim);
        } else {
            use std::io::{Read, Seek};
            let mut head = [0u8; 16];
            f.seek(std::io::SeekFrom::Start(0)).and_then(|_| f.read_exact(&mut head)).map_err(|e| Error::io(path.display(), e))?;
            let found = Self::parse_header(&head)?;
            if found != dim {
                return Err(Error::ShapeMismatch { what: "values per row of the update log", expected: found, actual: dim });
            }
        }
        out.extend_from_slice(&Self::batch_bytes(keys, values));
        f.write_all(&out).and_then(|()| f.sync_data()).map_err(|e| Error::io(path.display(), e))
    }

    fn parse_header(bytes: &[u8]) -> Result<usize, Error> {
        if bytes.len() < 16 || &bytes[..8] != UPDATE_LOG_MAGIC {
            return Err(bad_log("does not start with EDOUPDT1".into()));
        }
        let dim = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
        if dim == 0 {
            return Err(bad_log("declares rows of 0 values".into()));
        }
        Ok(dim)
    }

    /// Reads a log, checking every batch: a truncated batch or one that fails its checksum
    /// refuses the whole log ([`Error::BadFile`] naming the batch and its offset).
    pub fn from_bytes(bytes: &[u8]) -> Result<UpdateLog, Error> {
        let dim = Self::parse_header(bytes)?;
        let mut log = UpdateLog::new(dim);
        let mut at = 16usize;
        while at < bytes.len() {
            let batch = log.batches.len();
            let Some(head) = bytes.get(at..at + 8) else { return Err(bad_log(format!("batch {batch} at byte {at} is truncated in its header"))) };
            let n = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
            let crc = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
            let len = n.checked_mul(8 + 4 * dim).filter(|&l| l <= bytes.len() - at - 8);
            let Some(len) = len else { return Err(bad_log(format!("batch {batch} at byte {at} declares {n} rows, more than the file holds"))) };
            let body = &bytes[at + 8..at + 8 + len];
            if crc32fast::hash(body) != crc {
                return Err(bad_log(format!("batch {batch} at byte {at} does not match its checksum")));
            }
            let keys = body[..8 * n].chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
            let values = body[8 * n..].chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect();
            log.batches.push((keys, values));
            at += 8 + len;
        }
        Ok(log)
    }

    /// Reads the log file at `path`.
    #[cfg(native)]
    pub fn read(path: impl AsRef<std::path::Path>) -> Result<UpdateLog, Error> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::io(path.display(), e))?;
        UpdateLog::from_bytes(&bytes).map_err(|e| crate::file::in_file(path, e))
    }
}

fn bad_log(reason: String) -> Error {
    Error::BadFile { what: "edo update log", reason }
}
