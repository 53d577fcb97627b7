//! Hamming top-k and rescoring on the GPU against the CPU path.

use super::*;

/// Binary codes with many exact ties: rows drawn from a few patterns with some bits flipped.
fn tied_codes(rows: usize, dim: usize, seed: u64, format: Format) -> PackedTable {
    let mut rng = edo::synth::Rng::new(seed);
    let pool: Vec<Vec<f32>> = (0..5).map(|_| (0..dim).map(|_| rng.normal()).collect()).collect();
    let mut data = Vec::with_capacity(rows * dim);
    for r in 0..rows {
        for &x in &pool[r % 5] {
            data.push(if rng.below(16) == 0 { -x } else { x });
        }
    }
    PackedTable::quantize(format, &data, rows, dim).unwrap()
}

/// Hamming top-k on the GPU equals the CPU path exactly — ids, distances, ties by index — over
/// corpora of several chunks (not multiples of the 1024-row chunk), several shards, and k up to
/// 1024.
#[test]
fn hamming_topk_on_the_gpu_equals_the_cpu_path() {
    let Some(engine) = engine() else { return };
    let Some(sharded) = engine_with(EngineOptions { max_binding_bytes: Some(24 << 10), ..Default::default() }) else { return };
    let cases = [
        (1, 1, 1, Format::Binary),
        (3000, 7, 17, Format::Binary),
        (5000, 64, 10, Format::BinaryScaled),
        (2100, 256, 1024, Format::Binary),
        (1500, 1000, 100, Format::BinaryScaled),
        (700, 3, 5, Format::Binary),
    ];
    for (rows, dim, k, format) in cases {
        let corpus = tied_codes(rows, dim, rows as u64, format);
        let queries = tied_codes(37, dim, 7 + rows as u64, Format::Binary);
        let want = edo::search::hamming_topk(&corpus, &queries, k).unwrap();
        for (what, e) in [("one shard", &engine), ("sharded", &sharded)] {
            let codes = block_on(edo::GpuCodes::upload(e, &corpus)).unwrap();
            let got = block_on(codes.hamming_topk(&queries, k)).unwrap();
            assert_eq!(got.k, want.k);
            if let Some(i) = (0..got.ids.len()).find(|&i| (got.ids[i], got.distances[i]) != (want.ids[i], want.distances[i])) {
                panic!(
                    "{rows} × {dim} k {k} {what} ({} shards): first difference at {i}: GPU ({}, {}) vs CPU ({}, {})",
                    codes.shard_count(),
                    got.ids[i],
                    got.distances[i],
                    want.ids[i],
                    want.distances[i]
                );
            }
        }
    }
    // Argument errors come before any GPU work.
    let codes = block_on(edo::GpuCodes::upload(&engine, &tied_codes(10, 16, 1, Format::Binary))).unwrap();
    assert!(matches!(block_on(codes.hamming_topk(&tied_codes(2, 16, 2, Format::Binary), 0)), Err(Error::Unsupported { .. })));
    assert!(matches!(block_on(codes.hamming_topk(&tied_codes(2, 8, 2, Format::Binary), 1)), Err(Error::ShapeMismatch { .. })));
    let f32_table = PackedTable::quantize(Format::F32, &[1.0; 16], 1, 16).unwrap();
    assert!(matches!(block_on(edo::GpuCodes::upload(&engine, &f32_table)), Err(Error::Unsupported { .. })));
}

/// The one-pass kernels at their edges: lists long enough for two levels of merges, k of exactly
/// 64 (the last of blocks of 2048 rows), 65 (the first of blocks of 4096, tiles of four queries),
/// 256 and 1024 (the last one pass takes), codes too wide for a tile of eight queries (four,
/// one histogram a batch), the widest that take eight (3 584 bits), a partial last tile, shards,
/// rows of whole vec4s (read 16 bytes a load) and of words; bindings too small for the lists (the
/// histogram passes take over).
#[test]
fn one_pass_search_equals_the_cpu_path_at_its_edges() {
    let Some(engine) = engine() else { return };
    // Bindings of 256 KiB: shards, and at k = 64 the 30 001-row corpus in two shards, its
    // one-pass lists (2 048 words a query) still room for 32 queries a submission (at k = 1024
    // room for two, so the histogram passes); 9 000 codes of 384 bits at k = 300, blocks of 4096
    // over two shards in one pass. Bindings of 16 KiB: the 30 001-row corpus's lists leave room
    // for none, so the histogram passes take the search. On one shard every case takes the one
    // pass.
    let Some(sharded) = engine_with(EngineOptions { max_binding_bytes: Some(256 << 10), ..Default::default() }) else { return };
    let Some(tiny) = engine_with(EngineOptions { max_binding_bytes: Some(16 << 10), ..Default::default() }) else { return };
    let cases = [
        (30_001, 96, 1_024, Format::Binary),
        (5_000, 40, 1_000, Format::Binary),
        (2_500, 4_000, 300, Format::BinaryScaled),
        (9_000, 33, 600, Format::Binary),
        (30_001, 96, 64, Format::Binary),
        (9_000, 33, 200, Format::Binary),
        (5_000, 40, 256, Format::Binary),
        (2_500, 4_000, 20, Format::BinaryScaled),
        (1_200, 3_584, 30, Format::Binary),
        (9_000, 33, 65, Format::Binary),
        (5_000, 40, 64, Format::Binary),
        // Blocks of 2048 at k = 64, 35 of them: two levels of merges.
        (70_000, 32, 64, Format::Binary),
        (1_024, 64, 3, Format::Binary),
        // Rows of whole vec4s, read 16 bytes a load: 128 bits (a tile of eight), 384 bits at
        // k = 256, 3 968 bits (a tile of four).
        (4_099, 128, 10, Format::Binary),
        (6_001, 384, 256, Format::Binary),
        (9_000, 384, 300, Format::Binary),
        (1_100, 3_968, 12, Format::Binary),
        // Four words whose last is partly padding (100 bits): vec4 rows too.
        (3_333, 100, 7, Format::Binary),
    ];
    for (rows, dim, k, format) in cases {
        let corpus = tied_codes(rows, dim, rows as u64 + 5, format);
        let queries = tied_codes(19, dim, 3 + rows as u64, Format::Binary);
        let want = edo::search::hamming_topk(&corpus, &queries, k).unwrap();
        // (4 000-bit codes' histograms alone need more than 16 KiB a query.)
        let engines: &[(&str, &edo::Engine)] = if dim < 1000 {
            &[("one shard", &engine), ("sharded", &sharded), ("tiny bindings", &tiny)]
        } else {
            &[("one shard", &engine), ("sharded", &sharded)]
        };
        for &(what, e) in engines {
            let codes = block_on(edo::GpuCodes::upload(e, &corpus)).unwrap();
            let got = block_on(codes.hamming_topk(&queries, k)).unwrap();
            assert!(got == want, "{rows} × {dim} k {k} {what} ({} shards): GPU and CPU differ", codes.shard_count());
            // Three reads a query are the histogram passes; one pass reads far fewer.
            let passes = codes.corpus_reads(19, k).unwrap() == 3 * 19;
            match what {
                "one shard" => assert!(!passes, "{rows} × {dim} k {k}: one shard takes the one pass"),
                "tiny bindings" if rows == 30_001 => assert!(passes, "{rows} × {dim} k {k}: tiny bindings take the histogram passes"),
                "sharded" if (rows, dim, k) == (9_000, 384, 300) => {
                    assert!(!passes && codes.shard_count() == 2, "blocks of 4096 over two shards in one pass")
                }
                _ => {}
            }
        }
    }
    // Blocks of 4096 rows over shards with lists that still leave room for eight queries (1 MiB
    // bindings: 40 000 codes of 256 bits in two shards, ten blocks' 1 000 pairs a query, two
    // levels of merges).
    let Some(two_shards) = engine_with(EngineOptions { max_binding_bytes: Some(1 << 20), ..Default::default() }) else { return };
    let corpus = tied_codes(40_000, 256, 21, Format::Binary);
    let queries = tied_codes(19, 256, 22, Format::Binary);
    let codes = block_on(edo::GpuCodes::upload(&two_shards, &corpus)).unwrap();
    assert_eq!(codes.shard_count(), 2);
    // One pass: submissions of nine queries (tiles of four, four and one), nine, then one.
    assert_eq!(codes.corpus_reads(19, 1_000).unwrap(), 7);
    assert!(block_on(codes.hamming_topk(&queries, 1_000)).unwrap() == edo::search::hamming_topk(&corpus, &queries, 1_000).unwrap());
}

/// The scan kernel follows the codes' width: rows of whole vec4s (code words a multiple of 4)
/// compile one scan, other widths another, and each is compiled once.
#[test]
fn the_search_scan_is_chosen_by_the_rows_width() {
    // An engine of its own, to count the pipelines its searches compile.
    let Some(engine) = engine_with(EngineOptions::default()) else { return };
    let search = |dim: usize| {
        let corpus = tied_codes(3_000, dim, dim as u64, Format::Binary);
        let queries = tied_codes(5, dim, 1 + dim as u64, Format::Binary);
        let codes = block_on(edo::GpuCodes::upload(&engine, &corpus)).unwrap();
        assert!(block_on(codes.hamming_topk(&queries, 10)).unwrap() == edo::search::hamming_topk(&corpus, &queries, 10).unwrap());
        engine.pipeline_count()
    };
    let vec4_rows = search(256); // the scan of vec4 rows, the merge, the sort
    assert_eq!(search(100), vec4_rows, "100 bits: four words, vec4 rows as well");
    assert_eq!(search(96), vec4_rows + 1, "three words: the word-at-a-time scan");
    assert_eq!(search(33), vec4_rows + 1);
    assert_eq!(search(128), vec4_rows + 1);
}

/// How often a search reads the corpus: once per tile of eight queries (four for codes wider than
/// 3 584 bits or more than 64 results) in one pass, three times a query for the histogram
/// passes.
#[test]
fn corpus_reads_count_the_tiles_or_the_passes() {
    let Some(engine) = engine() else { return };
    let Some(tiny) = engine_with(EngineOptions { max_binding_bytes: Some(16 << 10), ..Default::default() }) else { return };
    let narrow = tied_codes(3_000, 256, 1, Format::Binary);
    let wide = tied_codes(1_100, 4_000, 2, Format::Binary);
    let codes = block_on(edo::GpuCodes::upload(&engine, &narrow)).unwrap();
    assert_eq!(codes.corpus_reads(32, 10).unwrap(), 4);
    assert_eq!(codes.corpus_reads(33, 64).unwrap(), 5);
    assert_eq!(codes.corpus_reads(33, 256).unwrap(), 9, "blocks of 4096 rows: tiles of four");
    assert_eq!(codes.corpus_reads(1, 1).unwrap(), 1);
    assert_eq!(codes.corpus_reads(32, 64).unwrap(), 4);
    assert_eq!(codes.corpus_reads(32, 65).unwrap(), 8);
    assert_eq!(codes.corpus_reads(32, 1_024).unwrap(), 8);
    assert_eq!(codes.corpus_reads(32, 1_025).unwrap(), 96);
    assert_eq!(codes.corpus_reads(0, 10).unwrap(), 0);
    assert_eq!(codes.corpus_reads(5, 0).unwrap(), 0);
    let wide_codes = block_on(edo::GpuCodes::upload(&engine, &wide)).unwrap();
    assert_eq!(wide_codes.corpus_reads(19, 20).unwrap(), 5);
    // As in one_pass_search_equals_the_cpu_path_at_its_edges: lists too long for 16 KiB
    // bindings, so the histogram passes.
    let long = block_on(edo::GpuCodes::upload(&tiny, &tied_codes(30_001, 96, 3, Format::Binary))).unwrap();
    assert_eq!(long.corpus_reads(19, 64).unwrap(), 57);
}

/// Every row at the same distance: a block's 2048 (or 4096) entries all tie, so whole stripes of
/// 256 ties sit before the kept ones; k in blocks of 2048 (up to 64), and in blocks of 4096 below,
/// at and past a stripe's width up to 1024, over one block and several.
#[test]
fn one_pass_search_keeps_the_lowest_rows_when_every_row_ties() {
    let Some(engine) = engine() else { return };
    let (rows, dim) = (2_500, 64);
    let corpus = PackedTable::quantize(Format::Binary, &vec![1.0; rows * dim], rows, dim).unwrap();
    let queries = tied_codes(9, dim, 11, Format::Binary);
    let codes = block_on(edo::GpuCodes::upload(&engine, &corpus)).unwrap();
    for k in [1, 64, 65, 200, 255, 256, 257, 1_000, 1_024] {
        let want = edo::search::hamming_topk(&corpus, &queries, k).unwrap();
        let got = block_on(codes.hamming_topk(&queries, k)).unwrap();
        assert!(got == want, "all rows tied, k {k}: GPU and CPU differ");
    }
    let rows = 9_000;
    let corpus = PackedTable::quantize(Format::Binary, &vec![1.0; rows * dim], rows, dim).unwrap();
    let codes = block_on(edo::GpuCodes::upload(&engine, &corpus)).unwrap();
    for k in [300, 1_024] {
        let want = edo::search::hamming_topk(&corpus, &queries, k).unwrap();
        let got = block_on(codes.hamming_topk(&queries, k)).unwrap();
        assert!(got == want, "all {rows} rows tied, k {k}: GPU and CPU differ");
    }
}

/// Rescoring on the GPU: the candidates are the CPU path's, and the scores its scores within
/// rounding (the summation orders differ), so the ranking agrees wherever scores are apart.
#[test]
fn rescored_search_on_the_gpu_agrees_with_the_cpu_path() {
    let Some(engine) = engine() else { return };
    let Some(sharded) = engine_with(EngineOptions { max_binding_bytes: Some(20 << 10), ..Default::default() }) else { return };
    let (rows, dim, nq) = (3333, 96, 29);
    let data = embedding_table(rows, dim, 4);
    let queries = embedding_table(nq, dim, 5);
    let bits = PackedTable::quantize(Format::Binary, &data, rows, dim).unwrap();
    // Candidates up to 1024 take the one pass on one shard; 150 × 8 = 1200 the histogram passes.
    let row_wise = [(Format::Int8, 10, 4), (Format::F32, 7, 3), (Format::BinaryScaled, 25, 1), (Format::Int4, 100, 8), (Format::Int8, 150, 8)];
    // Every decoder of the block, group-wise, k-quant, FP8 and zero-point formats.
    let blocks = [(Format::Q8_0, 10, 4), (Format::Q4_1, 15, 2), (Format::Int4G64, 10, 4), (Format::Q4K, 10, 4), (Format::Q6K, 12, 3)];
    let others = [(Format::Fp8E4M3, 10, 4), (Format::Fp8E5M2, 8, 2), (Format::Int4Zp32, 10, 4), (Format::Int8Zp64, 9, 3)];
    for (format, k, mult) in row_wise.into_iter().chain(blocks).chain(others) {
        let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let want = edo::search::search_rescored(&bits, &queries, &table, k, mult).unwrap();
        for (what, e) in [("one shard", &engine), ("sharded", &sharded)] {
            let codes = block_on(edo::GpuCodes::upload(e, &bits)).unwrap();
            let gpu_table = block_on(GpuTable::upload(e, &table)).unwrap();
            let got = block_on(codes.search_rescored(&queries, &gpu_table, k, mult)).unwrap();
            assert_eq!(got.k, want.k);
            let decoded = table.dequantize();
            for q in 0..nq {
                let qv = &queries[q * dim..(q + 1) * dim];
                let tol = |id: u32| {
                    let x = &decoded[id as usize * dim..(id as usize + 1) * dim];
                    2.0 * dim as f32 * f32::EPSILON * x.iter().zip(qv).map(|(a, b)| (a * b).abs()).sum::<f32>()
                };
                for j in 0..k {
                    let (gid, gs) = (got.ids[q * k + j], got.scores[q * k + j]);
                    let (wid, ws) = (want.ids[q * k + j], want.scores[q * k + j]);
                    assert!((gs - ws).abs() <= tol(gid).max(tol(wid)), "{format} {what}: query {q} rank {j}: GPU {gid} {gs} vs CPU {wid} {ws}");
                    if gid != wid {
                        assert!((gs - ws).abs() <= tol(gid) + tol(wid), "{format} {what}: query {q} rank {j}: different rows with distinct scores");
                    }
                }
            }
        }
    }
}

/// Centred and ITQ codes on the GPU: queries go through the transform on the CPU, so the Hamming
/// neighbours equal the CPU path's exactly and the rescored ones within rounding.
#[test]
fn searches_through_a_code_transform_on_the_gpu_equal_the_cpu_path() {
    use edo::search::{CodeTransform, ItqOptions};
    let Some(engine) = engine() else { return };
    let (rows, dim, nq) = (2500, 40, 21);
    let shifted = |v: Vec<f32>| -> Vec<f32> { v.iter().enumerate().map(|(i, x)| x + 0.03 * (i % 7) as f32).collect() };
    let data = shifted(embedding_table(rows, dim, 6));
    let queries = shifted(embedding_table(nq, dim, 7));
    let int8 = PackedTable::quantize(Format::Int8, &data, rows, dim).unwrap();
    let gpu_int8 = block_on(GpuTable::upload(&engine, &int8)).unwrap();
    for t in [CodeTransform::centered(&data, dim).unwrap(), CodeTransform::itq(&data, dim, &ItqOptions { iterations: 10, ..Default::default() }).unwrap()] {
        let codes = t.encode(&data).unwrap();
        let gpu_codes = block_on(edo::GpuCodes::upload(&engine, &codes)).unwrap();
        let query_codes = t.encode(&queries).unwrap();
        assert_eq!(block_on(gpu_codes.hamming_topk(&query_codes, 33)).unwrap(), edo::search::hamming_topk(&codes, &query_codes, 33).unwrap(), "{}", t.kind());
        let want = edo::search::search_rescored_with(&codes, Some(&t), &queries, &int8, 10, 4).unwrap();
        let got = block_on(gpu_codes.search_rescored_with(Some(&t), &queries, &gpu_int8, 10, 4)).unwrap();
        assert_eq!(got.k, want.k);
        for (j, ((gid, gs), (wid, ws))) in got.ids.iter().zip(&got.scores).zip(want.ids.iter().zip(&want.scores)).enumerate() {
            assert!((gs - ws).abs() <= 1e-4 * ws.abs().max(1.0), "{}: result {j}: GPU {gid} {gs} vs CPU {wid} {ws}", t.kind());
        }
        let same = got.ids.iter().zip(&want.ids).filter(|(a, b)| a == b).count();
        assert!(same * 10 >= got.ids.len() * 9, "{}: {same} of {} ids agree", t.kind(), got.ids.len());
        // A transform of another dim is refused, as on the CPU path.
        let other = CodeTransform::centered(&data[..10 * (dim + 2)], dim + 2).unwrap();
        assert!(matches!(block_on(gpu_codes.search_rescored_with(Some(&other), &queries, &gpu_int8, 10, 4)), Err(Error::ShapeMismatch { .. })));
    }
}
