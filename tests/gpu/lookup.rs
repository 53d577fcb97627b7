//! One lookup interface: every kind gathers and bags through GpuLookup, and the planner's choice
//! is a table to look up.

use super::hashing::random_ids;
use super::*;

/// Pools on the GPU through the trait into a sentinel-filled output.
fn gpu_bag<T: GpuLookup>(table: &T, bags: &Bags<'_>, pooling: Pooling, bounds: Bounds) -> Vec<f32> {
    run_job(block_on(table.prepare_bag(bags, pooling, bounds)).unwrap())
}

#[test]
fn every_kind_gathers_and_bags_through_one_interface() {
    // 3 KiB shards and bindings: the dense rows of a bag's indices span several parts too.
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(3 << 10), ..Default::default() }) else { return };
    let (rows, dim) = (900, 20);
    let data = embedding_table(rows, dim, 8);
    let keep: Vec<bool> = (0..rows).map(|r| r % 5 != 2).collect();
    let hot: Vec<u32> = (0..rows as u32).filter(|r| r % 7 == 0).collect();
    let kinds: Vec<AnyTable> = vec![
        PackedTable::quantize(Format::Int4, &data, rows, dim).unwrap().into(),
        edo::PrunedTable::quantize(Format::Int8, &data, rows, dim, &keep).unwrap().into(),
        edo::MixedTable::quantize(&data, rows, dim, &hot, Format::F16, Format::Int4).unwrap().into(),
    ];
    // 301 bags (several workgroups, no multiple of one), some empty, some with bad indices.
    let (indices, offsets) = random_bags(301, rows, 17, true, 4);
    let weights: Vec<f32> = (0..indices.len()).map(|i| 0.25 + (i % 7) as f32 * 0.5).collect();
    let max_abs = data.iter().fold(0f32, |m, x| m.max(x.abs())) * 1.1;
    for host in &kinds {
        let gpu: AnyGpuTable = block_on(AnyGpuTable::upload(&engine, host)).unwrap();
        assert_eq!((gpu.rows(), gpu.dim()), (host.rows(), host.dim()));
        let name = match host {
            AnyTable::Dense(_) => "dense",
            AnyTable::Pruned(_) => "pruned",
            AnyTable::Mixed(_) => "mixed",
        };
        let ids = ids_with_bad(1234, rows, 9);
        // The same ids as 64-bit keys, the bad ones past u32 too: the same rows.
        let keys: Vec<u64> = ids.iter().map(|&i| if i as usize >= rows { u64::from(i) << 8 } else { u64::from(i) }).collect();
        for bounds in [Bounds::Zero, Bounds::Clamp] {
            let job = block_on(gpu.prepare_gather(&ids, bounds)).unwrap();
            assert_bits_eq(&run_job(job), &host.gather(&ids, bounds).unwrap(), &format!("{name} gather {bounds:?}"));
            let job = block_on(gpu.prepare(&edo::Request::gather_keys(&keys, bounds))).unwrap();
            assert_bits_eq(&run_job(job), &host.gather(&ids, bounds).unwrap(), &format!("{name} keys {bounds:?}"));
            for (pooling, weighted) in [(Pooling::Sum, true), (Pooling::Mean, false), (Pooling::Max, false), (Pooling::None, true)] {
                let mut bags = Bags::new(&indices, &offsets).include_last_offset(true);
                if weighted {
                    bags = bags.weights(&weights);
                }
                let want = host.bag(&bags, pooling, bounds).unwrap();
                let got = gpu_bag(&gpu, &bags, pooling, bounds);
                assert_pooled_close(&got, &want, 17.0 * 3.5, max_abs, pooling == Pooling::Max, &format!("{name} {pooling:?} {bounds:?}"));
            }
        }
        // Refused before any work, with the index of the first bad id.
        let bags = Bags::new(&indices, &offsets).include_last_offset(true);
        let first_bad = indices.iter().position(|&i| i as usize >= rows).unwrap();
        assert!(matches!(block_on(gpu.bag(&bags, Pooling::Sum, Bounds::Error)), Err(Error::IdOutOfRange { index, .. }) if index == first_bad), "{name}");
        assert!(matches!(host.bag(&bags, Pooling::Sum, Bounds::Error), Err(Error::IdOutOfRange { index, .. }) if index == first_bad), "{name}");
    }
}

#[test]
fn mixed_bags_equal_the_fused_bags_of_the_whole_table() {
    // All rows hot: the mixed table's bag (gather, then pool) must equal the fused bag kernel's
    // of the same format, the same values in the same order.
    let Some(engine) = engine() else { return };
    let (rows, dim) = (500, 12);
    let data = embedding_table(rows, dim, 3);
    let all: Vec<u32> = (0..rows as u32).collect();
    let mixed = edo::MixedTable::quantize(&data, rows, dim, &all, Format::Int8, Format::Int4).unwrap();
    let whole = PackedTable::quantize(Format::Int8, &data, rows, dim).unwrap();
    let (indices, offsets) = random_bags(200, rows, 9, false, 2);
    let bags = Bags::new(&indices, &offsets).include_last_offset(true);
    for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
        let host_mixed = Lookup::bag(&mixed, &bags, pooling, Bounds::Error).unwrap();
        assert_bits_eq(&host_mixed, &Lookup::bag(&whole, &bags, pooling, Bounds::Error).unwrap(), &format!("CPU {pooling:?}"));
        let gpu_mixed = block_on(edo::GpuMixedTable::upload(&engine, &mixed)).unwrap();
        let gpu_whole = block_on(GpuTable::upload(&engine, &whole)).unwrap();
        assert_bits_eq(&gpu_bag(&gpu_mixed, &bags, pooling, Bounds::Error), &gpu_bag(&gpu_whole, &bags, pooling, Bounds::Error), &format!("GPU {pooling:?}"));
    }
}

#[test]
fn cache_and_qr_bags_equal_their_oracles() {
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(4 << 10), ..Default::default() }) else { return };
    let (rows, dim) = (3000, 16);
    let host = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 5), rows, dim).unwrap();
    let max_abs = host.dequantize().iter().fold(0f32, |m, x| m.max(x.abs()));
    // 200 slots for bags over 3000 rows: every call evicts, and runs in parts.
    let cache = block_on(edo::GpuCache::new(&engine, host.clone(), 200, edo::cache::PolicyKind::Lru.build())).unwrap();
    for seed in 0..3 {
        let (indices, offsets) = random_bags(157, rows, 12, true, 30 + seed);
        let bags = Bags::new(&indices, &offsets).include_last_offset(true);
        for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
            let want = Lookup::bag(&host, &bags, pooling, Bounds::Zero).unwrap();
            let got = block_on(cache.bag(&bags, pooling, Bounds::Zero)).unwrap().read_blocking().unwrap();
            assert_pooled_close(&got, &want, 12.0, max_abs, pooling == Pooling::Max, &format!("cache {pooling:?}"));
        }
    }
    let bad = [1u32, 3000];
    assert!(matches!(block_on(cache.bag(&Bags::new(&bad, &[0]), Pooling::Sum, Bounds::Error)), Err(Error::IdOutOfRange { index: 1, .. })));
    // Bags with no index at all: the gathered rows are an empty buffer, pooled by the FP32 bag
    // (dim a multiple of 4) into zeros.
    for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
        let got = block_on(cache.bag(&Bags::new(&[] as &[u32], &[0, 0, 0]), pooling, Bounds::Error)).unwrap().read_blocking().unwrap();
        assert_eq!(got, vec![0.0; 3 * dim], "empty bags {pooling:?}");
    }

    let m = 97;
    let quotient = PackedTable::quantize(Format::F16, &embedding_table(40, dim, 6), 40, dim).unwrap();
    let remainder = PackedTable::quantize(Format::F16, &embedding_table(m, dim, 7), m, dim).unwrap();
    let qr = block_on(edo::GpuQrTables::upload(&engine, &quotient, &remainder)).unwrap();
    assert_eq!((qr.dim(), qr.ids()), (dim, 40 * m as u64));
    let ids: Vec<u64> = random_ids(700, 11).into_iter().map(|i| i % (45 * m as u64)).collect();
    let offsets: Vec<u32> = (0..ids.len() as u32).step_by(9).collect();
    let bags = Bags::new(&ids, &offsets);
    for combine in [edo::qr::QrCombine::Mult, edo::qr::QrCombine::Add, edo::qr::QrCombine::Concat] {
        for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
            let want = edo::qr::bag(&quotient, &remainder, &bags, combine, pooling, Bounds::Zero).unwrap();
            let got = run_job(block_on(qr.prepare_bag(&bags, combine, pooling, Bounds::Zero)).unwrap());
            assert_pooled_close(&got, &want, 9.0, 4.0, pooling == Pooling::Max, &format!("qr {combine:?} {pooling:?}"));
        }
    }
    // The kind over the two tables answers every request as the CPU path's kind: 64-bit and
    // u32 ids, f16 rows, bags.
    for combine in [edo::qr::QrCombine::Mult, edo::qr::QrCombine::Concat] {
        let host = edo::QrTable::new(quotient.clone(), remainder.clone(), combine).unwrap();
        let kind = block_on(edo::GpuQrTable::upload(&engine, &host)).unwrap();
        assert_eq!((kind.rows(), kind.dim()), (host.rows(), host.dim()));
        let small: Vec<u32> = ids.iter().map(|&i| i as u32).collect();
        for bounds in [Bounds::Zero, Bounds::Clamp] {
            for request in [edo::Request::gather_keys(&ids, bounds), edo::Request::gather(&small, bounds).element(edo::Element::F16)] {
                let got = block_on(kind.lookup_host(&request)).unwrap();
                assert_eq!(got, host.lookup(&request).unwrap(), "{combine:?} {bounds:?} {request:?}");
            }
            let got = block_on(kind.lookup_host(&edo::Request::bag_keys(&bags, Pooling::Mean, bounds))).unwrap().into_f32();
            let want = host.lookup(&edo::Request::bag_keys(&bags, Pooling::Mean, bounds)).unwrap().into_f32();
            assert_pooled_close(&got, &want, 9.0, 4.0, false, &format!("qr kind {combine:?} {bounds:?}"));
        }
    }
    let beyond = ids.iter().position(|&i| i >= 40 * m as u64).unwrap();
    assert!(
        matches!(block_on(qr.bag(&bags, edo::qr::QrCombine::Mult, Pooling::Sum, Bounds::Error)), Err(Error::IdOutOfRange64 { index, .. }) if index == beyond)
    );
}

#[test]
fn the_planners_choice_is_a_table_to_look_up() {
    use edo::plan::{Access, Choice};
    let Some(engine) = engine() else { return };
    let (rows, dim) = (600, 8);
    let data = embedding_table(rows, dim, 12);
    let ids = ids_with_bad(333, rows, 1);
    for (choice, access) in [
        (Choice::Resident { format: Format::Int8 }, Access::Uniform),
        (Choice::Cached { format: Format::F16, capacity: 50 }, Access::Zipf(1.1)),
        (Choice::Mixed { hot: Format::F16, cold: Format::Int4, hot_rows: 40 }, Access::Zipf(1.1)),
        (Choice::Mixed { hot: Format::F32, cold: Format::BinaryScaled, hot_rows: 3 }, Access::Counts((0..rows as u64).map(|r| r % 50).collect())),
    ] {
        let table = choice.build(&data, rows, dim, &access).unwrap();
        let gpu = block_on(choice.upload(&engine, table.clone())).unwrap();
        match (&gpu, choice.cache_capacity()) {
            (AnyGpuTable::Cached(cache), Some(capacity)) => assert_eq!(cache.max_capacity(), capacity, "{choice}"),
            (_, None) => assert_eq!(gpu.bytes(), Lookup::bytes(&table), "{choice}"),
            _ => panic!("{choice}: a cached choice is uploaded as a cache"),
        }
        let job = block_on(gpu.prepare_gather(&ids, Bounds::Zero)).unwrap();
        assert_bits_eq(&run_job(job), &table.gather(&ids, Bounds::Zero).unwrap(), &format!("{choice}"));
        assert_eq!(choice.cache_capacity().is_some(), matches!(choice, Choice::Cached { .. }));
        if let (AnyTable::Mixed(m), Access::Zipf(_)) = (&table, &access) {
            assert!(m.locate(0).0 && !m.locate(rows - 1).0, "{choice}: the first rows are the hot ones under Zipf");
        }
    }
}

/// One hashed table as a kind on the GPU answers every request as the CPU path's kind: gathers
/// of 64-bit and u32 ids bit for bit (f16 rounded from the same values), bags within the bound.
#[test]
fn a_hashed_table_kind_equals_its_cpu_twin() {
    use edo::hash::HashSpec;
    use edo::{Element, GpuHashedTable, HashedTable, HostRows, Request};
    let Some(engine) = engine() else { return };
    let dim = 20;
    let keys: Vec<u64> = random_ids(1500, 3);
    let small: Vec<u32> = keys.iter().map(|&k| k as u32).collect();
    let offsets: Vec<u32> = (0..keys.len() as u32).step_by(11).collect();
    for k in [1, 3] {
        let spec = HashSpec::new(977, k).with_hot(vec![keys[5], keys[600]]);
        let table = PackedTable::quantize(Format::Int4, &embedding_table(spec.rows(), dim, 4), spec.rows(), dim).unwrap();
        let host = HashedTable::new(table, spec).unwrap();
        let gpu = block_on(GpuHashedTable::upload(&engine, &host)).unwrap();
        assert_eq!((gpu.rows(), gpu.dim()), (host.rows(), host.dim()));
        for request in [Request::gather_keys(&keys, Bounds::Error), Request::gather(&small, Bounds::Zero)] {
            let HostRows::F32(want) = host.lookup(&request).unwrap() else { panic!("f32 rows") };
            let job = block_on(gpu.prepare(&request)).unwrap();
            assert_bits_eq(&run_job(job), &want, &format!("k {k} {request:?}"));
            let f16 = block_on(gpu.lookup_host(&request.element(Element::F16))).unwrap();
            assert_eq!(f16, host.lookup(&request.element(Element::F16)).unwrap(), "k {k} f16");
        }
        let bags = Bags::new(&keys, &offsets);
        let want = host.lookup(&Request::bag_keys(&bags, Pooling::Sum, Bounds::Zero)).unwrap().into_f32();
        let got = block_on(gpu.lookup_host(&Request::bag_keys(&bags, Pooling::Sum, Bounds::Zero))).unwrap().into_f32();
        assert_pooled_close(&got, &want, 11.0 * k as f32, 1.0, false, &format!("k {k} bags"));
    }
}
