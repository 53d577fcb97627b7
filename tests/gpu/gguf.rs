//! A real GGUF table on the GPU: Gemma-3-270M's Q8_0 token embeddings (the chunk
//! `scripts/fixtures/gguf_reference.sh` fetches), gathered and bagged as the `gguf` package decodes them.

use super::*;
use edo::file::gguf::{Gguf, EMBEDDING_TENSOR};
use edo::file::import::Table;

#[test]
fn real_q8_0_rows_gather_on_the_gpu_as_the_gguf_package_decodes_them() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/gguf");
    if !dir.join("expected.json").is_file() {
        eprintln!("SKIPPED: no real GGUF reference (run scripts/fixtures/gguf_reference.sh; it needs PyPI)");
        return;
    }
    let Some(engine) = engine() else { return };
    let file = dir.join("gemma-3-270m-part00.gguf");
    let map = std::fs::read(&file).unwrap();
    let g = Gguf::parse(&map).unwrap();
    let present = g.present_rows(g.tensor(EMBEDDING_TENSOR).unwrap());
    let Table::Packed(table) = g.table_rows(&map, EMBEDDING_TENSOR, 0..present).unwrap().table else { panic!("Q8_0 read as floats") };
    let read_npy = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let ids_npy = read_npy("token_embd.ids.npy");
    let ids: Vec<u32> = edo::file::npy::read(&ids_npy).unwrap().data.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).collect();
    let want_npy = read_npy("token_embd.dequantized.npy");
    let want: Vec<f32> = edo::file::npy::read(&want_npy).unwrap().data.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    assert_bits_eq(&gpu_gather(&gpu, &ids, Bounds::Error).unwrap(), &want, "Gemma token_embd.weight rows (Q8_0) on the GPU");
    // Bags of real rows: the GPU's sums are the CPU path's.
    let mut offsets: Vec<u32> = (0..ids.len() as u32).step_by(7).collect();
    offsets.push(ids.len() as u32);
    let bags = Bags::new(&ids, &offsets).include_last_offset(true);
    let max_abs = want.iter().fold(0f32, |m, x| m.max(x.abs()));
    for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
        let cpu = edo::cpu::embedding_bag(&table, &bags, pooling, Bounds::Error).unwrap();
        let got = run_job(block_on(gpu.prepare_bag(&bags, pooling, Bounds::Error)).unwrap());
        assert_pooled_close(&got, &cpu, 7.0, max_abs, pooling == Pooling::Max, &format!("Gemma bags, {pooling:?}"));
    }
}

/// k-quant super-blocks with hard fp16 scales (the fixture's random blocks, subnormal and ±65504
/// scales among them) gather on the GPU as the `gguf` package decodes them, bit for bit.
#[test]
fn k_quant_blocks_gather_on_the_gpu_as_the_gguf_package_decodes_them() {
    let Some(engine) = engine() else { return };
    let bytes = std::fs::read(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ggml/blocks.gguf")).unwrap();
    let g = Gguf::parse(&bytes).unwrap();
    for format in [Format::Q4K, Format::Q6K] {
        let Table::Packed(table) = g.table(&bytes, format.name()).unwrap().table else { panic!("{format} read as floats") };
        let want = match g.table(&bytes, &format!("{format}.dequantized")).unwrap().table {
            Table::Dense { data, .. } => data,
            Table::Packed(_) => unreachable!(),
        };
        let ids: Vec<u32> = (0..table.rows() as u32).rev().chain(0..table.rows() as u32).collect();
        let want: Vec<f32> = ids.iter().flat_map(|&i| want[i as usize * 512..][..512].to_vec()).collect();
        let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
        assert_bits_eq(&gpu_gather(&gpu, &ids, Bounds::Error).unwrap(), &want, &format!("{format} fixture rows on the GPU"));
    }
}
