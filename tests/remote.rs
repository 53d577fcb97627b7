//! Remote table files: byte-range reads through any `RangeReader` (an in-memory one here), and
//! with the `remote` feature over HTTP against a local server — one that serves ranges, one that
//! ignores them, one that fails mid-way, and a file changed underneath.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use edo::file::remote::{RangeReader, RemoteTable};
use edo::file::TableFile;
use edo::synth::{embedding_table, zipf_ids};
use edo::{block_on, Bounds, Error, Format, PackedTable};

/// A file in memory, read by ranges, counting what it serves.
#[derive(Clone, Default)]
struct MemReader {
    bytes: Arc<Mutex<Vec<u8>>>,
    served: Arc<Mutex<Vec<Range<u64>>>>,
}

impl RangeReader for MemReader {
    async fn read(&self, range: Range<u64>) -> Result<(Vec<u8>, u64), Error> {
        let bytes = self.bytes.lock().unwrap();
        let len = bytes.len() as u64;
        let r = range.start.min(len) as usize..range.end.min(len) as usize;
        self.served.lock().unwrap().push(range);
        Ok((bytes[r].to_vec(), len))
    }
    fn name(&self) -> String {
        "memory".into()
    }
}

fn table(rows: usize, dim: usize, format: Format) -> PackedTable {
    PackedTable::quantize(format, &embedding_table(rows, dim, 5), rows, dim).unwrap()
}

#[test]
fn remote_rows_equal_the_local_table_and_only_their_chunks_are_fetched() {
    let (rows, dim) = (200_000, 48);
    for format in [Format::Int8, Format::F16, Format::Int4, Format::BinaryScaled] {
        let t = table(rows, dim, format);
        let bytes = TableFile::new(t.clone()).with_chunk_bytes(4096).unwrap().to_bytes();
        let reader = MemReader { bytes: Arc::new(Mutex::new(bytes.clone())), ..Default::default() };
        let remote = block_on(RemoteTable::open(reader.clone())).unwrap();
        assert_eq!((remote.rows(), remote.dim(), remote.format(), remote.chunk_bytes()), (rows, dim, format, 4096));
        // Opening reads the header alone: no checksums yet.
        assert_eq!(remote.traffic().0, 1);
        assert!(remote.traffic().1 <= 64 << 10);
        assert_eq!(remote.checksums_held(), 0);
        let mut ids = zipf_ids(300, rows, 1.0, 3);
        let (_, before) = remote.traffic();
        let served_before = reader.served.lock().unwrap().len();
        assert_eq!(block_on(remote.gather(&ids, Bounds::Error)).unwrap(), edo::cpu::gather(&t, &ids, Bounds::Error).unwrap(), "{format}");
        let (_, after) = remote.traffic();
        // Of the rows, exactly the 4 KiB chunks that hold them; of the checksums, runs covering
        // those chunks' (rows are the file's last tensor, checksums just before them).
        let rb = format.row_bytes(dim);
        let chunks: std::collections::BTreeSet<usize> = ids.iter().flat_map(|&r| r as usize * rb / 4096..=((r as usize + 1) * rb - 1) / 4096).collect();
        let rows_len = rows * rb;
        let rows_start = (bytes.len() - rows_len) as u64;
        let served: Vec<Range<u64>> = reader.served.lock().unwrap()[served_before..].to_vec();
        let (row_reads, crc_reads): (Vec<_>, Vec<_>) = served.iter().partition(|r| r.start >= rows_start);
        let want: usize = chunks.iter().map(|&c| 4096.min(rows_len - c * 4096)).sum();
        assert_eq!(row_reads.iter().map(|r| r.end - r.start).sum::<u64>(), want as u64, "{format}: rows");
        let crc_start = rows_start - 4 * rows_len.div_ceil(4096) as u64;
        for &c in &chunks {
            let at = crc_start + 4 * c as u64;
            assert!(crc_reads.iter().any(|r| r.start <= at && at + 4 <= r.end), "{format}: chunk {c}'s checksum");
        }
        let crc_bytes: u64 = crc_reads.iter().map(|r| r.end - r.start).sum();
        assert!(crc_bytes <= 4 * rows_len.div_ceil(4096) as u64, "{format}: {crc_bytes} bytes of checksums");
        assert_eq!(after - before, want as u64 + crc_bytes);
        assert!(after - before < bytes.len() as u64 / 2);
        // The checksums are kept: reading the same rows again fetches only rows.
        assert_eq!(remote.checksums_held(), crc_bytes as usize / 4);
        let served_before = reader.served.lock().unwrap().len();
        block_on(remote.gather(&ids, Bounds::Error)).unwrap();
        assert!(reader.served.lock().unwrap()[served_before..].iter().all(|r| r.start >= rows_start), "{format}: checksums fetched again");
        ids[7] = rows as u32 + 3;
        assert_eq!(block_on(remote.gather(&ids, Bounds::Zero)).unwrap(), edo::cpu::gather(&t, &ids, Bounds::Zero).unwrap(), "{format} Zero");
    }
    // Neighbouring rows come in one request; with a gap allowance, nearby chunks do too.
    let t = table(20_000, dim, Format::Int8);
    let reader = MemReader { bytes: Arc::new(Mutex::new(TableFile::new(t.clone()).with_chunk_bytes(4096).unwrap().to_bytes())), ..Default::default() };
    let remote = block_on(RemoteTable::open(reader.clone())).unwrap();
    let (r0, _) = remote.traffic();
    let near: Vec<u32> = (1000..1400).collect(); // 400 × 56 B: six adjacent chunks
    block_on(remote.gather(&near, Bounds::Error)).unwrap();
    assert_eq!(remote.traffic().0 - r0, 2, "adjacent chunks in one request, their checksums in another");
    block_on(remote.gather(&near, Bounds::Error)).unwrap();
    assert_eq!(remote.traffic().0 - r0, 3, "again: the checksums are kept");
    let spread = [10u32, 200, 400];
    block_on(remote.gather(&spread, Bounds::Error)).unwrap();
    assert_eq!(remote.traffic().0 - r0, 7, "three distant chunks: three requests, and one for their checksums");
    let remote = block_on(RemoteTable::open(reader.clone())).unwrap().with_gap_bytes(16 << 10);
    let (r0, _) = remote.traffic();
    block_on(remote.gather(&spread, Bounds::Error)).unwrap();
    assert_eq!(remote.traffic().0 - r0, 2, "within the gap allowance: one request (and the checksums')");
}

/// A header naming sizes of its own choosing cannot make the reader fetch or hold them: the
/// caller's `RemoteLimits` bound the header, each request, each call and the checksums kept.
#[test]
fn remote_reads_stay_within_the_callers_limits() {
    use edo::file::remote::RemoteLimits;
    let (rows, dim) = (50_000, 32);
    let t = table(rows, dim, Format::Int8);
    let bytes = TableFile::new(t.clone()).with_chunk_bytes(1024).unwrap().to_bytes();
    let reader = || MemReader { bytes: Arc::new(Mutex::new(bytes.clone())), ..Default::default() };
    let header = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap());
    // The header.
    let tight = RemoteLimits { header_bytes: header - 1, ..Default::default() };
    match block_on(RemoteTable::open_with(reader(), tight)) {
        Err(Error::LimitExceeded { requested, max, what }) => assert!(requested == header && max == header - 1 && what.contains("header_bytes"), "{what}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    assert!(block_on(RemoteTable::open_with(reader(), RemoteLimits { header_bytes: header, ..Default::default() })).is_ok());
    // A call: 20 000 rows of 40 B are 800 KB of rows.
    let ids: Vec<u32> = (0..20_000).collect();
    let small_calls = RemoteLimits { call_bytes: 100_000, ..Default::default() };
    let remote = block_on(RemoteTable::open_with(reader(), small_calls)).unwrap();
    let (r0, b0) = remote.traffic();
    assert!(matches!(block_on(remote.gather(&ids, Bounds::Error)), Err(Error::LimitExceeded { what, .. }) if what.contains("call_bytes")));
    assert_eq!(remote.traffic(), (r0, b0), "refused before anything was fetched");
    assert_eq!(block_on(remote.gather(&ids[..1000], Bounds::Error)).unwrap(), edo::cpu::gather(&t, &ids[..1000], Bounds::Error).unwrap());
    // Requests: a run of chunks is split into requests of whole chunks within the limit.
    let small_requests = RemoteLimits { request_bytes: 10 * 1024 + 5, ..Default::default() };
    let r = reader();
    let remote = block_on(RemoteTable::open_with(r.clone(), small_requests)).unwrap();
    let before = r.served.lock().unwrap().len();
    assert_eq!(block_on(remote.gather(&ids, Bounds::Error)).unwrap(), edo::cpu::gather(&t, &ids, Bounds::Error).unwrap());
    let served = r.served.lock().unwrap()[before..].to_vec();
    assert!(served.iter().all(|s| s.end - s.start <= 10 * 1024), "{served:?}");
    assert!(served.len() >= 800_000 / 10240);
    let chunk_too_big = RemoteLimits { request_bytes: 1000, ..Default::default() };
    let remote = block_on(RemoteTable::open_with(reader(), chunk_too_big)).unwrap();
    assert!(matches!(block_on(remote.gather(&[1], Bounds::Error)), Err(Error::LimitExceeded { what, .. }) if what.contains("request_bytes")));
    // Checksums kept: bounded; past the bound they are dropped and fetched again, rows still right.
    let few_checksums = RemoteLimits { checksum_bytes: 64, ..Default::default() };
    let remote = block_on(RemoteTable::open_with(reader(), few_checksums)).unwrap();
    for start in (0..rows as u32).step_by(997) {
        let batch: Vec<u32> = (start..(start + 300).min(rows as u32)).collect();
        assert_eq!(block_on(remote.gather(&batch, Bounds::Error)).unwrap(), edo::cpu::gather(&t, &batch, Bounds::Error).unwrap());
        assert!(remote.checksums_held() <= 16, "{} checksums held", remote.checksums_held());
    }
}

#[test]
fn changed_and_truncated_remote_files_are_typed_errors() {
    let t = table(5000, 16, Format::Int8);
    let bytes = TableFile::new(t.clone()).with_chunk_bytes(1024).unwrap().to_bytes();
    let reader = MemReader { bytes: Arc::new(Mutex::new(bytes.clone())), ..Default::default() };
    let remote = block_on(RemoteTable::open(reader.clone())).unwrap();
    // A byte of row 4000 changes underneath: that chunk fails its checksum, the others still read.
    let at = bytes.len() - (5000 - 4000) * Format::Int8.row_bytes(16) + 3;
    reader.bytes.lock().unwrap()[at] ^= 1;
    assert!(matches!(block_on(remote.gather(&[4000], Bounds::Error)), Err(Error::Checksum { .. })));
    assert_eq!(block_on(remote.gather(&[7], Bounds::Error)).unwrap(), edo::cpu::gather(&t, &[7], Bounds::Error).unwrap());
    // The file grows: every read says so.
    reader.bytes.lock().unwrap().push(0);
    match block_on(remote.gather(&[7], Bounds::Error)) {
        Err(Error::Remote { message, .. }) => assert!(message.contains("changed"), "{message}"),
        other => panic!("{other:?}"),
    }
    // Truncated files and headers are refused at open.
    for cut in [4usize, 40, bytes.len() - 10] {
        let short = MemReader { bytes: Arc::new(Mutex::new(bytes[..cut].to_vec())), ..Default::default() };
        assert!(matches!(block_on(RemoteTable::open(short)), Err(Error::BadFile { .. })), "cut at {cut}");
    }
    assert!(matches!(block_on(remote.gather(&[5000], Bounds::Error)), Err(Error::IdOutOfRange { .. })));
}

#[cfg(feature = "remote")]
mod http {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use edo::file::remote::HttpReader;
    use edo::GpuLookup;

    #[derive(Clone, Copy, PartialEq)]
    enum Mode {
        Ranges,
        IgnoresRange,
        /// Sends half of the body it promised, then closes.
        CutsShort,
        NotFound,
    }

    /// A static file server on localhost: `Range: bytes=a-b` → 206, unless told otherwise.
    struct Server {
        url: String,
        file: Arc<Mutex<Vec<u8>>>,
        mode: Arc<Mutex<Mode>>,
        requests: Arc<AtomicUsize>,
        /// Answer this many next requests with 503.
        fail_next: Arc<AtomicUsize>,
        /// Wait this long before each answer.
        stall_ms: Arc<AtomicUsize>,
    }

    fn serve(bytes: Vec<u8>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/table.edo", listener.local_addr().unwrap());
        let file = Arc::new(Mutex::new(bytes));
        let mode = Arc::new(Mutex::new(Mode::Ranges));
        let requests = Arc::new(AtomicUsize::new(0));
        let (fail_next, stall_ms) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (f, m, n, fails, stall) = (file.clone(), mode.clone(), requests.clone(), fail_next.clone(), stall_ms.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                n.fetch_add(1, Ordering::Relaxed);
                let mut range = None;
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
                        let (a, b) = v.trim().split_once('-').unwrap();
                        range = Some((a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap()));
                    }
                }
                let body = f.lock().unwrap().clone();
                let mode = *m.lock().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(stall.load(Ordering::Relaxed) as u64));
                let failing = fails.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| k.checked_sub(1)).is_ok();
                let response = match (range, mode) {
                    _ if failing => b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
                    (_, Mode::NotFound) => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
                    (Some((a, b)), Mode::Ranges | Mode::CutsShort) if a < body.len() => {
                        let b = b.min(body.len() - 1);
                        let part = &body[a..=b];
                        let mut r = format!(
                            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {a}-{b}/{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len(),
                            part.len()
                        )
                        .into_bytes();
                        let sent = if mode == Mode::CutsShort { part.len() / 2 } else { part.len() };
                        r.extend_from_slice(&part[..sent]);
                        r
                    }
                    (Some(_), Mode::Ranges | Mode::CutsShort) => {
                        format!("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", body.len())
                            .into_bytes()
                    }
                    _ => {
                        let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).into_bytes();
                        r.extend_from_slice(&body);
                        r
                    }
                };
                let _ = stream.write_all(&response);
            }
        });
        Server { url, file, mode, requests, fail_next, stall_ms }
    }

    #[test]
    fn a_cache_over_a_file_on_a_static_server_fetches_only_what_it_looks_up() {
        let (rows, dim) = (50_000, 32);
        let t = table(rows, dim, Format::Int8);
        let bytes = TableFile::new(t.clone()).with_chunk_bytes(4096).unwrap().to_bytes();
        let server = serve(bytes.clone());
        let remote = block_on(RemoteTable::open(HttpReader::new(&server.url))).unwrap();
        let ids = zipf_ids(100, rows, 1.05, 8);
        assert_eq!(block_on(remote.gather(&ids, Bounds::Error)).unwrap(), edo::cpu::gather(&t, &ids, Bounds::Error).unwrap());
        let (requests, fetched) = remote.traffic();
        assert!(fetched < bytes.len() as u64 / 4, "fetched {fetched} of {} bytes", bytes.len());
        assert_eq!(requests as usize, server.requests.load(Ordering::Relaxed));

        // Behind a GPU cache (where there is a GPU): exact rows, and the server survives a
        // failure mid-way.
        let engine = match edo::Engine::new_blocking(Default::default()) {
            Ok(e) => e,
            Err(edo::gpu::Error::NoAdapter) if std::env::var("EDO_REQUIRE_GPU").as_deref() != Ok("1") => {
                eprintln!("SKIPPED: no adapter (the GPU half of this test)");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let cache = block_on(edo::GpuCache::new(&engine, remote, 3000, edo::cache::PolicyKind::Lfu.build())).unwrap();
        for seed in 0..3 {
            let batch = zipf_ids(1500, rows, 1.05, 100 + seed);
            let got = block_on(cache.gather(&batch, Bounds::Error)).unwrap().read_blocking().unwrap();
            assert_eq!(got, edo::cpu::gather(&t, &batch, Bounds::Error).unwrap(), "batch {seed}");
        }
        *server.mode.lock().unwrap() = Mode::CutsShort;
        let cold: Vec<u32> = (49_000..49_100).collect();
        match block_on(cache.gather(&cold, Bounds::Error)) {
            Err(Error::Remote { message, .. }) => assert!(!message.is_empty()),
            other => panic!("expected a remote error, got {:?}", other.map(|_| ())),
        }
        assert!(!cache.is_cached(49_000), "rows that failed to load are not claimed");
        *server.mode.lock().unwrap() = Mode::Ranges;
        let got = block_on(cache.gather(&cold, Bounds::Error)).unwrap().read_blocking().unwrap();
        assert_eq!(got, edo::cpu::gather(&t, &cold, Bounds::Error).unwrap(), "after the server recovered");
        // The file is replaced by another of the same size: the checksums catch it.
        let replacement = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 77), rows, dim).unwrap();
        let other = TableFile::new(replacement).with_chunk_bytes(4096).unwrap().to_bytes();
        assert_eq!(other.len(), bytes.len());
        *server.file.lock().unwrap() = other;
        let fresh: Vec<u32> = (30_000..30_010).collect();
        assert!(matches!(block_on(cache.gather(&fresh, Bounds::Error)), Err(Error::Checksum { .. })));
    }

    #[test]
    fn transient_failures_are_retried_and_permanent_ones_are_not() {
        use edo::file::remote::HttpOptions;
        let (rows, dim) = (2000, 16);
        let t = table(rows, dim, Format::Int8);
        let server = serve(TableFile::new(t.clone()).with_chunk_bytes(4096).unwrap().to_bytes());
        let fast = HttpOptions { backoff: std::time::Duration::from_millis(5), ..Default::default() };
        let count = || server.requests.load(Ordering::Relaxed);
        // Two 503s, then the file: opening succeeds on the third try.
        server.fail_next.store(2, Ordering::Relaxed);
        let remote = block_on(RemoteTable::open(HttpReader::with_options(&server.url, fast))).unwrap();
        assert_eq!(count(), 3, "two 503s and the header");
        let ids = [3, 1999, 700];
        let want = edo::cpu::gather(&t, &ids, Bounds::Error).unwrap();
        server.fail_next.store(1, Ordering::Relaxed);
        assert_eq!(block_on(remote.gather(&ids, Bounds::Error)).unwrap(), want, "after one 503");
        // Four 503s in a row outlast three retries: the error says what the server said, and how often.
        server.fail_next.store(4, Ordering::Relaxed);
        match block_on(remote.gather(&[1500], Bounds::Error)) {
            Err(Error::Remote { message, .. }) => assert!(message.contains("HTTP 503") && message.contains("after 3 retries"), "{message}"),
            other => panic!("expected a remote error, got {:?}", other.map(|_| ())),
        }
        server.fail_next.store(0, Ordering::Relaxed);
        // A body cut short is retried (and here fails each time); a 404 is not retried.
        for (mode, tries, what) in [(Mode::CutsShort, 4, "after 3 retries"), (Mode::NotFound, 1, "not found")] {
            *server.mode.lock().unwrap() = mode;
            let before = count();
            match block_on(remote.gather(&[1000], Bounds::Error)) {
                Err(Error::Remote { message, .. }) => assert!(message.contains(what), "{message}"),
                other => panic!("expected a remote error, got {:?}", other.map(|_| ())),
            }
            assert_eq!(count() - before, tries, "{what}: requests");
        }
        *server.mode.lock().unwrap() = Mode::Ranges;
        assert_eq!(block_on(remote.gather(&ids, Bounds::Error)).unwrap(), want, "after the server recovered");
    }

    #[test]
    fn a_stalling_server_is_bounded_by_the_request_timeout_and_the_call_deadline() {
        use edo::file::remote::{HttpOptions, RemoteLimits};
        use std::time::{Duration, Instant};
        let (rows, dim) = (2000, 16);
        let t = table(rows, dim, Format::Int8);
        let server = serve(TableFile::new(t.clone()).with_chunk_bytes(4096).unwrap().to_bytes());
        // Each answer 2 s late, requests time out after 200 ms, no retries: the open fails fast.
        server.stall_ms.store(2000, Ordering::Relaxed);
        let impatient = HttpOptions { request_timeout: Duration::from_millis(200), retries: 0, ..Default::default() };
        let started = Instant::now();
        match block_on(RemoteTable::open(HttpReader::with_options(&server.url, impatient))) {
            Err(Error::Remote { message, .. }) => assert!(message.to_lowercase().contains("timeout") || message.contains("timed out"), "{message}"),
            other => panic!("expected a remote error, got {:?}", other.map(|_| ())),
        }
        assert!(started.elapsed() < Duration::from_millis(1500), "{:?}", started.elapsed());
        // Each answer 300 ms late, within the request timeout, but a gather needs five requests
        // (the checksums, four distant chunks): the call's 700 ms deadline ends it.
        // (A server of its own: the first one still sleeps on the requests given up above.)
        let server = serve(TableFile::new(t.clone()).with_chunk_bytes(4096).unwrap().to_bytes());
        let limits = RemoteLimits { deadline: Some(Duration::from_millis(700)), ..Default::default() };
        let remote = block_on(RemoteTable::open_with(HttpReader::new(&server.url), limits)).unwrap();
        server.stall_ms.store(300, Ordering::Relaxed);
        let started = Instant::now();
        match block_on(remote.gather(&[0, 500, 1000, 1500], Bounds::Error)) {
            Err(Error::Remote { message, .. }) => assert!(message.contains("deadline"), "{message}"),
            other => panic!("expected a remote error, got {:?}", other.map(|_| ())),
        }
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(600) && took < Duration::from_millis(1600), "{took:?}");
        server.stall_ms.store(0, Ordering::Relaxed);
        assert_eq!(block_on(remote.gather(&[0, 500], Bounds::Error)).unwrap(), edo::cpu::gather(&t, &[0, 500], Bounds::Error).unwrap());
    }

    #[test]
    fn a_server_that_ignores_range_is_refused_without_downloading_the_file() {
        let server = serve(TableFile::new(table(1000, 8, Format::F16)).to_bytes());
        *server.mode.lock().unwrap() = Mode::IgnoresRange;
        match block_on(RemoteTable::open(HttpReader::new(&server.url))) {
            Err(Error::Remote { location, message }) => {
                assert_eq!(location, server.url);
                assert!(message.contains("HTTP 200") && message.contains("byte ranges"), "{message}");
            }
            other => panic!("expected a remote error, got {:?}", other.map(|_| ())),
        }
        // Nothing listens here: a typed error, not a panic.
        let closed = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/x.edo", l.local_addr().unwrap())
        };
        assert!(matches!(block_on(RemoteTable::open(HttpReader::new(closed))), Err(Error::Remote { .. })));
    }
}

/// What a server's status says reaches the message: a 5xx is a server failure, a 404 a missing
/// file, a 200 a server that ignores `Range`.
#[test]
fn range_replies_name_what_the_server_said() {
    use edo::file::remote::range_reply;
    let message = |status: u16, content_range: Option<&str>| match range_reply("u", &(0..10), status, content_range) {
        Err(Error::Remote { message, .. }) => message,
        other => panic!("{status}: {other:?}"),
    };
    assert!(message(503, None).contains("the server failed: HTTP 503"));
    assert!(message(500, None).contains("HTTP 500"));
    assert!(message(404, None).contains("not found"));
    assert!(message(200, None).contains("does not serve byte ranges"));
    assert!(message(206, Some("bytes 5-9/100")).contains("asked for bytes 0-9"));
    assert_eq!(range_reply("u", &(0..10), 206, Some("bytes 0-9/100")).unwrap(), (10, 100));
    assert_eq!(range_reply("u", &(200..210), 416, Some("bytes */100")).unwrap(), (0, 100));
}

/// A server's file whose header declares a gigabyte of checksums (and a gigabyte of rows): opening
/// it fetches the header alone, and a lookup fetches its rows' chunks and their checksums — kilobytes,
/// not the gigabyte the header named (before, open fetched every checksum and held twice them).
#[test]
fn a_header_declaring_a_gigabyte_of_checksums_costs_only_what_is_read() {
    const R: u64 = 1 << 28; // rows of one f32, in 4-byte chunks: 1 GiB of rows, 1 GiB of checksums
    struct Sparse {
        header: Vec<u8>,
        served: Mutex<u64>,
    }
    impl RangeReader for &Sparse {
        async fn read(&self, range: Range<u64>) -> Result<(Vec<u8>, u64), Error> {
            let len = self.header.len() as u64 + 8 * R;
            let zero_crc = crc32fast::hash(&[0; 4]).to_le_bytes();
            let bytes: Vec<u8> = (range.start..range.end.min(len))
                .map(|i| match i {
                    i if i < self.header.len() as u64 => self.header[i as usize],
                    i if i < self.header.len() as u64 + 4 * R => zero_crc[((i - self.header.len() as u64) % 4) as usize],
                    _ => 0,
                })
                .collect();
            *self.served.lock().unwrap() += bytes.len() as u64;
            Ok((bytes, len))
        }
        fn name(&self) -> String {
            "sparse".into()
        }
    }
    let meta = [
        ("edo.version", "1".to_string()),
        ("edo.format", "fp32".into()),
        ("edo.rows", R.to_string()),
        ("edo.dim", "1".into()),
        ("edo.chunk_bytes", "4".into()),
    ];
    let header_crc = edo::file::header_crc32(meta.iter().map(|(k, v)| (k, v)));
    let json = format!(
        r#"{{"__metadata__":{{"edo.version":"1","edo.format":"fp32","edo.rows":"{R}","edo.dim":"1","edo.chunk_bytes":"4","edo.header_crc32":"{header_crc}"}},"crc32":{{"dtype":"U32","shape":[{R}],"data_offsets":[0,{}]}},"rows":{{"dtype":"U32","shape":[{R},1],"data_offsets":[{},{}]}}}}"#,
        4 * R,
        4 * R,
        8 * R
    );
    let mut json = json.into_bytes();
    json.resize(json.len().next_multiple_of(8), b' ');
    let mut header = (json.len() as u64).to_le_bytes().to_vec();
    header.extend_from_slice(&json);
    let sparse = Sparse { header, served: Mutex::new(0) };
    let remote = block_on(RemoteTable::open(&sparse)).unwrap();
    assert_eq!(remote.rows() as u64, R);
    assert!(*sparse.served.lock().unwrap() <= 64 << 10, "open fetched {} bytes", sparse.served.lock().unwrap());
    let ids = [0, 12_345_678, R as u32 - 1];
    assert_eq!(block_on(remote.gather(&ids, Bounds::Error)).unwrap(), vec![0.0; 3]);
    assert!(*sparse.served.lock().unwrap() <= (64 << 10) + 3 * 1028, "{} bytes", sparse.served.lock().unwrap());
    assert_eq!(remote.checksums_held(), 3);
}

/// The CPU path's row cache over a remote table: rows it holds are never requested again, rows
/// it misses are requested once per lookup (their chunks coalesced), and every row equals the
/// local table's.
#[test]
fn a_host_cache_over_a_remote_table_requests_only_rows_it_does_not_hold() {
    use edo::cache::{CacheSpec, HostCache, PolicyKind};
    let (rows, dim) = (50_000, 32);
    let t = table(rows, dim, Format::Int8);
    let bytes = TableFile::new(t.clone()).with_chunk_bytes(4096).unwrap().to_bytes();
    let reader = MemReader { bytes: Arc::new(Mutex::new(bytes)), ..Default::default() };
    let remote = Arc::new(block_on(RemoteTable::open(reader.clone())).unwrap());
    let cache = HostCache::new(CacheSpec { source: remote.clone(), capacity: 2000, policy: PolicyKind::Lfu }).unwrap();
    let ids = zipf_ids(6000, rows, 1.1, 9);
    for batch in ids.chunks(1000) {
        assert_eq!(block_on(cache.gather(batch, Bounds::Error)).unwrap(), edo::cpu::gather(&t, batch, Bounds::Error).unwrap());
    }
    // Every row of a lookup of cached rows only: no request at all.
    let held: Vec<u32> = (0..rows as u32).filter(|&r| cache.is_cached(r)).collect();
    assert_eq!(held.len(), cache.cached_rows());
    assert!(held.len() > 1000);
    let (requests, fetched) = remote.traffic();
    let served = reader.served.lock().unwrap().len();
    assert_eq!(block_on(cache.gather(&held, Bounds::Error)).unwrap(), edo::cpu::gather(&t, &held, Bounds::Error).unwrap());
    assert_eq!(remote.traffic(), (requests, fetched));
    assert_eq!(reader.served.lock().unwrap().len(), served);
    // Uncached rows: requested, and a second look finds them cached.
    let cold: Vec<u32> = (0..rows as u32).filter(|&r| !cache.is_cached(r)).step_by(997).take(20).collect();
    block_on(cache.gather(&cold, Bounds::Error)).unwrap();
    assert!(remote.traffic().0 > requests);
    let (requests, _) = remote.traffic();
    block_on(cache.gather(&cold, Bounds::Error)).unwrap();
    assert_eq!(remote.traffic().0, requests);
}
