//! `Backend` and `Placed`: the same verbs on a GPU and on the CPU path, with the same results.

use super::*;
use edo::cache::PolicyKind;
use edo::gpu::CacheSpec;
use edo::model::StaticModel;
use edo::{AsyncLookup, Backend, GpuCache, GpuCodes, GpuStaticModel, Placed, RecoveringEngine};
use std::sync::Arc;

/// A GPU backend on its own engine with small shards (every table spans several), and the CPU one.
fn backends() -> Option<(Backend, Backend)> {
    let engine = engine_with(EngineOptions { max_binding_bytes: Some(64 << 10), ..Default::default() })?;
    Some((Backend::Gpu(RecoveringEngine::new(engine)), Backend::cpu("asked for")))
}

#[test]
fn placed_tables_give_the_same_rows_on_the_gpu_and_the_cpu_path() {
    let Some((gpu, cpu)) = backends() else { return };
    assert_eq!((gpu.name(), cpu.name()), ("gpu", "cpu"));
    assert!(gpu.engine().is_some() && cpu.engine().is_none());
    assert_eq!(cpu.note(), "asked for");
    let (rows, dim) = (5003, 37);
    let f32s = embedding_table(rows, dim, 3);
    let int8 = PackedTable::quantize(Format::Int8, &f32s, rows, dim).unwrap();
    let ids = ids_with_bad(2049, rows, 5);
    let (indices, offsets) = random_bags(301, rows, 9, false, 6);
    let bags = Bags::new(&indices, &offsets);
    let max_abs = f32s.iter().fold(0f32, |m, x| m.max(x.abs()));

    let on_gpu = block_on(gpu.place::<GpuTable>(int8.clone())).unwrap();
    let on_cpu = block_on(cpu.place::<GpuTable>(int8.clone())).unwrap();
    assert_eq!((on_gpu.backend(), on_cpu.backend()), ("gpu", "cpu"));
    assert!(matches!(on_gpu, Placed::Gpu(_)) && matches!(on_cpu, Placed::Cpu(_)));
    assert_eq!((on_gpu.rows(), on_gpu.dim(), on_cpu.rows(), on_cpu.dim()), (rows, dim, rows, dim));
    let want = edo::cpu::gather(&int8, &ids, Bounds::Zero).unwrap();
    assert_bits_eq(&block_on(on_gpu.gather(&ids, Bounds::Zero)).unwrap(), &want, "gather on the GPU");
    assert_bits_eq(&block_on(on_cpu.gather(&ids, Bounds::Zero)).unwrap(), &want, "gather on the CPU path");
    let f16 = block_on(on_gpu.gather_f16(&ids, Bounds::Zero)).unwrap();
    assert_eq!(f16, block_on(on_cpu.gather_f16(&ids, Bounds::Zero)).unwrap(), "f16 gathers");
    for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
        let g = block_on(on_gpu.bag(&bags, pooling, Bounds::Error)).unwrap();
        let c = block_on(on_cpu.bag(&bags, pooling, Bounds::Error)).unwrap();
        assert_pooled_close(&g, &c, 9.0, max_abs, pooling == Pooling::Max, &format!("{pooling:?} bags"));
    }
    let g16 = block_on(on_gpu.bag_f16(&bags, Pooling::Sum, Bounds::Error)).unwrap();
    assert_eq!(g16.len(), block_on(on_cpu.bag_f16(&bags, Pooling::Sum, Bounds::Error)).unwrap().len());
    // A bad id is the same error on both.
    let bad = [0, rows as u32];
    for placed in [&on_gpu, &on_cpu] {
        assert!(matches!(block_on(placed.gather(&bad, Bounds::Error)), Err(Error::IdOutOfRange { .. })), "{}", placed.backend());
    }

    // A pruned table, through the closed enum.
    let keep: Vec<bool> = (0..rows).map(|r| r % 4 != 1).collect();
    let pruned = AnyTable::from(PrunedTable::quantize(Format::F16, &f32s, rows, dim, &keep).unwrap());
    let g = block_on(gpu.place::<AnyGpuTable>(pruned.clone())).unwrap();
    let c = block_on(cpu.place::<AnyGpuTable>(pruned.clone())).unwrap();
    assert_bits_eq(&block_on(g.gather(&ids, Bounds::Zero)).unwrap(), &block_on(c.gather(&ids, Bounds::Zero)).unwrap(), "pruned gathers");

    // A cache: rows through the cache on the GPU, from the source on the CPU path.
    let spec = CacheSpec { source: Arc::new(int8.clone()), capacity: 500, policy: PolicyKind::Lfu };
    let g = block_on(gpu.place::<GpuCache<Arc<PackedTable>>>(spec.clone())).unwrap();
    let c = block_on(cpu.place::<GpuCache<Arc<PackedTable>>>(spec)).unwrap();
    for round in 0..3u64 {
        let ids = ids_with_bad(1500, rows, 40 + round);
        let want = edo::cpu::gather(&int8, &ids, Bounds::Clamp).unwrap();
        assert_bits_eq(&block_on(g.gather(&ids, Bounds::Clamp)).unwrap(), &want, "cached gather");
        assert_bits_eq(&block_on(c.gather(&ids, Bounds::Clamp)).unwrap(), &want, "cache's source gather on the CPU path");
    }
    // Bags through the cache: on the CPU path the resident CPU bag bit for bit, on the GPU within
    // the GPU bags' documented bound of it.
    let (indices, offsets) = random_bags(301, rows, 13, true, 60);
    let bags = edo::Bags::new(&indices, &offsets).include_last_offset(true);
    let max_abs = int8.dequantize().iter().fold(0f32, |m, x| m.max(x.abs()));
    for pooling in [edo::Pooling::Sum, edo::Pooling::Mean, edo::Pooling::Max] {
        let want = edo::cpu::embedding_bag(&int8, &bags, pooling, Bounds::Clamp).unwrap();
        assert_bits_eq(&block_on(c.bag(&bags, pooling, Bounds::Clamp)).unwrap(), &want, "cached bag on the CPU path");
        let exact = pooling == edo::Pooling::Max;
        assert_pooled_close(&block_on(g.bag(&bags, pooling, Bounds::Clamp)).unwrap(), &want, 13.0, max_abs, exact, "cached bag on the GPU");
    }
    assert!(matches!(block_on(c.bag(&edo::Bags::new(&bad, &[0]), edo::Pooling::Sum, Bounds::Error)), Err(Error::IdOutOfRange { .. })));
    assert!(block_on(g.prefetch(&[1, 2, 3])).unwrap() <= 3);
    // The CPU path's cache stages a prefetch too (rows it holds are not read).
    let staged = block_on(c.prefetch(&[1, 2, 3])).unwrap();
    assert!(staged <= 3);
    assert_eq!(c.stats().prefetched, staged as u64);
    assert!(matches!(block_on(c.gather(&bad, Bounds::Error)), Err(Error::IdOutOfRange { .. })));
}

#[test]
fn placed_codes_and_models_search_and_embed_alike_on_both() {
    let Some((gpu, cpu)) = backends() else { return };
    let (rows, dim) = (3001, 96);
    let f32s = embedding_table(rows, dim, 8);
    let bits = PackedTable::quantize(Format::Binary, &f32s, rows, dim).unwrap();
    let int8 = PackedTable::quantize(Format::Int8, &f32s, rows, dim).unwrap();
    let queries = embedding_table(33, dim, 9);
    let q = edo::search::binarize(&queries, dim).unwrap();

    let (gc, cc) = (block_on(gpu.place::<GpuCodes>(bits.clone())).unwrap(), block_on(cpu.place::<GpuCodes>(bits.clone())).unwrap());
    let (g, c) = (block_on(gc.hamming_topk(&q, 10)).unwrap(), block_on(cc.hamming_topk(&q, 10)).unwrap());
    assert_eq!((g.ids, g.distances), (c.ids, c.distances), "Hamming top-10");
    let (gt, ct) = (block_on(gpu.place::<GpuTable>(int8.clone())).unwrap(), block_on(cpu.place::<GpuTable>(int8.clone())).unwrap());
    let (g, c) = (block_on(gc.search_rescored(&queries, &gt, 10, 4)).unwrap(), block_on(cc.search_rescored(&queries, &ct, 10, 4)).unwrap());
    assert_eq!(g.ids, c.ids, "rescored ids");
    for (a, b) in g.scores.iter().zip(&c.scores) {
        assert!((a - b).abs() <= 1e-4 * a.abs().max(1.0), "rescored scores {a} vs {b}");
    }
    // The rows to rescore with must be on the codes' backend.
    assert!(matches!(block_on(gc.search_rescored(&queries, &ct, 10, 4)), Err(Error::Unsupported { .. })));
    // Codes that are not binary: the CPU path refuses them as the GPU upload does.
    let g = block_on(gpu.place::<GpuCodes>(int8.clone())).err().expect("the GPU refuses INT8 codes");
    let c = block_on(cpu.place::<GpuCodes>(int8.clone())).err().expect("the CPU path refuses INT8 codes");
    assert_eq!(g.to_string(), c.to_string());

    // A model: the GPU's vectors equal the CPU path's within the bag bound (normalised).
    let model = StaticModel::from_dir(format!("{}/tests/data/models/wordpiece", env!("CARGO_MANIFEST_DIR"))).unwrap().quantize(Format::Int8).unwrap();
    let texts: Vec<String> = (0..77).map(|i| format!("query {i} about café, 日本語 and retrieval {}", "x".repeat(i % 7))).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let (gm, cm) = (block_on(gpu.place::<GpuStaticModel>(model.clone())).unwrap(), block_on(cpu.place::<GpuStaticModel>(model.clone())).unwrap());
    assert_eq!(gm.model().dim(), cm.model().dim());
    let (g, c) = (block_on(gm.encode(&texts)).unwrap(), block_on(cm.encode(&texts)).unwrap());
    assert_eq!(c, model.encode(&texts).unwrap());
    assert_eq!(g.len(), c.len());
    for (i, (a, b)) in g.iter().zip(&c).enumerate() {
        assert!((a - b).abs() <= 64.0 * f32::EPSILON, "value {i}: GPU {a}, CPU {b}");
    }
}

#[test]
fn backend_new_picks_the_gpu_when_there_is_one() {
    let Some(engine) = engine() else { return };
    let backend = block_on(Backend::new(EngineOptions::default()));
    assert_eq!(backend.name(), "gpu", "{backend:?}");
    assert_eq!(backend.note(), engine.adapter().to_string());
}
