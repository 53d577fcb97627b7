//! Static embedding models on the GPU: pooled and normalised there, equal to the CPU path's
//! vectors within the bag tolerance, for every fixture model and table format.

use super::*;
use edo::model::StaticModel;
use edo::GpuStaticModel;

fn model(name: &str) -> StaticModel {
    StaticModel::from_dir(format!("{}/tests/data/models/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn gpu_sentence_vectors_equal_the_cpu_paths() {
    let Some(engine) = engine() else { return };
    // 301 texts: the normalisation pass spans two workgroups and fills neither; some are empty.
    let words = ["the", "quick", "fox", "café", "日本語", "🙂", "", "retrieval", "zzzq", "GPU"];
    let texts: Vec<String> = (0..301).map(|i| (0..i % 13).map(|k| words[(i * 7 + k * 3) % words.len()]).collect::<Vec<_>>().join(" ")).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    for name in ["wordpiece", "bpe_f16", "unigram_vq", "wordpiece_int8", "st_wordpiece", "st_unigram"] {
        for format in [Format::F32, Format::Int8, Format::Int4] {
            let host = model(name).quantize(format).unwrap();
            let want = host.encode(&texts).unwrap();
            let gpu = block_on(GpuStaticModel::upload(&engine, &host)).unwrap();
            assert_eq!(gpu.bytes(), host.table().bytes());
            let got = run_job(block_on(gpu.prepare_encode(&texts)).unwrap());
            assert_eq!(got.len(), want.len());
            // Means of at most 12 rows within the bag bound, then a division by nearly equal norms.
            let max_abs = host.table().dequantize().iter().fold(0f32, |m, x| m.max(x.abs()));
            let scale = if host.normalize() { 1.0 } else { max_abs };
            for (i, (g, c)) in got.iter().zip(&want).enumerate() {
                assert!((g - c).abs() <= 64.0 * f32::EPSILON * scale.max(1.0), "{name} {format}: value {i}: GPU {g}, CPU {c}");
            }
            if format == Format::Int8 {
                // Reordered by these texts' tokens (`edo reorder --texts`): the same rows pooled
                // in the same order by the same kernel, so the same bits.
                let reordered = host.reorder(&edo::prune::frequency_order(&host.row_counts(&texts).unwrap())).unwrap();
                let moved = block_on(GpuStaticModel::upload(&engine, &reordered)).unwrap();
                assert_eq!(run_job(block_on(moved.prepare_encode(&texts)).unwrap()), got, "{name}: reordered, on the GPU");
            }
        }
    }
    // No texts: an empty output, no dispatch.
    let gpu = block_on(GpuStaticModel::upload(&engine, &model("wordpiece"))).unwrap();
    assert_eq!(block_on(gpu.encode(&[])).unwrap().rows(), 0);
}

#[test]
fn prepare_model_compiles_what_the_first_embedding_uses_and_a_large_batch_its_own_shape() {
    // An engine of its own: the shared one has compiled other tests' pipelines.
    let Some(engine) = engine_with(EngineOptions::default()) else { return };
    let dir = |name: &str| format!("{}/tests/data/models/{name}", env!("CARGO_MANIFEST_DIR"));
    let file = |name: &str, f: &str| std::fs::read(format!("{}/{f}", dir(name))).unwrap();
    // Dims 16 (four values a step) and 7 (one), normalised or not, three decoders.
    let matryoshka = StaticModel::from_wordllama(&file("wordpiece", "tokenizer.json"), &file("wordpiece", "model.safetensors"), Some(7)).unwrap();
    // FP16 at dim 16: the bag that reads eight halves a load; INT8 at dim 16 with rows aligned to
    // 16 bytes: the bag that reads sixteen codes a load, which packed rows do not use.
    const PACKED: usize = edo::format::NO_ROW_ALIGNMENT;
    for (host, format, alignment) in [
        (model("wordpiece"), Format::F32, PACKED),
        (model("unigram_vq"), Format::Int4, PACKED),
        (matryoshka, Format::Q8_0, PACKED),
        (model("wordpiece"), Format::F16, PACKED),
        (model("wordpiece"), Format::Int8, 16),
    ] {
        let host = host.quantize(format).unwrap().with_row_alignment(alignment).unwrap();
        assert_eq!(host.table().row_alignment(), alignment);
        if alignment != PACKED {
            block_on(engine.prepare_model(format, host.dim(), PACKED)).unwrap();
            let packed = engine.pipeline_count();
            block_on(engine.prepare_model(format, host.dim(), alignment)).unwrap();
            assert!(engine.pipeline_count() > packed, "{format}: aligned rows take a bag kernel of their own");
        }
        block_on(engine.prepare_model(format, host.dim(), alignment)).unwrap();
        let compiled = engine.pipeline_count();
        let gpu = block_on(GpuStaticModel::upload(&engine, &host)).unwrap();
        let got = block_on(gpu.encode(&["naïve café", "the quick fox"])).unwrap().read_blocking().unwrap();
        assert_eq!(got.len(), 2 * host.dim());
        assert_eq!(
            engine.pipeline_count(),
            compiled,
            "{format} dim {} aligned to {alignment}: the first embedding compiled a kernel prepare_model had not",
            host.dim()
        );
        if format == Format::F32 {
            // A large batch (32 768 bags at dim 16, a lane each: exactly the 32 768 lanes where a
            // batch stops being small) compiles its own shape of the bag kernel, once.
            let texts = vec!["fox"; 1 << 15];
            for _ in 0..2 {
                assert_eq!(block_on(gpu.encode(&texts)).unwrap().rows(), texts.len());
                assert_eq!(engine.pipeline_count(), compiled + 1, "a large batch's bag shape, compiled at its first use");
            }
        }
    }
}
