//! A DLRM-style inference step: 26 sparse features with raw (hashed) 64-bit ids, bags of about
//! 20 ids per sample, batch 4096, 64-dim tables — pooled by one table-batched job on the GPU and
//! by the CPU path, in INT8 and in FP32.
//!
//! Run: `cargo run --release --example recsys` (`-- --batch 512` for a quicker run).
//! Prints GPU memory against dense FP32 tables, lookups per second on both paths, and each path's
//! bandwidth as a ratio to what the same machine does in the same run (the GPU's own copy,
//! memcpy on the CPU's threads).

use std::time::Instant;

use edo::hash::{HashSpec, HashedBags};
use edo::{block_on, Bounds, Engine, Format, GpuHashedTables, GpuLookup, GpuPrunedTable, Layout, Lookup, PackedTable, Pooling, PrunedTable};

const FEATURES: usize = 26;
const DIM: usize = 64;
const BUCKETS: u32 = 50_000;
const POOLING: u32 = 20;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let batch: usize = std::env::args().skip_while(|a| a != "--batch").nth(1).map_or(Ok(4096), |s| s.parse())?;
    let iters = 5;
    println!("edo recsys: {FEATURES} hashed features × {BUCKETS} buckets × {DIM} dims, batch {batch}, ~{POOLING} ids per bag");

    // Ids: a Zipf-like mix of frequent and rare raw ids per feature; each feature's 16 most
    // frequent ids get rows of their own (hot ids).
    let mut rng = edo::synth::Rng::new(7);
    let mut ids = Vec::new();
    let mut offsets = Vec::new();
    for _f in 0..FEATURES {
        for _b in 0..batch {
            offsets.push(ids.len() as u32);
            let len = POOLING / 2 + rng.below(POOLING + 1);
            for _ in 0..len {
                let r = rng.next_f32();
                ids.push(if r < 0.3 { rng.below(16) as u64 } else { rng.next_u64() });
            }
        }
    }
    offsets.push(ids.len() as u32);
    let lookups = ids.len();
    let bags = HashedBags::new(&ids, &offsets).include_last_offset(true);
    let specs: Vec<HashSpec> = (0..FEATURES).map(|f| HashSpec { buckets: BUCKETS, seeds: vec![f as u32], hot: (0..16).collect() }).collect();
    let rows = specs[0].rows();
    let dense_f32 = (FEATURES * rows * DIM * 4) as u64;

    let engine = match Engine::new_blocking(Default::default()) {
        Ok(e) => {
            println!("GPU: {}", e.adapter());
            Some(e)
        }
        Err(e) => {
            println!("GPU: none ({e}); CPU path only");
            None
        }
    };
    let copy_gbps = match &engine {
        Some(e) => Some(edo_bench::measure::gpu_copy_gbps(e, (batch * FEATURES * DIM * 4) as u64 * 8, iters)?),
        None => None,
    };

    println!();
    println!("{:<6} {:>10} {:>8} {:>14} {:>8} {:>14} {:>10}", "format", "GPU bytes", "vs fp32", "GPU lookups/s", "% copy", "CPU lookups/s", "% memcpy");
    let mut gpu_rate = Vec::new();
    for format in [Format::Int8, Format::F32] {
        let tables: Vec<PackedTable> =
            (0..FEATURES).map(|f| PackedTable::quantize(format, &edo::synth::embedding_table(rows, DIM, f as u64), rows, DIM)).collect::<Result<_, _>>()?;
        let refs: Vec<&PackedTable> = tables.iter().collect();
        let row_bytes = format.row_bytes(DIM) as f64;
        // Bytes a lookup step reads: one packed row per hashed id (k = 1), plus the ids.
        let read_bytes = lookups as f64 * (row_bytes + 8.0);

        // An inference loop pools every batch into the same buffer. Each step is timed right
        // after a memcpy on the same threads, and the figures are the medians: the machine's
        // speed drifts less between the two than over the whole run.
        let mut pooled = vec![0f32; batch * FEATURES * DIM];
        edo::hash::hashed_bags_into(&refs, &specs, batch, &bags, Pooling::Sum, Layout::Concat, &mut pooled)?;
        let (mut times, mut ratios) = (Vec::new(), Vec::new());
        for _ in 0..2 * iters + 1 {
            let memcpy_gbps = edo_bench::measure::cpu_memcpy_gbps(64 << 20, 3);
            let t = Instant::now();
            edo::hash::hashed_bags_into(&refs, &specs, batch, &bags, Pooling::Sum, Layout::Concat, &mut pooled)?;
            std::hint::black_box(&pooled);
            let s = t.elapsed().as_secs_f64();
            times.push(s);
            ratios.push(100.0 * (read_bytes / s / 1e9) / (memcpy_gbps / 2.0));
        }
        let (cpu_s, cpu_pct) = (edo_bench::measure::median(times), edo_bench::measure::median(ratios));

        let (bytes, gpu_cell, pct_cell) = match &engine {
            Some(engine) => {
                let pairs: Vec<(&PackedTable, HashSpec)> = refs.iter().copied().zip(specs.iter().cloned()).collect();
                let gpu = block_on(GpuHashedTables::upload(engine, &pairs))?;
                let job = block_on(gpu.prepare_bags(batch, &bags, Pooling::Sum, Layout::Concat))?;
                job.submit()?;
                engine.wait_idle()?;
                let t = Instant::now();
                for _ in 0..iters {
                    job.submit()?;
                }
                engine.wait_idle()?;
                let gpu_s = t.elapsed().as_secs_f64() / iters as f64;
                gpu_rate.push(lookups as f64 / gpu_s);
                let moved = read_bytes + (batch * FEATURES * DIM * 4) as f64;
                let pct = 100.0 * (moved / gpu_s / 1e9) / copy_gbps.unwrap_or(f64::NAN);
                (gpu.bytes(), format!("{:.3e}", lookups as f64 / gpu_s), format!("{pct:.1}"))
            }
            None => (tables.iter().map(|t| t.bytes()).sum(), "-".into(), "-".into()),
        };
        println!(
            "{:<6} {:>10} {:>8.3} {:>14} {:>8} {:>14.3e} {:>10.1}",
            format.name(),
            format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64),
            bytes as f64 / dense_f32 as f64,
            gpu_cell,
            pct_cell,
            lookups as f64 / cpu_s,
            cpu_pct
        );
    }
    if let [int8, f32] = gpu_rate[..] {
        println!("\nGPU INT8 / FP32 lookups per second: {:.2}×", int8 / f32);
    }
    println!("({lookups} lookups per step; % copy: bytes read and written per second over the GPU's own copy;");
    println!(" % memcpy: packed bytes read per second over a memcpy on the same CPU threads.)");

    // Pruning, as FBGEMM does for trained models: rows a sample of traffic never touched are
    // dropped, and a remap sends their ids to a zero row.
    let (prune_rows, sample) = (200_000, 300_000);
    let data = edo::synth::embedding_table(prune_rows, DIM, 99);
    let mut keep = vec![false; prune_rows];
    for id in edo::synth::zipf_ids(sample, prune_rows, 1.05, 5) {
        keep[id as usize] = true;
    }
    let pruned = PrunedTable::quantize(Format::Int8, &data, prune_rows, DIM, &keep)?;
    let kept = pruned.table().rows();
    println!();
    println!(
        "pruned INT8 table: {kept} of {prune_rows} rows kept (those {sample} Zipf(1.05) lookups touched): {:.1} MiB \
         (compact rows {:.1} MiB + remap {:.1} MiB) instead of {:.1} MiB unpruned, {:.2}×",
        pruned.bytes() as f64 / (1 << 20) as f64,
        pruned.table().bytes() as f64 / (1 << 20) as f64,
        (4 * prune_rows) as f64 / (1 << 20) as f64,
        pruned.unpruned_bytes() as f64 / (1 << 20) as f64,
        pruned.bytes() as f64 / pruned.unpruned_bytes() as f64
    );
    if let Some(engine) = &engine {
        let gpu = block_on(GpuPrunedTable::upload(engine, &pruned))?;
        gpu.set_name("pruned sparse table");
        let probe: Vec<u32> = (0..prune_rows as u32).step_by(997).collect();
        let rows_back = block_on(gpu.gather(&probe, Bounds::Error))?.read_blocking()?;
        assert_eq!(rows_back, pruned.gather(&probe, Bounds::Error)?, "the GPU's pruned gather equals the CPU's");
        println!("\nGPU memory now:\n{}", engine.memory_report());
    }
    Ok(())
}
