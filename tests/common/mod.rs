//! What several test files (and the fuzz targets) share: an `.edo` file taken apart into its JSON
//! header and its data, and put back together with the header's checksum
//! (`edo.header_crc32`) made right — so that a test can change a header, or its data and a
//! checksum of it, and reach the checks past the header's own.
#![allow(dead_code)] // each test crate uses part of it

use serde_json::Value;

/// The header (JSON) and the bytes after it, or `None` when `bytes` does not start with one.
pub fn split(bytes: &[u8]) -> Option<(Value, &[u8])> {
    let n = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    let end = 8usize.checked_add(n)?;
    Some((serde_json::from_slice(bytes.get(8..end)?).ok()?, &bytes[end..]))
}

/// Sets the header's `edo.header_crc32` to the checksum of its other `edo.*` metadata; `None`
/// when it has no metadata of strings.
pub fn sign(header: &mut Value) -> Option<()> {
    let meta = header.get_mut("__metadata__")?.as_object_mut()?;
    let own: Vec<(String, String)> = meta.iter().map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect::<Option<_>>()?;
    meta.insert(edo::file::HEADER_CRC_KEY.into(), edo::file::header_crc32(own.iter().map(|(k, v)| (k, v))).to_string().into());
    Some(())
}

/// A file of `header` (padded to 8 bytes, as edo writes it) and `data`.
pub fn join(header: &Value, data: &[u8]) -> Vec<u8> {
    let mut text = serde_json::to_vec(header).expect("a JSON value serialises");
    text.resize(text.len().next_multiple_of(8), b' ');
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend_from_slice(data);
    out
}

/// `bytes` with its header's checksum made right, the rest unchanged; `None` when it has no
/// header with `edo.*` metadata to sign.
pub fn resigned(bytes: &[u8]) -> Option<Vec<u8>> {
    let (mut header, data) = split(bytes)?;
    sign(&mut header)?;
    Some(join(&header, data))
}
