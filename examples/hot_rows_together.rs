//! Does laying the most looked-up rows out together make lookups faster? The question behind
//! reordering a table by frequency (issue 35, item 5; the articles it cites report +22 %
//! last-level-cache hits). Measured before building it, on the same table, ids and batches:
//!
//! - **scattered**: the popular rows spread over the table at random (a table in the order its
//!   ids were given out: the usual case);
//! - **together**: the same rows permuted by their frequency in the first half of the stream (the
//!   most frequent first), each id translated through the permutation as a reordered table's
//!   lookups would be (the translation is timed on its own, and done before the gathers).
//!
//! The second half of the stream is timed in batches of 4096, the two layouts alternating batch
//! by batch (and which goes first), on the CPU path and (when there is an adapter) the GPU.
//!
//! ```text
//! cargo run --release --example hot_rows_together -- [--rows N] [--dim D] [--zipf S] [--quick]
//! ```

use std::time::Instant;

use edo::{block_on, Bounds, Engine, Format, GpuLookup, GpuTable, PackedTable};

fn arg(args: &[String], name: &str, default: f64) -> f64 {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map_or(default, |v| v.parse().expect("a number"))
}

fn quantile(times: &[f64], q: f64) -> f64 {
    let mut t = times.to_vec();
    t.sort_by(f64::total_cmp);
    t[((q * t.len() as f64).ceil() as usize).clamp(1, t.len()) - 1]
}

/// A permutation of `0..n` from a seed (Fisher–Yates over a splitmix64 stream).
fn shuffled(n: usize, seed: u64) -> Vec<u32> {
    let mut p: Vec<u32> = (0..n as u32).collect();
    let mut x = seed;
    for i in (1..n).rev() {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        p.swap(i, (z % (i as u64 + 1)) as usize);
    }
    p
}

fn main() -> Result<(), edo::Error> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let rows = arg(&args, "--rows", if quick { 200_000.0 } else { 1_000_000.0 }) as usize;
    let dim = arg(&args, "--dim", 128.0) as usize;
    let zipf = arg(&args, "--zipf", 1.05);
    let (batch, batches) = (4096, if quick { 100 } else { 400 });
    let format = Format::Int8;

    // The stream over ids whose popular rows are scattered: Zipf ranks sent through a random
    // permutation, so rank 0 (the hottest) is some row in the middle of the table.
    let scatter = shuffled(rows, 7);
    let ids: Vec<u32> = edo::synth::zipf_ids(2 * batches * batch, rows, zipf, 3).iter().map(|&r| scatter[r as usize]).collect();
    let (train, timed) = ids.split_at(batches * batch);

    // The reordering a frequency count of the first half gives: row k of the new table is the
    // k-th most frequent id (ties by id), and `new_row[id]` its place.
    let mut counts = vec![0u32; rows];
    for &id in train {
        counts[id as usize] += 1;
    }
    let mut order: Vec<u32> = (0..rows as u32).collect();
    order.sort_by_key(|&id| (std::cmp::Reverse(counts[id as usize]), id));
    let mut new_row = vec![0u32; rows];
    for (k, &id) in order.iter().enumerate() {
        new_row[id as usize] = k as u32;
    }
    let data = edo::synth::embedding_table(rows, dim, 1);
    let scattered = PackedTable::quantize(format, &data, rows, dim)?;
    let reordered_data: Vec<f32> = order.iter().flat_map(|&id| data[id as usize * dim..(id as usize + 1) * dim].iter().copied()).collect();
    drop(data);
    let together = PackedTable::quantize(format, &reordered_data, rows, dim)?;
    drop(reordered_data);
    let hot_share = order[..rows / 100].iter().map(|&id| counts[id as usize] as u64).sum::<u64>() as f64 / train.len() as f64;
    println!(
        "{rows} × {dim} {} table ({} MiB), Zipf({zipf}); the hottest 1 % of rows take {:.0} % of the lookups; {batches} timed batches of {batch}",
        format.name(),
        scattered.bytes() >> 20,
        100.0 * hot_share
    );

    let translate = |b: &[u32]| -> Vec<u32> { b.iter().map(|&id| new_row[id as usize]).collect() };
    let check = &timed[..batch];
    assert_eq!(edo::cpu::gather(&scattered, check, Bounds::Error)?, edo::cpu::gather(&together, &translate(check), Bounds::Error)?, "the same rows");

    let report = |name: &str, a: &[f64], b: &[f64]| {
        let (sa, sb) = (a.iter().sum::<f64>(), b.iter().sum::<f64>());
        println!(
            "{name:<6} scattered {:>6.2} M ids/s (P50 {:.3} ms, P99 {:.3} ms)   together {:>6.2} M ids/s (P50 {:.3} ms, P99 {:.3} ms)   together / scattered {:.2}×",
            (a.len() * batch) as f64 / sa / 1e6,
            1e3 * quantile(a, 0.5),
            1e3 * quantile(a, 0.99),
            (b.len() * batch) as f64 / sb / 1e6,
            1e3 * quantile(b, 0.5),
            1e3 * quantile(b, 0.99),
            sa / sb
        );
    };

    // What translating ids costs by itself (a reordered table's id map: one random read of a
    // 4-byte entry per id).
    let mut map_s = Vec::new();
    for chunk in timed.chunks(batch) {
        let t = Instant::now();
        std::hint::black_box(translate(chunk));
        map_s.push(t.elapsed().as_secs_f64());
    }
    println!("id map: {:.3} ms per batch (P50), {:.1} ns per id", 1e3 * quantile(&map_s, 0.5), 1e9 * quantile(&map_s, 0.5) / batch as f64);
    let mapped: Vec<Vec<u32>> = timed.chunks(batch).map(translate).collect();

    // The CPU path, alternating batch by batch (which layout goes first alternates too); the
    // reordered table's ids translated beforehand, so the figures compare layouts alone.
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (i, (chunk, m)) in timed.chunks(batch).zip(&mapped).enumerate() {
        for first in [i % 2 == 0, i % 2 == 1] {
            let t = Instant::now();
            if first {
                std::hint::black_box(edo::cpu::gather(&scattered, chunk, Bounds::Error)?);
                a.push(t.elapsed().as_secs_f64());
            } else {
                std::hint::black_box(edo::cpu::gather(&together, m, Bounds::Error)?);
                b.push(t.elapsed().as_secs_f64());
            }
        }
    }
    report("cpu", &a, &b);

    match Engine::new_blocking(Default::default()) {
        Err(e) => println!("gpu    SKIPPED: no adapter ({e})"),
        Ok(engine) => {
            let (ga, gb) = (block_on(GpuTable::upload(&engine, &scattered))?, block_on(GpuTable::upload(&engine, &together))?);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for (i, (chunk, m)) in timed.chunks(batch).zip(&mapped).enumerate() {
                for first in [i % 2 == 0, i % 2 == 1] {
                    let t = Instant::now();
                    block_on(if first { ga.gather(chunk, Bounds::Error) } else { gb.gather(m, Bounds::Error) })?;
                    engine.wait_idle()?;
                    if first {
                        a.push(t.elapsed().as_secs_f64())
                    } else {
                        b.push(t.elapsed().as_secs_f64())
                    }
                }
            }
            report("gpu", &a, &b);
            println!("       ({})", engine.adapter());
        }
    }
    Ok(())
}
