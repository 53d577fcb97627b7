//! Table files read remotely, by byte ranges: a `.edo` file on any static HTTP server or object
//! store serves as the host table behind a [`crate::GpuCache`], and only the rows looked up are
//! fetched — never the whole table.
//!
//! [`RemoteTable::open`] reads the header (one request, two for a large header) and nothing else.
//! A read of rows fetches the checksum chunks that hold them — neighbouring chunks coalesced into
//! one request — and those chunks' CRC-32s (kept for later reads, up to a bound), verifies every
//! chunk and copies the rows out. So memory and traffic follow the rows read, not what the file's
//! header claims: a URL may be untrusted, and [`RemoteLimits`], set by the caller with safe
//! defaults, bound the header, each request, each call and the checksums held.
//! Write files meant for this with small chunks (`TableFile::with_chunk_bytes`, `edo quantize
//! --chunk-kib 4`): a chunk is the least a row read transfers.
//!
//! Where the bytes come from is a [`RangeReader`]: `HttpReader` natively (feature `remote`,
//! HTTP Range requests through ureq), `fetch` in the browser (the `web` crate), or anything else
//! that can read a byte range. A server that ignores `Range`, a response cut short, and a file
//! whose length or bytes changed since it was opened are typed errors ([`Error::Remote`],
//! [`Error::Checksum`]); a cache that hits one keeps serving the rows it has.

use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use web_time::Instant;

use super::Header;
use crate::format::words_le;
use crate::format::Format;
use crate::Error;

/// Reads byte ranges of one file.
pub trait RangeReader {
    /// Bytes `range` of the file (fewer only where the file ends first), and the file's length.
    fn read(&self, range: Range<u64>) -> impl Future<Output = Result<(Vec<u8>, u64), Error>>;
    /// The file's name or URL, for messages.
    fn name(&self) -> String;
    /// [`RangeReader::read`] that gives up at `deadline` (the end of the caller's call, see
    /// [`RemoteLimits::deadline`]): a reader that can stop a request in flight, or retries,
    /// overrides it. The default reads as `read` does; [`RemoteTable`] checks the deadline
    /// between reads either way.
    fn read_by(&self, range: Range<u64>, deadline: Option<Instant>) -> impl Future<Output = Result<(Vec<u8>, u64), Error>> {
        let _ = deadline;
        self.read(range)
    }
}

/// What a [`RemoteTable`] may fetch and hold. A file's header names sizes the server chose; these
/// are the caller's. Exceeding one is an [`Error::LimitExceeded`] naming it, before anything is
/// fetched for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteLimits {
    /// Bytes of the header (its 8-byte length and JSON). Default 16 MiB.
    pub header_bytes: u64,
    /// Bytes of one request; longer runs of chunks are split. Default 64 MiB.
    pub request_bytes: u64,
    /// Bytes one call (`open`, one read of rows) fetches in all. Default 1 GiB.
    pub call_bytes: u64,
    /// Bytes of checksums kept between reads (4 a chunk); past it the kept ones are dropped and
    /// fetched again when needed. Default 4 MiB (a million chunks).
    pub checksum_bytes: u64,
    /// Longest one call (`open`, one read of rows) may take, all its requests and retries
    /// together; past it the call fails with [`Error::Remote`] saying so. Default 120 s; `None`:
    /// no deadline (each request still has its reader's timeout).
    pub deadline: Option<Duration>,
}

impl Default for RemoteLimits {
    fn default() -> Self {
        RemoteLimits { header_bytes: 16 << 20, request_bytes: 64 << 20, call_bytes: 1 << 30, checksum_bytes: 4 << 20, deadline: Some(Duration::from_secs(120)) }
    }
}

impl RemoteLimits {
    /// When a call starting now must end.
    fn deadline_from_now(&self) -> Option<Instant> {
        self.deadline.and_then(|d| Instant::now().checked_add(d))
    }
}

/// The error of a call past its deadline.
fn past_deadline(location: String, limits: &RemoteLimits) -> Error {
    let secs = limits.deadline.map_or(0.0, |d| d.as_secs_f64());
    Error::Remote { location, message: format!("the call's deadline of {secs} s passed (RemoteLimits::deadline)") }
}

/// A table file read by byte ranges. Implements [`crate::cache::RowSource`].
pub struct RemoteTable<R: RangeReader> {
    reader: R,
    format: Format,
    rows: usize,
    dim: usize,
    /// Absolute byte range of the rows in the file.
    rows_range: Range<u64>,
    chunk_bytes: u64,
    /// Absolute byte offset of the checksums (chunk c's at `crc_start + 4c`) and their count.
    crc_start: u64,
    chunks: u64,
    /// Checksums fetched so far, by chunk (at most `limits.checksum_bytes / 4`).
    crcs: Mutex<HashMap<u64, u32>>,
    limits: RemoteLimits,
    file_len: u64,
    metadata: std::collections::BTreeMap<String, String>,
    /// Chunks at most this many bytes apart are fetched in one request.
    gap_bytes: u64,
    requests: AtomicU64,
    fetched: AtomicU64,
}

/// Bytes of the first request: the header of most table files fits.
const FIRST_READ: u64 = 64 << 10;

impl<R: RangeReader> RemoteTable<R> {
    /// Reads and checks the header, within the default [`RemoteLimits`].
    pub async fn open(reader: R) -> Result<RemoteTable<R>, Error> {
        RemoteTable::open_with(reader, RemoteLimits::default()).await
    }

    /// Reads and checks the header, within `limits` (which bound every later read too).
    pub async fn open_with(reader: R, limits: RemoteLimits) -> Result<RemoteTable<R>, Error> {
        let name = reader.name();
        let in_file = |e: Error| match e {
            Error::BadFile { what, reason } => Error::BadFile { what, reason: format!("{name}: {reason}") },
            e => e,
        };
        let deadline = limits.deadline_from_now();
        let (mut head, file_len) = reader.read_by(0..FIRST_READ.min(limits.header_bytes.max(8)), deadline).await?;
        let n = Header::json_len(&head).map_err(in_file)?;
        let end = (Header::PREFIX + n) as u64;
        if end > limits.header_bytes {
            return Err(Error::LimitExceeded {
                what: "header bytes of a remote table file (RemoteLimits::header_bytes)",
                requested: end,
                max: limits.header_bytes,
            });
        }
        let mut requests = 1;
        if end > head.len() as u64 && end <= file_len {
            requests += 1;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(past_deadline(name, &limits));
            }
            let (rest, len) = reader.read_by(head.len() as u64..end, deadline).await?;
            check_len(&name, file_len, len)?;
            head.extend_from_slice(&rest);
        }
        let h = Header::parse(&head, file_len).map_err(in_file)?;
        if h.id_map.is_some() {
            // A reordered table: its rows are not in id order, and a remote table reads by id.
            return Err(in_file(Error::Unsupported(crate::Unsupported::ReorderedTableFile)));
        }
        Ok(RemoteTable {
            format: h.format,
            rows: h.rows,
            dim: h.dim,
            rows_range: h.rows_range.start as u64..h.rows_range.end as u64,
            chunk_bytes: h.chunk_bytes as u64,
            crc_start: h.crc.start as u64,
            chunks: (h.crc.len() / 4) as u64,
            crcs: Mutex::new(HashMap::new()),
            limits,
            file_len,
            metadata: h.metadata,
            reader,
            gap_bytes: 0,
            requests: AtomicU64::new(requests),
            fetched: AtomicU64::new(head.len() as u64),
        })
    }

    /// The limits this table reads within.
    pub fn limits(&self) -> RemoteLimits {
        self.limits
    }

    /// Checksums kept from earlier reads (each 4 bytes; at most `limits().checksum_bytes / 4`).
    pub fn checksums_held(&self) -> usize {
        self.crcs.lock().map_or(0, |c| c.len())
    }

    /// Fetches chunks up to `bytes` apart in one request (default 0: only adjacent chunks), which
    /// trades bytes transferred for requests.
    pub fn with_gap_bytes(mut self, bytes: u64) -> Self {
        self.gap_bytes = bytes;
        self
    }

    /// The table's format.
    pub fn format(&self) -> Format {
        self.format
    }
    /// Rows of the table.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Bytes of the whole file.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }
    /// Bytes of rows per checksum chunk (the least a row read fetches).
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_bytes
    }
    /// The file's metadata (its safetensors header's `__metadata__`).
    pub fn metadata(&self) -> &std::collections::BTreeMap<String, String> {
        &self.metadata
    }
    /// Requests made and bytes fetched since the table was opened (the header included).
    pub fn traffic(&self) -> (u64, u64) {
        (self.requests.load(Ordering::Relaxed), self.fetched.load(Ordering::Relaxed))
    }

    /// The byte ranges (relative to the rows) of the chunks holding `rows`, adjacent or nearby
    /// chunks merged.
    fn chunk_ranges(&self, rows: &[u32]) -> Vec<Range<u64>> {
        let row_bytes = self.format.row_bytes(self.dim) as u64;
        let rows_len = self.rows_range.end - self.rows_range.start;
        let mut chunks: Vec<u64> = rows
            .iter()
            .flat_map(|&r| {
                let (a, b) = (r as u64 * row_bytes, (r as u64 + 1) * row_bytes);
                a / self.chunk_bytes..b.div_ceil(self.chunk_bytes)
            })
            .collect();
        chunks.sort_unstable();
        chunks.dedup();
        let mut out: Vec<Range<u64>> = Vec::new();
        for c in chunks {
            let range = c * self.chunk_bytes..((c + 1) * self.chunk_bytes).min(rows_len);
            match out.last_mut() {
                Some(last) if range.start <= last.end + self.gap_bytes => last.end = range.end,
                _ => out.push(range),
            }
        }
        out
    }

    /// Fetches `range` of the file (absolute), counting it and checking that it came whole.
    async fn fetch(&self, range: Range<u64>, deadline: Option<Instant>) -> Result<Vec<u8>, Error> {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(past_deadline(self.reader.name(), &self.limits));
        }
        let (bytes, len) = self.reader.read_by(range.clone(), deadline).await?;
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.fetched.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        check_len(&self.reader.name(), self.file_len, len)?;
        if bytes.len() as u64 != range.end - range.start {
            return Err(short(&self.reader.name(), (range.end - range.start) as usize, bytes.len()));
        }
        Ok(bytes)
    }

    /// The checksums of `chunks` (sorted, distinct, each `< self.chunks`): those kept, and the
    /// rest fetched in runs (gaps of up to 1 KiB of checksums fetched through).
    async fn checksums(&self, chunks: &[u64], deadline: Option<Instant>) -> Result<HashMap<u64, u32>, Error> {
        let poisoned = || Error::Unsupported(crate::Unsupported::PoisonedChecksums);
        let mut out = HashMap::with_capacity(chunks.len());
        let mut missing = Vec::new();
        {
            let kept = self.crcs.lock().map_err(|_| poisoned())?;
            for &c in chunks {
                match kept.get(&c) {
                    Some(&crc) => drop(out.insert(c, crc)),
                    None => missing.push(c),
                }
            }
        }
        let mut runs: Vec<Range<u64>> = Vec::new();
        for c in missing {
            match runs.last_mut() {
                Some(run) if c <= run.end + 256 => run.end = c + 1,
                _ => runs.push(c..c + 1),
            }
        }
        for run in runs {
            let bytes = self.fetch(self.crc_start + 4 * run.start..self.crc_start + 4 * run.end, deadline).await?;
            for (i, crc) in words_le(&bytes).into_iter().enumerate() {
                out.insert(run.start + i as u64, crc);
            }
        }
        let mut kept = self.crcs.lock().map_err(|_| poisoned())?;
        let room = (self.limits.checksum_bytes / 4) as usize;
        if kept.len() + out.len() > room {
            kept.clear();
        }
        if out.len() <= room {
            kept.extend(out.iter().map(|(&c, &crc)| (c, crc)));
        }
        Ok(out)
    }

    /// Appends the packed words of `rows` (each `< rows()`), in order, to `out`: fetches and
    /// verifies the chunks that hold them, within the table's [`RemoteLimits`].
    pub async fn read_rows(&self, rows: &[u32], out: &mut Vec<u32>) -> Result<(), Error> {
        let row_bytes = self.format.row_bytes(self.dim) as u64;
        let limits = &self.limits;
        if self.chunk_bytes > limits.request_bytes {
            return Err(Error::LimitExceeded {
                what: "bytes of one request (RemoteLimits::request_bytes; the file's checksum chunk is larger)",
                requested: self.chunk_bytes,
                max: limits.request_bytes,
            });
        }
        // Runs of chunks, each split into requests of at most `request_bytes` (whole chunks).
        let per_request = limits.request_bytes / self.chunk_bytes * self.chunk_bytes;
        let mut ranges = Vec::new();
        for range in self.chunk_ranges(rows) {
            let mut start = range.start;
            while start < range.end {
                let end = (start + per_request).min(range.end);
                ranges.push(start..end);
                start = end;
            }
        }
        let mut chunks: Vec<u64> = ranges.iter().flat_map(|r| r.start / self.chunk_bytes..r.end.div_ceil(self.chunk_bytes)).collect();
        chunks.dedup();
        if let Some(&c) = chunks.iter().find(|&&c| c >= self.chunks) {
            return Err(Error::BadFile { what: super::WHAT, reason: format!("{}: chunk {c} has no checksum", self.reader.name()) });
        }
        let total: u64 = ranges.iter().map(|r| r.end - r.start).sum::<u64>() + 4 * chunks.len() as u64;
        if total > limits.call_bytes {
            return Err(Error::LimitExceeded {
                what: "bytes one read of a remote table fetches (RemoteLimits::call_bytes)",
                requested: total,
                max: limits.call_bytes,
            });
        }
        let deadline = limits.deadline_from_now();
        let crcs = self.checksums(&chunks, deadline).await?;
        let mut fetched: Vec<(Range<u64>, Vec<u8>)> = Vec::with_capacity(ranges.len());
        for range in ranges {
            let bytes = self.fetch(self.rows_range.start + range.start..self.rows_range.start + range.end, deadline).await?;
            // Every chunk of the range against its checksum.
            let first = range.start / self.chunk_bytes;
            for (i, chunk) in bytes.chunks(self.chunk_bytes as usize).enumerate() {
                let c = first + i as u64;
                if crc32fast::hash(chunk) != crcs[&c] {
                    let start = c * self.chunk_bytes;
                    return Err(Error::Checksum { start, end: start + chunk.len() as u64 });
                }
            }
            fetched.push((range, bytes));
        }
        out.reserve(rows.len() * self.format.row_words(self.dim));
        for &r in rows {
            let a = r as u64 * row_bytes;
            // The fetched range holding row r (ranges are sorted and disjoint).
            let i = fetched.partition_point(|(range, _)| range.end <= a);
            let (range, bytes) = &fetched[i];
            let at = (a - range.start) as usize;
            out.extend(words_le(&bytes[at..at + row_bytes as usize]));
        }
        Ok(())
    }

    /// Decoded rows of `ids` on the host (the CPU path over a remote table).
    pub async fn gather(&self, ids: &[u32], bounds: crate::Bounds) -> Result<Vec<f32>, Error> {
        crate::source::gather_rows(self, ids, bounds).await
    }
}

impl<R: RangeReader> crate::source::RowSource for RemoteTable<R> {
    fn format(&self) -> Format {
        self.format
    }
    fn rows(&self) -> usize {
        self.rows
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn read_rows(&self, rows: &[u32], out: &mut Vec<u32>) -> impl Future<Output = Result<(), Error>> {
        RemoteTable::read_rows(self, rows, out)
    }
}

fn check_len(name: &str, expected: u64, got: u64) -> Result<(), Error> {
    if expected != got {
        return Err(Error::Remote { location: name.to_string(), message: format!("the file changed: it is {got} bytes long now, {expected} when opened") });
    }
    Ok(())
}

fn short(name: &str, expected: usize, got: usize) -> Error {
    Error::Remote { location: name.to_string(), message: format!("the response was cut short: {got} of {expected} bytes") }
}

/// The `Range` header value for `range` (an empty range asks for one byte, whose reply still
/// gives the file's length; the reader drops the byte).
pub fn range_header(range: &Range<u64>) -> String {
    format!("bytes={}-{}", range.start, range.end.max(range.start + 1) - 1)
}

/// What a server's reply to [`range_header`]`(range)` says, from its status and `Content-Range`:
/// the bytes of the body to read and the file's length. A 206 must answer the range asked for
/// (cut where the file ends first); a 416 means the range starts past the end (no bytes);
/// anything else — a 200 above all, from a server that ignores `Range` and would send the whole
/// file — is an [`Error::Remote`]. Shared by the HTTP readers (ureq natively, `fetch` in the
/// browser, whose servers must expose `Content-Range` cross-origin).
pub fn range_reply(location: &str, range: &Range<u64>, status: u16, content_range: Option<&str>) -> Result<(u64, u64), Error> {
    let fail = |message: String| Error::Remote { location: location.to_string(), message };
    let content_range = content_range.unwrap_or("");
    match status {
        206 => {
            let (start, end, total) =
                parse_content_range(content_range).ok_or_else(|| fail(format!("a 206 response without a usable Content-Range ({content_range:?})")))?;
            let last = range.end.max(range.start + 1) - 1;
            if start != range.start || end > last {
                return Err(fail(format!("asked for bytes {}-{last}, got {content_range}", range.start)));
            }
            Ok((end + 1 - start, total))
        }
        416 => {
            let total = content_range
                .trim()
                .strip_prefix("bytes */")
                .and_then(|t| t.trim().parse().ok())
                .ok_or_else(|| fail("a 416 response without the file's length".into()))?;
            Ok((0, total))
        }
        200 => Err(fail("the server answered a Range request with HTTP 200, not 206: it does not serve byte ranges (it would send the whole file)".into())),
        404 | 410 => Err(fail(format!("not found (HTTP {status})"))),
        500..=599 => Err(fail(format!("the server failed: HTTP {status}"))),
        _ => Err(fail(format!("the server answered a Range request with HTTP {status}, not 206"))),
    }
}

/// How an `HttpReader` (feature `remote`) and the browser's reads wait and retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpOptions {
    /// Longest wait for a connection. Default 10 s.
    pub connect_timeout: Duration,
    /// Longest one request may take, from sending it to the last byte of its body (less when
    /// the call's deadline comes first). Default 30 s.
    pub request_timeout: Duration,
    /// Retries of a request that failed in a way that is safe to retry — it could not connect,
    /// the connection broke, it timed out, the server answered 429, 502, 503 or 504, or the body
    /// came cut short (a GET of a byte range is idempotent). A 404, a 416, a server that ignores
    /// `Range` and a checksum mismatch are not retried. Default 3.
    pub retries: u32,
    /// Wait before the first retry, doubled before each next one. Default 250 ms.
    pub backoff: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions { connect_timeout: Duration::from_secs(10), request_timeout: Duration::from_secs(30), retries: 3, backoff: Duration::from_millis(250) }
    }
}

/// Reads byte ranges of a file on an HTTP(S) server with `Range` requests (blocking; ureq),
/// with timeouts and retries ([`HttpOptions`]).
#[cfg(all(native, feature = "remote"))]
pub struct HttpReader {
    url: String,
    agent: ureq::Agent,
    options: HttpOptions,
}

/// Why one attempt failed: whether a retry may help, and the error.
#[cfg(all(native, feature = "remote"))]
struct Attempt {
    retry: bool,
    error: Error,
}

#[cfg(all(native, feature = "remote"))]
impl HttpReader {
    /// A reader of the file at `url` (http:// or https://), with the default [`HttpOptions`].
    pub fn new(url: impl Into<String>) -> HttpReader {
        HttpReader::with_options(url, HttpOptions::default())
    }

    /// A reader of the file at `url` that waits and retries as `options` say.
    pub fn with_options(url: impl Into<String>, options: HttpOptions) -> HttpReader {
        // Statuses are read by `range_reply`, not turned into errors by ureq.
        let config = ureq::Agent::config_builder().timeout_connect(Some(options.connect_timeout)).http_status_as_error(false).build();
        HttpReader { url: url.into(), agent: config.into(), options }
    }

    /// The options it reads with.
    pub fn options(&self) -> HttpOptions {
        self.options
    }

    fn attempt(&self, range: &Range<u64>, timeout: Duration) -> Result<(Vec<u8>, u64), Attempt> {
        let fail = |retry: bool, message: String| Attempt { retry, error: Error::Remote { location: self.url.clone(), message } };
        let request = self.agent.get(&self.url).header("Range", range_header(range)).config().timeout_global(Some(timeout)).build();
        let mut response = request.call().map_err(|e| {
            // Not retried: a name that does not resolve, a bad URL or TLS setup; everything about
            // reaching the server (refused, reset, timed out) is.
            let retry = !matches!(e, ureq::Error::HostNotFound | ureq::Error::BadUri(_) | ureq::Error::Tls(_) | ureq::Error::InvalidProxyUrl);
            fail(retry, e.to_string())
        })?;
        let status = response.status().as_u16();
        let content_range = response.headers().get("content-range").and_then(|v| v.to_str().ok()).map(str::to_string);
        let (len, total) = range_reply(&self.url, range, status, content_range.as_deref())
            .map_err(|error| Attempt { retry: matches!(status, 429 | 502 | 503 | 504), error })?;
        let mut bytes = if len == 0 {
            Vec::new()
        } else {
            response.body_mut().with_config().limit(len).read_to_vec().map_err(|e| fail(true, format!("reading bytes from {}: {e}", range.start)))?
        };
        if (bytes.len() as u64) < len {
            return Err(fail(true, format!("the body was cut short: {} of {len} bytes from {}", bytes.len(), range.start)));
        }
        bytes.truncate((range.end - range.start) as usize);
        Ok((bytes, total))
    }

    fn get(&self, range: Range<u64>, deadline: Option<Instant>) -> Result<(Vec<u8>, u64), Error> {
        let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let mut wait = self.options.backoff;
        let mut tries = 0;
        loop {
            let timeout = left().map_or(self.options.request_timeout, |l| l.min(self.options.request_timeout));
            if timeout.is_zero() {
                return Err(Error::Remote { location: self.url.clone(), message: "the call's deadline passed (RemoteLimits::deadline)".into() });
            }
            let result = self.attempt(&range, timeout);
            if result.is_err() && left().is_some_and(|l| l.is_zero()) {
                return Err(Error::Remote {
                    location: self.url.clone(),
                    message: format!("the call's deadline passed (RemoteLimits::deadline) while bytes {}..{} were on their way", range.start, range.end),
                });
            }
            match result {
                Ok(r) => return Ok(r),
                Err(Attempt { retry: true, error }) if tries < self.options.retries && left().is_none_or(|l| l > wait) => {
                    let _ = error;
                    tries += 1;
                    std::thread::sleep(wait);
                    wait = wait.saturating_mul(2);
                }
                Err(Attempt { error: Error::Remote { location, message }, .. }) if tries > 0 => {
                    return Err(Error::Remote { location, message: format!("{message} (after {tries} retr{})", if tries == 1 { "y" } else { "ies" }) });
                }
                Err(Attempt { error, .. }) => return Err(error),
            }
        }
    }
}

#[cfg(all(native, feature = "remote"))]
impl RangeReader for HttpReader {
    async fn read(&self, range: Range<u64>) -> Result<(Vec<u8>, u64), Error> {
        self.get(range, None)
    }
    async fn read_by(&self, range: Range<u64>, deadline: Option<Instant>) -> Result<(Vec<u8>, u64), Error> {
        self.get(range, deadline)
    }
    fn name(&self) -> String {
        self.url.clone()
    }
}

/// `bytes START-END/TOTAL` → (START, END, TOTAL).
pub fn parse_content_range(value: &str) -> Option<(u64, u64, u64)> {
    let rest = value.trim().strip_prefix("bytes")?.trim_start();
    let (span, total) = rest.split_once('/')?;
    let (a, b) = span.split_once('-')?;
    let (a, b, total): (u64, u64, u64) = (a.trim().parse().ok()?, b.trim().parse().ok()?, total.trim().parse().ok()?);
    (a <= b && b < total).then_some((a, b, total))
}
