//! Rows aligned on the GPU (`PackedTable::with_row_alignment`, FBGEMM's `row_alignment`): every
//! format's gathers, the bags of the formats read 16 bytes a load (INT8, FP8, q8_0) and f16
//! output against the CPU oracle, rows written in place, across shards.

use super::*;

/// Aligned rows on dims that take the 16-byte kernels (16, 48, 128: INT8 rows of 20, 52 and 136
/// bytes padded) and dims that do not (40, 7): gathers equal the CPU path's bit for bit in every
/// format, on one shard and on many, and the GPU holds the padded rows.
#[test]
fn aligned_rows_gather_as_the_cpu_does_in_every_format() {
    let rows = 1001;
    for max_binding in [None, Some(4 << 10)] {
        let Some(engine) = engine_with(EngineOptions { max_binding_bytes: max_binding, ..Default::default() }) else { return };
        for dim in [16usize, 48, 128, 40, 7] {
            let data = embedding_table(rows, dim, 7 + dim as u64);
            // Every format at dim 48 (52-byte INT8 rows, which the 16-byte kernel takes padded
            // to 64); the formats whose kernels read 16 bytes a load at every dim, and INT8 at
            // 64 bytes too.
            let wide = |f: Format| edo::gpu::decoders::has_wide_reads(f) || f == Format::F32;
            for format in Format::ALL.into_iter().filter(|&f| wide(f) || dim == 48) {
                for alignment in [16usize, 64].into_iter().filter(|&a| a == 16 || format == Format::Int8) {
                    let table = PackedTable::quantize(format, &data, rows, dim).unwrap().with_row_alignment(alignment).unwrap();
                    let stride = table.gpu_row_words();
                    assert!(stride.is_multiple_of(alignment / 4) && stride >= table.row_words() && stride < table.row_words() + alignment / 4);
                    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
                    let what = format!("{format} dim {dim} aligned to {alignment} shards {}", gpu.shard_count());
                    assert_eq!(gpu.bytes(), 4 * (rows * stride) as u64, "{what}: the GPU holds the padded rows");
                    assert_eq!(gpu.shard_count() > 1, max_binding.is_some(), "{what}");
                    for bounds in [Bounds::Zero, Bounds::Clamp] {
                        let ids = ids_with_bad(2049, rows, dim as u64);
                        let want = edo::cpu::gather(&table, &ids, bounds).unwrap();
                        assert_bits_eq(&gpu_gather(&gpu, &ids, bounds).unwrap(), &want, &format!("{what} {bounds:?}"));
                    }
                }
            }
        }
    }
}

/// Bags over rows of 8-bit codes aligned to 16 bytes (INT8, FP8, q8_0: the kernel that reads
/// sixteen codes a load where every dim is a multiple of 16) pool as the CPU path does: every
/// pooling, weights, bad indices, bags longer than a staging round, one shard and many, small and
/// large batches (INT8); and, unweighted on one shard, as the same table unaligned does on this
/// GPU, bit for bit (same order of terms).
#[test]
fn aligned_bags_pool_as_the_cpu_does() {
    let rows = 900;
    for max_binding in [None, Some(4 << 10)] {
        let Some(engine) = engine_with(EngineOptions { max_binding_bytes: max_binding, ..Default::default() }) else { return };
        let cases = [16usize, 48, 128, 40]
            .map(|dim| (Format::Int8, dim))
            .into_iter()
            .chain([Format::Fp8E4M3, Format::Fp8E5M2, Format::Q8_0].into_iter().flat_map(|f| [48usize, 128, 40].map(|dim| (f, dim))));
        for (format, dim) in cases {
            let data = embedding_table(rows, dim, dim as u64);
            let plain = PackedTable::quantize(format, &data, rows, dim).unwrap();
            let table = plain.clone().with_row_alignment(16).unwrap();
            let max_abs = table.dequantize().iter().fold(0f32, |m, x| m.max(x.abs()));
            let (gpu, gpu_plain) = (block_on(GpuTable::upload(&engine, &table)).unwrap(), block_on(GpuTable::upload(&engine, &plain)).unwrap());
            // A small batch, bags longer than a staging round, and (one shard, dim 128) a large
            // batch.
            let large = max_binding.is_none() && dim == 128 && format == Format::Int8;
            for (n_bags, max_len) in [(301usize, 12u32), (40, 700), (20_000, 6)].into_iter().filter(|&(n, _)| n < 20_000 || large) {
                let (indices, offsets) = random_bags(n_bags, rows, max_len, true, n_bags as u64);
                let weights: Vec<f32> = (0..indices.len()).map(|j| 0.25 + (j % 5) as f32 * 0.5).collect();
                for (pooling, weighted) in [(Pooling::Sum, false), (Pooling::Sum, true), (Pooling::Mean, false), (Pooling::Max, false), (Pooling::None, false)]
                {
                    let mut bags = Bags::new(&indices, &offsets).include_last_offset(true);
                    if weighted {
                        bags = bags.weights(&weights);
                    }
                    let what = format!("{format} dim {dim} {n_bags} bags {pooling:?} weighted {weighted} shards {}", gpu.shard_count());
                    let want = edo::cpu::embedding_bag(&table, &bags, pooling, Bounds::Zero).unwrap();
                    let got = run_job(block_on(gpu.prepare_bag(&bags, pooling, Bounds::Zero)).unwrap());
                    let w = if weighted { 2.25 } else { 1.0 };
                    assert_pooled_close(&got, &want, max_len as f32, w * max_abs, pooling == Pooling::Max, &what);
                    // Unweighted, the kernels' sums are the same additions in the same order
                    // (weights could be fused with the adds in one pipeline and not the other).
                    if gpu.shard_count() == 1 && !weighted {
                        let unaligned = run_job(block_on(gpu_plain.prepare_bag(&bags, pooling, Bounds::Zero)).unwrap());
                        assert_bits_eq(&got, &unaligned, &format!("{what}: aligned against unaligned"));
                    }
                }
            }
        }
    }
}

/// f16 output from aligned rows, rows rewritten in place on an aligned table, and a table batch
/// of aligned INT8 tables of different dims: all equal to the CPU path.
#[test]
fn aligned_rows_write_in_place_and_batch() {
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(4 << 10), ..Default::default() }) else { return };
    let (rows, dim) = (700, 48);
    let data = embedding_table(rows, dim, 3);
    let mut table = PackedTable::quantize(Format::Int8, &data, rows, dim).unwrap().with_row_alignment(16).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let ids = ids_with_bad(1500, rows, 9);
    let f16 = |job: edo::LookupJob| -> Vec<u16> {
        job.output().fill(SENTINEL).unwrap();
        job.submit().unwrap();
        job.into_output().read_f16_blocking().unwrap().into_iter().map(|v| v.to_bits()).collect()
    };
    let want: Vec<u16> = Lookup::gather_f16(&table, &ids, Bounds::Zero).unwrap().into_iter().map(|v| v.to_bits()).collect();
    assert_eq!(f16(block_on(gpu.prepare_gather_f16(&ids, Bounds::Zero)).unwrap()), want, "f16 gather");
    // Rows rewritten: runs of consecutive rows across shard edges, and single rows.
    let changed: Vec<u32> = (0..rows as u32).filter(|r| r % 7 < 3 || (100..140).contains(r)).collect();
    let values: Vec<f32> = changed.iter().flat_map(|&r| (0..dim).map(move |c| (r as f32 * 0.37 + c as f32).sin())).collect();
    table.update_rows(&changed, &values).unwrap();
    gpu.write_rows(&table, &changed).unwrap();
    let all: Vec<u32> = (0..rows as u32).collect();
    assert_bits_eq(&gpu_gather(&gpu, &all, Bounds::Error).unwrap(), &edo::cpu::gather(&table, &all, Bounds::Error).unwrap(), "rows written in place");
    // A batch of aligned tables: each table starts on a whole padded row.
    let other = PackedTable::quantize(Format::Int8, &embedding_table(333, 128, 4), 333, 128).unwrap().with_row_alignment(16).unwrap();
    let batch = block_on(GpuTableBatch::upload(&engine, &[&table, &other])).unwrap();
    // 64 bags a table, feature-major (table 0's, then table 1's), of ids both tables hold.
    let (indices, offsets) = random_bags(128, 333, 9, false, 1);
    let bags = Bags::new(&indices, &offsets).include_last_offset(true);
    let got = run_job(block_on(batch.prepare_bags(64, &bags, Pooling::Sum, Bounds::Error, Layout::PerTable)).unwrap());
    let n0 = offsets[64] as usize;
    let first = Bags::new(&indices[..n0], &offsets[..65]).include_last_offset(true);
    let second_offsets: Vec<u32> = offsets[64..].iter().map(|o| o - n0 as u32).collect();
    let second = Bags::new(&indices[n0..], &second_offsets).include_last_offset(true);
    let mut want = edo::cpu::embedding_bag(&table, &first, Pooling::Sum, Bounds::Error).unwrap();
    want.extend(edo::cpu::embedding_bag(&other, &second, Pooling::Sum, Bounds::Error).unwrap());
    assert_pooled_close(&got, &want, 9.0, 2.0, false, "a batch of aligned tables");
    // An unaligned table first: the aligned one after it starts off a 16-byte boundary, and the
    // batch takes the kernel of words.
    let packed = PackedTable::quantize(Format::Int8, &data, rows, dim).unwrap();
    let mixed = block_on(GpuTableBatch::upload(&engine, &[&packed, &other])).unwrap();
    let got = run_job(block_on(mixed.prepare_bags(64, &bags, Pooling::Sum, Bounds::Error, Layout::PerTable)).unwrap());
    let mut want = edo::cpu::embedding_bag(&packed, &first, Pooling::Sum, Bounds::Error).unwrap();
    want.extend(edo::cpu::embedding_bag(&other, &second, Pooling::Sum, Bounds::Error).unwrap());
    assert_pooled_close(&got, &want, 9.0, 2.0, false, "an unaligned table, then an aligned one");
}

/// A reordered aligned table stays aligned, on the host and through its file, and looks up the
/// same rows by the same ids on the GPU.
#[test]
fn reordered_aligned_tables_and_prepared_kernels() {
    let Some(engine) = engine_with(EngineOptions::default()) else { return };
    let (rows, dim) = (1200, 128);
    let table = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 5), rows, dim).unwrap().with_row_alignment(16).unwrap();
    let counts: Vec<u64> = (0..rows as u64).map(|r| (r * 7919) % 101).collect();
    let reordered = PrunedTable::reorder(&table, &edo::prune::frequency_order(&counts)).unwrap();
    assert_eq!(reordered.table().row_alignment(), 16);
    let back = PrunedTable::from_file_bytes(reordered.to_bytes(None, &Default::default()).unwrap()).unwrap();
    assert_eq!(back.table().row_alignment(), 16, "through the file");
    assert_eq!(reordered.original_order().unwrap(), table);
    let gpu = block_on(GpuPrunedTable::upload(&engine, &back)).unwrap();
    assert_eq!(gpu.bytes(), 4 * (rows * 36 + rows) as u64, "padded rows and the remap");
    let ids = ids_with_bad(3000, rows, 2);
    assert_bits_eq(&run_job(block_on(gpu.prepare_gather(&ids, Bounds::Zero)).unwrap()), &table.gather(&ids, Bounds::Zero).unwrap(), "reordered, aligned");
}

/// Packed q8_0 rows that are whole 16-byte words by themselves (dims 224 and 256: 59 and 68 words)
/// take the 16-byte kernels with no alignment asked, and gather and pool as the CPU path does, on
/// one shard and over several.
#[test]
fn packed_q8_0_rows_of_whole_vec4s_read_16_bytes_a_load() {
    let rows = 400;
    let (indices, offsets) = random_bags(90, rows, 11, true, 4);
    let bags = Bags::new(&indices, &offsets).include_last_offset(true);
    for max_binding in [None, Some(16 << 10)] {
        let Some(engine) = engine_with(EngineOptions { max_binding_bytes: max_binding, ..Default::default() }) else { return };
        for dim in [224usize, 256] {
            let table = PackedTable::quantize(Format::Q8_0, &embedding_table(rows, dim, dim as u64), rows, dim).unwrap();
            assert_eq!((table.row_alignment(), table.gpu_row_words() % 4), (4, 0));
            assert_eq!(edo::gpu::ShaderId::gather(Format::Q8_0, dim, table.gpu_row_words()), edo::gpu::ShaderId::GatherWide { format: Format::Q8_0 });
            let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
            let what = format!("q8_0 dim {dim} shards {}", gpu.shard_count());
            assert_eq!(gpu.shard_count() > 1, max_binding.is_some(), "{what}");
            let ids = ids_with_bad(1500, rows, dim as u64);
            assert_bits_eq(&gpu_gather(&gpu, &ids, Bounds::Zero).unwrap(), &edo::cpu::gather(&table, &ids, Bounds::Zero).unwrap(), &what);
            let max_abs = table.dequantize().iter().fold(0f32, |m, x| m.max(x.abs()));
            for pooling in [Pooling::Sum, Pooling::Max] {
                let want = edo::cpu::embedding_bag(&table, &bags, pooling, Bounds::Clamp).unwrap();
                let got = run_job(block_on(gpu.prepare_bag(&bags, pooling, Bounds::Clamp)).unwrap());
                assert_pooled_close(&got, &want, 11.0, max_abs, pooling == Pooling::Max, &format!("{what} {pooling:?}"));
            }
        }
    }
}

/// `prepare_table`, and `prepare_rows` (a table's format, dim and alignment before the table
/// exists, as the browser's `prepare(format, dim, { rowAlignment })`), compile what the table's
/// first gather and bags use, for the 16-byte kernels of every 8-bit format and for packed rows;
/// bad input is refused, typed.
#[test]
fn prepared_rows_serve_the_first_lookups() {
    let (rows, dim) = (300, 64);
    let data = embedding_table(rows, dim, 6);
    let (indices, offsets) = random_bags(10, rows, 16, false, 3);
    let bags = Bags::new(&indices, &offsets).include_last_offset(true);
    let cases = [(Format::Int8, 16, true), (Format::Fp8E4M3, 16, false), (Format::Q8_0, 16, false), (Format::Int8, 32, false), (Format::Int4, 4, false)];
    for (format, alignment, whole_table) in cases {
        // An engine of its own, which has compiled nothing yet.
        let Some(engine) = engine_with(EngineOptions::default()) else { return };
        let table = PackedTable::quantize(format, &data, rows, dim).unwrap().with_row_alignment(alignment).unwrap();
        if whole_table {
            block_on(engine.prepare_table(&table)).unwrap();
        } else {
            block_on(engine.prepare_rows(format, dim, alignment)).unwrap();
        }
        let compiled = engine.pipeline_count();
        let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
        let _ = gpu_gather(&gpu, &[1, 2, 3], Bounds::Zero).unwrap();
        let _ = run_job(block_on(gpu.prepare_bag(&bags, Pooling::Sum, Bounds::Error)).unwrap());
        assert_eq!(engine.pipeline_count(), compiled, "{format} aligned to {alignment}: a first lookup compiled a kernel prepare_rows had not");
    }
    let Some(engine) = engine() else { return };
    assert!(matches!(
        block_on(engine.prepare_rows(Format::Int8, dim, 12)).map_err(Error::from),
        Err(Error::Unsupported(edo::Unsupported::RowAlignment { bytes: 12 }))
    ));
    assert!(matches!(block_on(engine.prepare_rows(Format::Int8, 0, 16)).map_err(Error::from), Err(Error::ZeroDim)));
    // Dims whose rows' words would overflow the kernels' offsets (or usize, for the group-wise
    // formats' arithmetic) are refused, typed, by every prepare.
    let huge = edo::gpu::MAX_PREPARED_DIM + 1;
    for format in [Format::Int4G32, Format::Q4K, Format::F32] {
        assert!(matches!(block_on(engine.prepare_rows(format, usize::MAX, 4)).map_err(Error::from), Err(Error::LimitExceeded { .. })), "{format}");
        assert!(matches!(block_on(engine.prepare_gather(format, huge)).map_err(Error::from), Err(Error::LimitExceeded { .. })), "{format}");
        assert!(matches!(block_on(engine.prepare_model(format, huge, 4)).map_err(Error::from), Err(Error::LimitExceeded { .. })), "{format}");
    }
}

/// Alignments that are not a power of two from 4 to 256 bytes are refused, typed; 4 is none.
#[test]
fn row_alignments_outside_the_powers_of_two_are_refused() {
    let table = PackedTable::quantize(Format::Int8, &embedding_table(3, 5, 1), 3, 5).unwrap();
    for bytes in [0usize, 1, 2, 3, 12, 48, 512] {
        assert!(
            matches!(table.clone().with_row_alignment(bytes), Err(edo::CoreError::Unsupported(edo::CoreUnsupported::RowAlignment { bytes: b })) if b == bytes)
        );
    }
    let none = table.clone().with_row_alignment(4).unwrap();
    assert_eq!(none.gpu_row_words(), table.row_words());
}

/// Binary codes aligned on the GPU (rows of 200 bits, 7 words, and of 256 bits with a scale, 9
/// words, padded to 8 and 12; the latter's codes are then read 16 bytes a load) search as the CPU
/// path does, on one shard and over several.
#[test]
fn aligned_codes_search_as_the_cpu_does() {
    let Some(engine) = engine() else { return };
    let Some(sharded) = engine_with(EngineOptions { max_binding_bytes: Some(64 << 10), ..Default::default() }) else { return };
    let rows = 5003;
    for (format, dim) in [(Format::Binary, 200usize), (Format::BinaryScaled, 256)] {
        let corpus = PackedTable::quantize(format, &embedding_table(rows, dim, 11), rows, dim).unwrap().with_row_alignment(16).unwrap();
        assert!(corpus.gpu_row_words() > corpus.row_words());
        let queries = PackedTable::quantize(format, &embedding_table(19, dim, 12), 19, dim).unwrap();
        for k in [10usize, 100] {
            let want = edo::search::hamming_topk(&corpus, &queries, k).unwrap();
            for e in [&engine, &sharded] {
                let codes = block_on(edo::GpuCodes::upload(e, &corpus)).unwrap();
                let got = block_on(codes.hamming_topk(&queries, k)).unwrap();
                assert!(got == want, "{format} dim {dim} k {k} ({} shards): GPU and CPU differ", codes.shard_count());
            }
        }
    }
}

/// The 16-byte bags over rows wider than one pass of a workgroup's lanes (16 lanes here, 256
/// columns a pass; dim 528 takes three, the last with one lane's columns): INT8, FP8 and q8_0
/// aligned (q8_0's last block half padding) and FP16, against the CPU path, on one shard and over
/// several, under Clamp.
#[test]
fn wide_bags_span_several_column_blocks() {
    let (rows, dim) = (300, 528);
    let data = embedding_table(rows, dim, 9);
    let (indices, offsets) = random_bags(70, rows, 9, true, 8);
    let bags = Bags::new(&indices, &offsets).include_last_offset(true);
    for max_binding in [None, Some(64 << 10)] {
        let Some(engine) = engine_with(EngineOptions { workgroup_size: 16, max_binding_bytes: max_binding, ..Default::default() }) else { return };
        for (format, alignment) in [(Format::Int8, 16), (Format::Fp8E4M3, 16), (Format::Q8_0, 16), (Format::F16, 4)] {
            let table = PackedTable::quantize(format, &data, rows, dim).unwrap().with_row_alignment(alignment).unwrap();
            let max_abs = table.dequantize().iter().fold(0f32, |m, x| m.max(x.abs()));
            let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
            assert_eq!(gpu.shard_count() > 1, max_binding.is_some());
            for pooling in [Pooling::Sum, Pooling::Max] {
                let want = edo::cpu::embedding_bag(&table, &bags, pooling, Bounds::Clamp).unwrap();
                let got = run_job(block_on(gpu.prepare_bag(&bags, pooling, Bounds::Clamp)).unwrap());
                assert_pooled_close(&got, &want, 9.0, max_abs, pooling == Pooling::Max, &format!("{format} {pooling:?} shards {}", gpu.shard_count()));
            }
        }
    }
}
