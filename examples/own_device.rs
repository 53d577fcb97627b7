//! edo on a device the application already owns: the gathered rows feed the application's own
//! compute pipeline on the same device, with no readback in between.
//!
//! A desktop app, a game engine or an inference framework built on wgpu has its `Device` and
//! `Queue` already. `Engine::from_device` runs edo on them, so `GpuRows::buffer()` is a buffer of
//! that device: here a shader of the application's scores every gathered row against a query
//! (a dot product per row), recorded in the same command encoder as the gather, and only the
//! scores come back to the host.
//!
//! Run: `cargo run --release --example own_device`

use edo::{Bounds, Engine, EngineOptions, Format, GpuLookup, PackedTable};

/// The application's kernel: `scores[r] = dot(rows[r], query)`, one invocation per row.
const SCORE: &str = r#"
struct Params { rows: u32, dim: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<f32>;
@group(0) @binding(2) var<storage, read> query: array<f32>;
@group(0) @binding(3) var<storage, read_write> scores: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    if (r >= params.rows) { return; }
    var s = 0.0;
    for (var c = 0u; c < params.dim; c++) {
        s += rows[r * params.dim + c] * query[c];
    }
    scores[r] = s;
}
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The application's own device, with WebGPU's default limits.
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let Ok(adapter) = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default())) else {
        println!("SKIPPED: no adapter (install a Vulkan, Metal or DX12 driver; lavapipe works)");
        return Ok(());
    };
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("the application's device"),
        required_limits: wgpu::Limits::default(),
        ..Default::default()
    }))?;

    // edo on that device: handles are reference counted, the application keeps its own.
    let engine = Engine::from_device(device.clone(), queue.clone(), EngineOptions::default())?;
    println!("edo on the application's device: {}", engine.adapter());

    let (rows, dim) = (50_000, 96);
    let data = edo::synth::embedding_table(rows, dim, 3);
    let table = PackedTable::quantize(Format::Int8, &data, rows, dim)?;
    let gpu_table = edo::block_on(edo::GpuTable::upload(&engine, &table))?;
    let ids: Vec<u32> = (0..1000u32).map(|i| i * 37 % rows as u32).collect();
    let query: Vec<f32> = (0..dim).map(|c| ((c as f32) * 0.37).sin()).collect();

    // The gather, not yet submitted: its output is a buffer of the application's device.
    let job = edo::block_on(gpu_table.prepare_gather(&ids, Bounds::Error))?;
    let gathered = job.output();

    // The application's pipeline, binding edo's output directly.
    use wgpu::util::DeviceExt;
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor { label: Some("score"), source: wgpu::ShaderSource::Wgsl(SCORE.into()) });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("score"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("score params"),
        contents: bytemuck::cast_slice(&[ids.len() as u32, dim as u32]),
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let query_buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("query"),
        contents: bytemuck::cast_slice(&query),
        usage: wgpu::BufferUsages::STORAGE,
    });
    let scores_bytes = 4 * ids.len() as u64;
    let scores = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("scores"),
        size: scores_bytes,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("scores readback"),
        size: scores_bytes,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("score"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: params.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: gathered.buffer().as_entire_binding() },
            wgpu::BindGroupEntry { binding: 2, resource: query_buffer.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 3, resource: scores.as_entire_binding() },
        ],
    });

    // One encoder: edo's gather, then the application's pass over its output.
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("gather and score") });
    job.encode(&mut encoder);
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("score"), timestamp_writes: None });
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups((ids.len() as u32).div_ceil(64), 1, 1);
    }
    encoder.copy_buffer_to_buffer(&scores, 0, &staging, 0, scores_bytes);
    queue.submit([encoder.finish()]);
    staging.slice(..).map_async(wgpu::MapMode::Read, |r| r.expect("map the scores"));
    device.poll(wgpu::PollType::wait_indefinitely())?;
    let got: Vec<f32> = bytemuck::cast_slice(&staging.slice(..).get_mapped_range()?).to_vec();

    // The same scores from the CPU path's rows (bit-identical to the GPU's gather).
    let on_cpu = edo::cpu::gather(&table, &ids, Bounds::Error)?;
    let want: Vec<f32> = on_cpu.chunks_exact(dim).map(|row| row.iter().zip(&query).map(|(a, b)| a * b).sum()).collect();
    let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs() / b.abs().max(1.0)).fold(0.0f32, f32::max);
    println!("{} rows gathered and scored on the GPU, read back only as {} scores", ids.len(), got.len());
    println!("first scores: GPU {:?}, CPU {:?}", &got[..3], &want[..3]);
    println!("largest relative difference from the CPU path: {worst:.2e}");
    if worst > 1e-4 {
        return Err(format!("the scores differ from the CPU path's by {worst}").into());
    }
    Ok(())
}
