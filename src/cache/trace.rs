//! Id traces: the lookups a real workload made, replayed through the caches (`edo bench cache
//! --trace`). Two forms: text, one id a line (blank lines and lines starting with `#` skipped),
//! or a 1-D `.npy` of `<u4`, `<i4` or `<i8` ids (numpy's default integer).

use crate::file::npy;
use crate::Error;

const WHAT: &str = "id trace";

/// Parses a trace held in memory (text or `.npy`, told apart by the `.npy` magic). With
/// `rows`, every id must be below it. An empty trace, a line that is not an id, a negative id or
/// one past `rows` is an error naming where it is; nothing is returned partly.
pub fn parse_trace(bytes: &[u8], rows: Option<usize>) -> Result<Vec<u32>, Error> {
    let bad = |reason: String| Error::BadFile { what: WHAT, reason };
    let ids = if bytes.starts_with(b"\x93NUMPY") {
        let a = npy::read(bytes)?;
        if a.shape.len() != 1 {
            return Err(bad(format!("a .npy trace is 1-D; this array has shape {:?}", a.shape)));
        }
        let wide = |i: usize, v: i64| u32::try_from(v).map_err(|_| bad(format!("ids[{i}] = {v} is not a row id (0 ≤ id < 2^32)")));
        match a.dtype {
            npy::Dtype::U32 => a.data.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect(),
            npy::Dtype::I32 => {
                a.data.chunks_exact(4).enumerate().map(|(i, c)| wide(i, i32::from_le_bytes(c.try_into().expect("4 bytes")) as i64)).collect::<Result<_, _>>()?
            }
            npy::Dtype::I64 => {
                a.data.chunks_exact(8).enumerate().map(|(i, c)| wide(i, i64::from_le_bytes(c.try_into().expect("8 bytes")))).collect::<Result<_, _>>()?
            }
            other => return Err(bad(format!("a .npy trace holds integer ids (<u4, <i4, <i8), not {other:?}"))),
        }
    } else {
        let text = std::str::from_utf8(bytes).map_err(|e| bad(format!("neither .npy nor UTF-8 text ({e})")))?;
        let mut ids = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let id = line.parse::<u32>().map_err(|_| Error::Parse { line: n + 1, reason: format!("{line:?} is not a row id (0 ≤ id < 2^32)") })?;
            ids.push(id);
        }
        ids
    };
    if ids.is_empty() {
        return Err(bad("no ids".into()));
    }
    if let Some(rows) = rows {
        if let Some((index, &id)) = ids.iter().enumerate().find(|(_, &id)| id as usize >= rows) {
            return Err(Error::IdOutOfRange { index, id, rows });
        }
    }
    Ok(ids)
}
