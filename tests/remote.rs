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
        let mut ids = zipf_ids(300, rows, 1.0, 3);
        let (_, before) = remote.traffic();
        assert_eq!(block_on(remote.gather(&ids, Bounds::Error)).unwrap(), edo::cpu::gather(&t, &ids, Bounds::Error).unwrap(), "{format}");
        let (_, after) = remote.traffic();
        // Exactly the 4 KiB chunks that hold the rows.
        let rb = format.row_bytes(dim);
        let chunks: std::collections::BTreeSet<usize> = ids.iter().flat_map(|&r| r as usize * rb / 4096..=((r as usize + 1) * rb - 1) / 4096).collect();
        let rows_len = rows * rb;
        let want: usize = chunks.iter().map(|&c| 4096.min(rows_len - c * 4096)).sum();
        assert_eq!(after - before, want as u64, "{format}: {} bytes for 300 rows", after - before);
        assert!(after - before < bytes.len() as u64 / 2);
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
    assert_eq!(remote.traffic().0 - r0, 1, "adjacent chunks in one request");
    let spread = [10u32, 200, 400];
    block_on(remote.gather(&spread, Bounds::Error)).unwrap();
    assert_eq!(remote.traffic().0 - r0, 4, "three distant chunks: three requests");
    let remote = block_on(RemoteTable::open(reader.clone())).unwrap().with_gap_bytes(16 << 10);
    let (r0, _) = remote.traffic();
    block_on(remote.gather(&spread, Bounds::Error)).unwrap();
    assert_eq!(remote.traffic().0 - r0, 1, "within the gap allowance: one request");
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

    #[derive(Clone, Copy, PartialEq)]
    enum Mode {
        Ranges,
        IgnoresRange,
        /// Sends half of the body it promised, then closes.
        CutsShort,
    }

    /// A static file server on localhost: `Range: bytes=a-b` → 206, unless told otherwise.
    struct Server {
        url: String,
        file: Arc<Mutex<Vec<u8>>>,
        mode: Arc<Mutex<Mode>>,
        requests: Arc<AtomicUsize>,
    }

    fn serve(bytes: Vec<u8>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/table.edo", listener.local_addr().unwrap());
        let file = Arc::new(Mutex::new(bytes));
        let mode = Arc::new(Mutex::new(Mode::Ranges));
        let requests = Arc::new(AtomicUsize::new(0));
        let (f, m, n) = (file.clone(), mode.clone(), requests.clone());
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
                let response = match (range, mode) {
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
        Server { url, file, mode, requests }
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
            Err(Error::NoAdapter) if std::env::var("EDO_REQUIRE_GPU").as_deref() != Ok("1") => {
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
