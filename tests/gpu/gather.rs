//! Gathers against the CPU oracle: every format and bounds policy, sharded and not, past the
//! 65 535-workgroup grid, and the output left on the GPU for the caller.

use super::*;

/// Every format × bounds policy × id counts that span many workgroups and are no multiple of the
/// workgroup size, on dims that are multiples of nothing in particular; exact equality.
fn check_against_oracle(engine: &Engine, rows: usize, dims: &[usize], counts: &[usize], expect_many_shards: bool) {
    for &dim in dims {
        let data = embedding_table(rows, dim, 40 + dim as u64);
        for format in Format::ALL {
            let table = PackedTable::quantize(format, &data, rows, dim).unwrap();
            let gpu = block_on(GpuTable::upload(engine, &table)).unwrap();
            assert_eq!(gpu.bytes(), table.bytes(), "{format}: the GPU holds exactly the packed words");
            let rows_per_shard = engine.max_binding_bytes() as usize / format.row_bytes(dim);
            assert_eq!(gpu.shard_count(), rows.div_ceil(rows_per_shard), "{format} dim {dim}");
            assert_eq!(gpu.shard_count() > 1, expect_many_shards, "{format} dim {dim}: {} shards", gpu.shard_count());
            for &n in counts {
                for bounds in [Bounds::Error, Bounds::Zero, Bounds::Clamp] {
                    let ids = if bounds == Bounds::Error { uniform_ids(n, rows, n as u64) } else { ids_with_bad(n, rows, n as u64) };
                    let want = edo::cpu::gather(&table, &ids, bounds).unwrap();
                    let got = gpu_gather(&gpu, &ids, bounds).unwrap();
                    assert_bits_eq(&got, &want, &format!("{format} dim {dim} ids {n} {bounds:?} shards {}", gpu.shard_count()));
                }
            }
        }
    }
}

#[test]
fn gather_matches_the_cpu_oracle_in_one_shard() {
    let Some(engine) = engine() else { return };
    check_against_oracle(&engine, 3001, &[1, 7, 100, 129], &[1, 67, 2049, 10_007], false);
}

#[test]
fn gather_matches_the_cpu_oracle_across_many_shards_and_output_chunks() {
    // 4 KiB bindings: tables of a few KiB to a few hundred KiB become 3 to 100 shards, and the
    // output of one lookup is split over many dispatches at aligned offsets.
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(4 << 10), ..Default::default() }) else { return };
    check_against_oracle(&engine, 2500, &[3, 40], &[1, 333, 4099], true);
}

#[test]
fn gather_uses_a_two_dimensional_grid_past_65535_workgroups() {
    // One id per workgroup: 70 001 ids need more than 65 535 workgroups in x.
    let Some(engine) = engine_with(EngineOptions { workgroup_size: 1, ..Default::default() }) else { return };
    for dim in [2, 8, 19] {
        let rows = 5000;
        let data = embedding_table(rows, dim, 3);
        let table = PackedTable::quantize(Format::Int8, &data, rows, dim).unwrap();
        let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
        let ids = ids_with_bad(70_001, rows, 4);
        let want = edo::cpu::gather(&table, &ids, Bounds::Zero).unwrap();
        assert_bits_eq(&gpu_gather(&gpu, &ids, Bounds::Zero).unwrap(), &want, &format!("2-D grid, dim {dim}"));
    }
    // fill writes an output of more values (1.33 M) than its host block holds, every one.
    let table = PackedTable::quantize(Format::F16, &embedding_table(10, 19, 3), 10, 19).unwrap();
    let job = block_on(block_on(GpuTable::upload(&engine, &table)).unwrap().prepare_gather(&vec![1; 70_001], Bounds::Error)).unwrap();
    job.output().fill(SENTINEL).unwrap();
    assert!(job.output().read_blocking().unwrap().iter().all(|&v| v == SENTINEL));
}

#[test]
fn out_of_range_ids_are_refused_before_any_work() {
    let Some(engine) = engine() else { return };
    let table = PackedTable::quantize(Format::Int4, &embedding_table(10, 9, 1), 10, 9).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let err = block_on(gpu.gather(&[0, 9, 10, 11], Bounds::Error)).err();
    assert_eq!(err, Some(Error::IdOutOfRange { index: 2, id: 10, rows: 10 }));
}

#[test]
fn empty_lookups_and_empty_tables() {
    let Some(engine) = engine() else { return };
    let table = PackedTable::quantize(Format::Int8, &embedding_table(10, 5, 1), 10, 5).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    assert_eq!(gpu_gather(&gpu, &[], Bounds::Error).unwrap(), Vec::<f32>::new());

    let empty = PackedTable::quantize(Format::Int8, &[], 0, 5).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &empty)).unwrap();
    assert_eq!(gpu.rows(), 0);
    assert_bits_eq(&gpu_gather(&gpu, &[0, 3], Bounds::Zero).unwrap(), &[0.0; 10], "empty table, Zero");
    assert!(matches!(gpu_gather(&gpu, &[0], Bounds::Error), Err(Error::IdOutOfRange { index: 0, id: 0, rows: 0 })));
    assert!(matches!(gpu_gather(&gpu, &[0], Bounds::Clamp), Err(Error::IdOutOfRange { .. })));
}

#[test]
fn a_row_larger_than_a_binding_is_a_limit_error() {
    let Some(engine) = engine_with(EngineOptions { max_binding_bytes: Some(256), ..Default::default() }) else { return };
    let table = PackedTable::quantize(Format::F32, &vec![1.0; 100], 1, 100).unwrap();
    match block_on(GpuTable::upload(&engine, &table)).map_err(Error::from) {
        Err(Error::LimitExceeded { what, requested: 400, max: 256 }) => assert!(what.contains("row")),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a 400-byte row cannot fit a 256-byte binding"),
    }
}

#[test]
fn the_output_stays_on_the_gpu_for_the_callers_pipelines() {
    let Some(engine) = engine() else { return };
    let table = PackedTable::quantize(Format::F16, &embedding_table(50, 6, 2), 50, 6).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let rows = block_on(gpu.gather(&[1, 2, 3], Bounds::Error)).unwrap();
    assert_eq!((rows.rows(), rows.dim()), (3, 6));
    assert_eq!(rows.buffer().size(), 3 * 6 * 4);
    assert!(rows.buffer().usage().contains(wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC));
    // A caller's copy out of the buffer sees the rows.
    let copy = engine.device().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 72,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut enc = engine.device().create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(rows.buffer(), 0, &copy, 0, 72);
    engine.queue().submit([enc.finish()]);
    copy.slice(..).map_async(wgpu::MapMode::Read, |r| r.unwrap());
    engine.wait_idle().unwrap();
    let bytes = copy.slice(..).get_mapped_range().unwrap().to_vec();
    let want = edo::cpu::gather(&table, &[1, 2, 3], Bounds::Error).unwrap();
    assert_bits_eq(bytemuck::cast_slice(&bytes), &want, "caller's copy");
}

/// FP8 rows with hard values (tiny, huge, signed zeros, an outlier: subnormal codes and both
/// zeros among them) gather on the GPU as ml_dtypes decodes them (the fixture of core/tests/fp8.rs).
#[test]
fn fp8_fixture_rows_gather_as_ml_dtypes_decodes_them() {
    let Some(engine) = engine() else { return };
    let bytes = std::fs::read(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/fp8/fp8.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let f32s = |name: &str| -> Vec<f32> { st.tensor(name).unwrap().data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect() };
    let (rows, dim) = (st.tensor("rows").unwrap().shape()[0], st.tensor("rows").unwrap().shape()[1]);
    for (name, format) in [("e4m3", Format::Fp8E4M3), ("e5m2", Format::Fp8E5M2)] {
        let table = PackedTable::quantize(format, &f32s("rows"), rows, dim).unwrap();
        let want = f32s(&format!("{name}.decoded"));
        let ids: Vec<u32> = (0..rows as u32).rev().chain(0..rows as u32).collect();
        let want: Vec<f32> = ids.iter().flat_map(|&i| want[i as usize * dim..][..dim].to_vec()).collect();
        let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
        assert_bits_eq(&gpu_gather(&gpu, &ids, Bounds::Error).unwrap(), &want, &format!("{format} fixture rows on the GPU"));
    }
}

/// ONNX Runtime's GatherBlockQuantized tables (the fixtures of tests/gbq.rs) gather on the GPU as
/// onnxruntime's CPU kernel computes them: `(q − zp) · scale`, exact in f32.
#[test]
fn gather_block_quantized_tables_gather_as_onnxruntime_computes_them() {
    let Some(engine) = engine() else { return };
    for name in ["b4_g32_f16_zp", "b4_g128_f32exact", "b8_g64_f16_zp", "b8_g128_f16", "b4_g64_f32exact_zp"] {
        let bytes = std::fs::read(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/gbq/{name}.safetensors"))).unwrap();
        let gbq = edo::file::gbq::Gbq::from_safetensors(&bytes).unwrap();
        let edo::file::import::Table::Packed(table) = gbq.to_table().unwrap() else { panic!("{name} read as floats") };
        let decoded = gbq.decode().unwrap();
        let ids: Vec<u32> = (0..table.rows() as u32).rev().chain([0, 3, 3]).collect();
        let want: Vec<f32> = ids.iter().flat_map(|&i| decoded[i as usize * gbq.dim..][..gbq.dim].to_vec()).collect();
        let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
        assert_bits_eq(&gpu_gather(&gpu, &ids, Bounds::Error).unwrap(), &want, &format!("{name} on the GPU"));
    }
}
