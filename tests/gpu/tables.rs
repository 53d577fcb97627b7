//! Pruned tables, memory-mapped table files, rows written in place, shared handles.

use super::*;

#[test]
fn pruned_gathers_and_bags_match_the_cpu() {
    for max_binding in [None, Some(2 << 10)] {
        let Some(engine) = engine_with(EngineOptions { max_binding_bytes: max_binding, ..Default::default() }) else { return };
        let (rows, dim) = (900, 12);
        let data = embedding_table(rows, dim, 3);
        let keep: Vec<bool> = (0..rows).map(|r| (r * 7) % 10 < 6).collect();
        for format in Format::ALL {
            let pruned = PrunedTable::quantize(format, &data, rows, dim, &keep).unwrap();
            let gpu = block_on(GpuPrunedTable::upload(&engine, &pruned)).unwrap();
            assert_eq!(gpu.bytes(), pruned.bytes());
            let max_abs = data.iter().fold(1f32, |m, x| m.max(x.abs()));
            for bounds in [Bounds::Error, Bounds::Zero, Bounds::Clamp] {
                let ids = if bounds == Bounds::Error { uniform_ids(2001, rows, 8) } else { ids_with_bad(2001, rows, 8) };
                let want = pruned.gather(&ids, bounds).unwrap();
                let got = run_job(block_on(gpu.prepare_gather(&ids, bounds)).unwrap());
                assert_bits_eq(&got, &want, &format!("pruned gather {format} {bounds:?}"));
                let (indices, offsets) = random_bags(150, rows, 12, bounds != Bounds::Error, 4);
                let bags = Bags::new(&indices, &offsets).include_last_offset(true);
                for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
                    let want = pruned.bag(&bags, pooling, bounds).unwrap();
                    let got = run_job(block_on(gpu.prepare_bag(&bags, pooling, bounds)).unwrap());
                    assert_pooled_close(&got, &want, 12.0, max_abs, pooling == Pooling::Max, &format!("pruned bag {format} {pooling:?} {bounds:?}"));
                }
            }
        }
    }
}

/// A pruned table's id map is bound whole: one longer than the device's storage binding is a
/// typed error at upload, before any buffer is made (not a failure at every lookup).
#[test]
fn an_id_map_past_the_binding_limit_is_refused() {
    let Some(engine) = engine_with(EngineOptions::default()) else { return };
    let max = engine.limits().max_storage_buffer_binding_size;
    let table = PackedTable::quantize(Format::Int8, &[1.0; 8], 1, 8).unwrap();
    let mut remap = vec![edo::prune::ABSENT; (max / 4 + 1) as usize];
    remap[7] = 0;
    let pruned = PrunedTable::from_remap(table, remap).unwrap();
    match block_on(GpuPrunedTable::upload(&engine, &pruned)) {
        Err(Error::LimitExceeded { requested, max: m, .. }) => assert_eq!((requested, m), (max + 4, max)),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("an id map of {} bytes uploaded past a {max}-byte binding", max + 4),
    }
}

/// A table reordered by frequency (`edo reorder`), after its file round trip: on the GPU the same
/// rows for the same ids as the original table on the CPU path, bit for bit, bags too.
#[test]
fn reordered_tables_gather_their_original_rows() {
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(4 << 10), ..Default::default() }) else { return };
    let (rows, dim) = (1337, 24);
    let data = embedding_table(rows, dim, 5);
    let ids = uniform_ids(3001, rows, 2);
    let order = edo::prune::frequency_order(&edo::prune::lookup_counts(&ids, rows).unwrap());
    for format in [Format::Int8, Format::F16, Format::Int4] {
        let full = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let bytes = PrunedTable::reorder(&full, &order).unwrap().to_bytes(None, &Default::default()).unwrap();
        let reordered = PrunedTable::from_file_bytes(bytes).unwrap();
        let gpu = block_on(GpuPrunedTable::upload(&engine, &reordered)).unwrap();
        let got = run_job(block_on(gpu.prepare_gather(&ids, Bounds::Error)).unwrap());
        assert_bits_eq(&got, &edo::cpu::gather(&full, &ids, Bounds::Error).unwrap(), &format!("reordered gather {format}"));
        let (indices, offsets) = random_bags(170, rows, 9, false, 6);
        let bags = Bags::new(&indices, &offsets).include_last_offset(true);
        let got = run_job(block_on(gpu.prepare_bag(&bags, Pooling::Max, Bounds::Error)).unwrap());
        assert_bits_eq(&got, &full.bag(&bags, Pooling::Max, Bounds::Error).unwrap(), &format!("reordered max bag {format}"));
    }
}

/// quantize → table file → memory map → GPU gather: the same rows as the in-memory table, on
/// the GPU and on the CPU, with the mapped table split into several shards.
#[test]
fn mapped_table_file_gathers_like_the_in_memory_table() {
    let Some(_) = engine() else { return };
    let Some(small_shards) = engine_with(EngineOptions { max_binding_bytes: Some(16 << 10), ..Default::default() }) else { return };
    let dir = std::env::temp_dir().join(format!("edo-gpu-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (rows, dim) = (5000, 77);
    let data = embedding_table(rows, dim, 31);
    let ids = ids_with_bad(3001, rows, 8);
    for format in Format::ALL {
        let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let path = dir.join(format!("{}.edo", format.name().replace('+', "_")));
        edo::file::TableFile::new(table.clone()).write(&path).unwrap();
        let file = edo::file::TableFile::open(&path).unwrap();
        assert!(file.table().is_mapped());
        file.verify().unwrap();
        let from_file = block_on(GpuTable::upload(&small_shards, file.table())).unwrap();
        let in_memory = block_on(GpuTable::upload(&small_shards, &table)).unwrap();
        assert!(from_file.shard_count() > 3, "{format}: {} shards", from_file.shard_count());
        let want = edo::cpu::gather(&table, &ids, Bounds::Zero).unwrap();
        assert_bits_eq(&gpu_gather(&from_file, &ids, Bounds::Zero).unwrap(), &want, &format!("{format} mapped file on the GPU"));
        assert_bits_eq(&gpu_gather(&in_memory, &ids, Bounds::Zero).unwrap(), &want, &format!("{format} in memory on the GPU"));
        assert_bits_eq(&edo::cpu::gather(file.table(), &ids, Bounds::Zero).unwrap(), &want, &format!("{format} mapped file on the CPU"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rows rewritten on the GPU in place (runs of rows, across shard boundaries, duplicates) gather
/// exactly like the updated host table, and the rest stays as it was.
#[test]
fn write_rows_updates_the_gpu_table_in_place() {
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(6144), ..Default::default() }) else { return };
    let (rows, dim) = (2000, 21);
    let data = embedding_table(rows, dim, 12);
    let fresh = embedding_table(40, dim, 13);
    for format in [Format::Int8, Format::F16, Format::Binary] {
        let mut table = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
        assert!(gpu.shard_count() > 1, "{format}: {} shards", gpu.shard_count());
        // Runs of consecutive rows that cross shard boundaries, single rows, and a duplicate.
        let ids: Vec<u32> = (95..125).chain([0, 1999, 700, 700, 1000, 1001, 1002, 5, 6, 7]).collect();
        table.update_rows(&ids, &fresh).unwrap();
        gpu.write_rows(&table, &ids).unwrap();
        let all: Vec<u32> = (0..rows as u32).collect();
        let want = edo::cpu::gather(&table, &all, Bounds::Error).unwrap();
        assert_bits_eq(&gpu_gather(&gpu, &all, Bounds::Error).unwrap(), &want, &format!("{format} after write_rows"));
        // Mismatched host tables are refused.
        let other = PackedTable::quantize(Format::F32, &data, rows, dim).unwrap();
        assert!(matches!(gpu.write_rows(&other, &[1]).map_err(Error::from), Err(Error::MixedFormats { .. })));
        assert!(matches!(gpu.write_rows(&table, &[2000]).map_err(Error::from), Err(Error::IdOutOfRange { .. })));
    }
}

/// A second handle to a table costs no GPU memory; the table lives while any handle does and is
/// freed with the last; an engine's memory budget refuses an allocation before making it.
#[test]
fn shared_handles_cost_no_table_memory_and_the_budget_holds() {
    let Some(engine) = engine_with(EngineOptions { memory_budget: Some(1 << 20), ..Default::default() }) else { return };
    let base = engine.allocated_bytes();
    let (rows, dim) = (3000, 40);
    let table = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 1), rows, dim).unwrap();
    let a = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let held = engine.allocated_bytes();
    assert_eq!(held - base, a.bytes(), "the engine holds the table's shards");
    let b = a.clone();
    assert_eq!(engine.allocated_bytes(), held, "a second handle costs no table memory");
    drop(a);
    assert_eq!(engine.allocated_bytes(), held, "the table lives while a handle does");
    let ids = uniform_ids(500, rows, 3);
    assert_bits_eq(&gpu_gather(&b, &ids, Bounds::Error).unwrap(), &edo::cpu::gather(&table, &ids, Bounds::Error).unwrap(), "through the second handle");
    // A finished lookup's buffers go idle, kept for the next lookup, still counted.
    let idle = engine.idle_bytes();
    assert!(idle > 0 && idle <= EngineOptions::default().pool_bytes, "{idle}");
    assert_eq!(engine.allocated_bytes(), held + idle, "a finished lookup gives its buffers back to the pool");
    assert_eq!(engine.release_idle_buffers(), idle);
    assert_eq!((engine.allocated_bytes(), engine.idle_bytes()), (held, 0), "released on request");
    drop(b);
    assert_eq!(engine.allocated_bytes(), base, "freed with the last handle");

    // 1.5 MiB of FP32 against a 1 MiB budget: refused, and nothing stays allocated.
    let big = PackedTable::quantize(Format::F32, &embedding_table(10_000, 40, 2), 10_000, 40).unwrap();
    match block_on(GpuTable::upload(&engine, &big)).map_err(Error::from) {
        Err(Error::LimitExceeded { what, max, .. }) => assert!(what.contains("budget") && max == 1 << 20, "{what}"),
        Ok(_) => panic!("a table over the budget was uploaded"),
        Err(e) => panic!("{e}"),
    }
    assert_eq!(engine.allocated_bytes(), base);
    // A table that fits, then a lookup whose output would not.
    let t = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let many = uniform_ids(20_000, rows, 4); // 20 000 × 40 × 4 = 3.2 MB of output
    assert!(matches!(block_on(t.gather(&many, Bounds::Error)), Err(Error::LimitExceeded { .. })));
    assert_eq!(engine.allocated_bytes() - engine.idle_bytes(), held, "the refused lookup left nothing behind");
    // Idle buffers go before the budget refuses anything: a table that fits only without them
    // is uploaded.
    assert_bits_eq(&gpu_gather(&t, &ids, Bounds::Error).unwrap(), &edo::cpu::gather(&table, &ids, Bounds::Error).unwrap(), "before a second table");
    assert!(engine.idle_bytes() > 0);
    let room = (1u64 << 20) - engine.allocated_bytes() + engine.idle_bytes();
    let fits = (room / Format::Int8.row_bytes(dim) as u64) as usize;
    let second = PackedTable::quantize(Format::Int8, &embedding_table(fits, dim, 6), fits, dim).unwrap();
    let second = block_on(GpuTable::upload(&engine, &second)).expect("the idle buffers were released to make room");
    assert_eq!(engine.idle_bytes(), 0);
    assert!(engine.allocated_bytes() <= 1 << 20);
    drop((t, second));
}
