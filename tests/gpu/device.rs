//! The engine and its device: loss, limits, reports, and an engine over a caller's device.

use super::*;

#[test]
fn device_loss_is_a_typed_error_everywhere() {
    // Its own engine: destroying the shared one would break the other tests.
    let Some(engine) = engine_with(EngineOptions::default()) else { return };
    let table = PackedTable::quantize(Format::Int8, &embedding_table(20, 4, 1), 20, 4).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    block_on(engine.prepare_gather(Format::F16, 4)).unwrap();
    let rows = block_on(gpu.gather(&[1, 2], Bounds::Error)).unwrap();
    engine.destroy_device();
    assert!(matches!(block_on(engine.prepare_gather(Format::Int4, 4)).map_err(Error::from), Err(Error::DeviceLost(_))));
    assert!(matches!(block_on(gpu.gather(&[1], Bounds::Error)), Err(Error::DeviceLost(_))));
    assert!(matches!(rows.read_blocking().map_err(Error::from), Err(Error::DeviceLost(_))));
    assert!(matches!(block_on(GpuTable::upload(&engine, &table)).map_err(Error::from), Err(Error::DeviceLost(_))));
    assert!(matches!(engine.wait_idle().map_err(Error::from), Err(Error::DeviceLost(_))));
}

#[test]
fn the_engine_reports_its_adapter_and_real_limits() {
    let Some(engine) = engine() else { return };
    assert!(!engine.adapter().name.is_empty());
    // The adapter's own limits, not WebGPU's defaults (lavapipe: 128 MiB bindings, not 128 MiB
    // by accident: the WebGPU default is 128 MiB too, so check the buffer size limit instead).
    assert!(engine.limits().max_buffer_size >= 256 << 20, "max_buffer_size {}", engine.limits().max_buffer_size);
    assert_eq!(engine.max_binding_bytes(), engine.limits().max_storage_buffer_binding_size.min(engine.limits().max_buffer_size));
    eprintln!("adapter: {}", engine.adapter());
}

/// A device of this machine's adapter, made by "the application" with `limits`.
fn own_device(limits: wgpu::Limits) -> Option<(wgpu::Device, wgpu::Queue)> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let Ok(adapter) = block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default())) else {
        assert!(!require_gpu(), "no adapter; EDO_REQUIRE_GPU=1 makes this a failure");
        eprintln!("SKIPPED: no adapter");
        return None;
    };
    Some(
        block_on(adapter.request_device(&wgpu::DeviceDescriptor { required_limits: limits, ..Default::default() }))
            .expect("a device within the adapter's limits"),
    )
}

#[test]
fn an_engine_over_the_callers_device_feeds_the_callers_pipeline() {
    let Some((device, queue)) = own_device(wgpu::Limits::default()) else { return };
    let engine = Engine::from_device(device.clone(), queue.clone(), EngineOptions::default()).unwrap();
    // The device's limits (WebGPU's defaults), not the adapter's.
    assert_eq!(engine.limits().max_storage_buffer_binding_size, wgpu::Limits::default().max_storage_buffer_binding_size);
    let (rows, dim) = (5000, 7);
    let table = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 4), rows, dim).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    let ids = ids_with_bad(777, rows, 6);
    let job = block_on(gpu.prepare_gather(&ids, Bounds::Zero)).unwrap();
    job.output().fill(SENTINEL).unwrap();
    // The caller's kernel doubles every gathered value in place, in the same encoder.
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(
            "@group(0) @binding(0) var<storage, read_write> v: array<f32>;
             @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
                 if (g.x < arrayLength(&v)) { v[g.x] = 2.0 * v[g.x]; }
             }"
            .into(),
        ),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry { binding: 0, resource: job.output().buffer().as_entire_binding() }],
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    job.encode(&mut encoder);
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(((ids.len() * dim) as u32).div_ceil(64), 1, 1);
    }
    queue.submit([encoder.finish()]);
    let got = job.output().read_blocking().unwrap();
    let want: Vec<f32> = edo::cpu::gather(&table, &ids, Bounds::Zero).unwrap().iter().map(|x| 2.0 * x).collect();
    assert_bits_eq(&got, &want, "gathered and doubled on the caller's device");
}

#[test]
fn a_device_below_edos_limits_is_refused_by_name() {
    let Some((device, queue)) = own_device(wgpu::Limits::downlevel_webgl2_defaults()) else { return };
    let err = Engine::from_device(device, queue, EngineOptions::default()).err();
    assert_eq!(err, Some(edo::gpu::Error::DeviceLimits { limit: "max_storage_buffers_per_shader_stage", required: 6, actual: 0 }));
    assert!(err.unwrap().to_string().contains("max_storage_buffers_per_shader_stage is 0"));
}

#[test]
fn device_loss_listeners_hear_it_once() {
    let Some(engine) = engine_with(EngineOptions::default()) else { return };
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    {
        let heard = heard.clone();
        engine.on_device_lost(move |why| heard.lock().unwrap().push(why.to_string()));
    }
    assert!(heard.lock().unwrap().is_empty());
    engine.destroy_device();
    engine.destroy_device();
    let heard = heard.lock().unwrap();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(heard[0].contains("Destroyed"), "{heard:?}");
}

#[test]
fn work_that_meets_the_loss_half_way_is_an_error_not_a_panic() {
    // Unmapping a buffer the loss destroyed reaches wgpu's uncaptured-error handler, whose
    // default panics (a readback in flight on another thread did this under the soak test).
    let Some(engine) = engine_with(EngineOptions::default()) else { return };
    let buffer = engine.device().create_buffer(&wgpu::BufferDescriptor {
        label: Some("in flight"),
        size: 256,
        usage: wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    buffer.slice(..).map_async(wgpu::MapMode::Read, |r| r.unwrap());
    engine.device().poll(wgpu::PollType::wait_indefinitely()).unwrap();
    drop(buffer.slice(..).get_mapped_range());
    engine.destroy_device();
    engine.device().poll(wgpu::PollType::wait_indefinitely()).ok();
    buffer.unmap();
    assert!(engine.is_lost());
}

#[test]
fn dropped_outputs_free_their_memory_and_a_refused_submission_is_a_typed_error() {
    let Some(engine) = crate::engine_with(edo::EngineOptions::default()) else { return };
    let (rows, dim) = (300, 40);
    let table = edo::PackedTable::quantize(edo::Format::Int8, &crate::embedding_table(rows, dim, 5), rows, dim).unwrap();
    let empty = engine.allocated_bytes();
    let gpu = edo::block_on(edo::GpuTable::upload(&engine, &table)).unwrap();
    let held = engine.allocated_bytes();
    let ids = crate::uniform_ids(777, rows, 3);
    // Many gathers whose outputs are dropped at once: each buffer goes idle as its last handle
    // goes and the next gather takes it again, and the rows of every one are right — no buffer
    // is reused or destroyed before the work that reads it ran. The engine holds no more after
    // the 200th than after the first.
    let want = edo::Lookup::gather(&table, &ids, edo::Bounds::Error).unwrap();
    let mut after_first = 0;
    for i in 0..200 {
        // An output filled with the sentinel goes idle; the next gather of the same size takes
        // it again and must overwrite every value.
        let out = edo::block_on(edo::GpuLookup::gather(&gpu, &ids, edo::Bounds::Error)).unwrap();
        out.fill(crate::SENTINEL).unwrap();
        drop(out);
        let job = edo::block_on(gpu.prepare_gather(&ids, edo::Bounds::Error)).unwrap();
        edo::block_on(job.submit_checked()).unwrap();
        crate::assert_bits_eq(&edo::block_on(job.output().read()).unwrap(), &want, "a gather among many");
        drop(job);
        let host = edo::block_on(edo::GpuLookup::lookup_host(&gpu, &edo::Request::gather(&ids, edo::Bounds::Error))).unwrap();
        crate::assert_bits_eq(&host.into_f32(), &want, "a gather read back in its own submission");
        if i == 0 {
            after_first = engine.allocated_bytes();
        }
        assert_eq!(engine.allocated_bytes(), after_first, "call {i}: no growth");
    }
    assert!(engine.idle_bytes() > 0);
    assert_eq!(engine.allocated_bytes() - engine.idle_bytes(), held, "every output and scratch buffer was given back");
    // A job whose output was destroyed under it is refused by wgpu: a typed error, never rows
    // that were not written. (A buffer handed out is never pooled: the caller may hold it.)
    let refused = edo::block_on(gpu.prepare_gather(&ids, edo::Bounds::Error)).unwrap();
    refused.output().buffer().destroy();
    match edo::block_on(refused.submit_checked()).map_err(edo::Error::from) {
        Err(edo::Error::Gpu { what, message, source }) => {
            assert!(message.contains("destroyed"), "{what}: {message}");
            // wgpu's own error is kept as the source.
            assert!(source.as_ref().and_then(|c| c.downcast_ref::<wgpu::Error>()).is_some(), "{source:?}");
        }
        other => panic!("expected a GPU error, got {other:?}"),
    }
    // The engine serves on.
    let out = edo::block_on(edo::GpuLookup::gather(&gpu, &ids, edo::Bounds::Error)).unwrap();
    crate::assert_bits_eq(&out.read_blocking().unwrap(), &want, "after the refusal");
    drop((refused, out));
    // A job outlives the table it was prepared on (the benchmark suite's do): it keeps the
    // table's shards, and the table's memory goes when the job does.
    let job = edo::block_on(gpu.prepare_gather(&ids, edo::Bounds::Error)).unwrap();
    let bags = edo::Bags::new(&ids, &[0, 100, 400]);
    let bag = edo::block_on(gpu.prepare_bag(&bags, edo::Pooling::Max, edo::Bounds::Error)).unwrap();
    drop(gpu);
    job.output().fill(crate::SENTINEL).unwrap();
    edo::block_on(job.submit_checked()).unwrap();
    crate::assert_bits_eq(&edo::block_on(job.output().read()).unwrap(), &want, "a job whose table was dropped");
    edo::block_on(bag.submit_checked()).unwrap();
    let max = edo::Lookup::bag(&table, &bags, edo::Pooling::Max, edo::Bounds::Error).unwrap();
    crate::assert_bits_eq(&edo::block_on(bag.output().read()).unwrap(), &max, "a bag whose table was dropped");
    drop((job, bag));
    engine.release_idle_buffers();
    assert_eq!(engine.allocated_bytes(), empty, "nothing is held once the table and its jobs are gone");
}

/// Lookups of many sizes one after another, on an engine whose tables span several shards: each
/// takes idle buffers of other lookups where a size class fits — scratch larger than it needs,
/// outputs holding the previous lookup's rows — and every row is right. An engine without a
/// pool keeps nothing idle, and one near its budget keeps nothing either.
#[test]
fn pooled_buffers_serve_lookups_of_every_size() {
    let options = EngineOptions { max_binding_bytes: Some(4096), ..Default::default() };
    let Some(engine) = crate::engine_with(options.clone()) else { return };
    let (rows, dim) = (1000, 40);
    let table = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 8), rows, dim).unwrap();
    let gpu = block_on(GpuTable::upload(&engine, &table)).unwrap();
    assert!(gpu.shard_count() > 1);
    let sizes = [1, 7, 300, 299, 1, 1000, 257, 64, 65, 2, 999];
    for (round, &n) in sizes.iter().chain(&sizes).enumerate() {
        let ids = uniform_ids(n, rows, round as u64);
        let want = table.gather(&ids, Bounds::Error).unwrap();
        let what = format!("round {round}, {n} ids");
        crate::assert_bits_eq(&gpu_gather(&gpu, &ids, Bounds::Error).unwrap(), &want, &what);
        let host = block_on(gpu.lookup_host(&edo::Request::gather(&ids, Bounds::Error))).unwrap();
        crate::assert_bits_eq(&host.into_f32(), &want, &format!("{what}, one submission"));
        let f16 = block_on(gpu.lookup_host(&edo::Request::gather(&ids, Bounds::Error).element(edo::Element::F16))).unwrap();
        assert_eq!(f16.into_f16(), table.gather_f16(&ids, Bounds::Error).unwrap(), "{what}, f16");
        let offsets: Vec<u32> = (0..n as u32).step_by(3).collect();
        let bags = Bags::new(&ids, &offsets);
        let got = crate::run_job(block_on(gpu.prepare_bag(&bags, Pooling::Max, Bounds::Error)).unwrap());
        let want_bags = table.bag(&bags, Pooling::Max, Bounds::Error).unwrap();
        crate::assert_pooled_close(&got, &want_bags, 3.0, 1.0, true, &format!("{what}, bags"));
    }
    assert!(engine.idle_bytes() > 0 && engine.idle_bytes() <= options.pool_bytes);

    let Some(unpooled) = crate::engine_with(EngineOptions { pool_bytes: 0, ..options.clone() }) else { return };
    let gpu = block_on(GpuTable::upload(&unpooled, &table)).unwrap();
    let held = unpooled.allocated_bytes();
    for &n in &sizes {
        let ids = uniform_ids(n, rows, 1);
        crate::assert_bits_eq(&gpu_gather(&gpu, &ids, Bounds::Error).unwrap(), &table.gather(&ids, Bounds::Error).unwrap(), "without a pool");
    }
    assert_eq!((unpooled.idle_bytes(), unpooled.allocated_bytes()), (0, held));

    // An engine that holds more than `stop_growing` of its budget keeps nothing idle.
    let pressure = edo::PressureStages { stop_growing: 0.1, ..Default::default() };
    let Some(tight) = crate::engine_with(EngineOptions { memory_budget: Some(4 * gpu.bytes()), pressure, ..options }) else { return };
    let gpu = block_on(GpuTable::upload(&tight, &table)).unwrap();
    let ids = uniform_ids(10, rows, 2);
    crate::assert_bits_eq(&gpu_gather(&gpu, &ids, Bounds::Error).unwrap(), &table.gather(&ids, Bounds::Error).unwrap(), "near the budget");
    assert_eq!(tight.idle_bytes(), 0);
}
