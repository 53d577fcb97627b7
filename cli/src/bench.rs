//! `edo demo` and `edo bench`: the report tables.

use crate::reports::bench::Report;

/// Bytes in the largest binary unit that keeps the number at least 1.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

pub fn print_report(r: &Report, accuracy: bool) {
    println!();
    println!(
        "edo {} — {} × {} f32 table ({}), {} random ids per lookup",
        if accuracy { "demo" } else { "bench" },
        r.rows,
        r.dim,
        mib((r.rows * r.dim * 4) as u64),
        r.ids
    );
    match (&r.adapter, &r.no_gpu_reason) {
        (Some(a), _) => println!("GPU: {a}"),
        (None, Some(why)) => println!("GPU: none ({why}) — running the CPU path only"),
        (None, None) => println!("GPU: none"),
    }
    if let Some(copy) = r.gpu_copies {
        println!("GPU copy: {:.1} GB/s (read + write), measured now: a copy kernel {:.1}, copy_buffer_to_buffer {:.1}", copy.best(), copy.shader, copy.buffer);
    }
    println!("CPU memcpy on {} threads: {:.1} GB/s (read + write), measured now", r.threads, r.cpu_memcpy_gbps);
    if r.row_alignment != edo::format::NO_ROW_ALIGNMENT {
        let padded: Vec<String> = r
            .formats
            .iter()
            .filter_map(|f| f.gpu_bytes.filter(|&g| g != f.bytes).map(|g| format!("{} +{:.1} %", f.format, 100.0 * (g as f64 / f.bytes as f64 - 1.0))))
            .collect();
        let padded = if padded.is_empty() { "no format padded".to_string() } else { padded.join(", ") };
        println!("GPU rows aligned to {} bytes ({padded})", r.row_alignment);
    }
    println!();
    if accuracy {
        println!("{:<13} {:>11} {:>7} {:>6} {:>11} {:>11} {:>9}", "format", "bytes", "vs fp32", "shards", "max |err|", "mean |err|", "mean cos");
        for f in &r.formats {
            let a = f.accuracy.as_ref();
            println!(
                "{:<13} {:>11} {:>7.3} {:>6} {:>11.3e} {:>11.3e} {:>9.5}",
                f.format,
                mib(f.bytes),
                f.ratio_to_fp32,
                f.shards.map_or("-".to_string(), |s| s.to_string()),
                a.map_or(f64::NAN, |a| a.max_abs_error),
                a.map_or(f64::NAN, |a| a.mean_abs_error),
                a.map_or(f64::NAN, |a| a.mean_cosine),
            );
        }
        println!();
    }
    // The f16 column where the run timed the f16 gather (`edo bench`, not the demo).
    let f16 = r.formats.iter().any(|f| f.gpu_f16.is_some());
    let f16_cell = |cell: String| if f16 { format!(" {cell:>9}") } else { String::new() };
    // The bag columns where the run timed bags (`edo bench` on a GPU).
    let bag = r.formats.iter().any(|f| f.gpu_bag.is_some());
    let bag_cells = |ms: String, pct: String| if bag { format!(" {ms:>9} {pct:>9}") } else { String::new() };
    println!(
        "{:<13} {:>10} {:>9} {:>9} {:>9}{}{}   {:>10} {:>9} {:>9}",
        "gather",
        "GPU ms",
        "GB/s",
        "% copy",
        "vs fp32",
        f16_cell("f16 out".into()),
        bag_cells("bag ms".into(), "bag %cp".into()),
        "CPU ms",
        "out GB/s",
        "% memcpy"
    );
    let fp32 = r.formats.iter().find(|f| f.format == "fp32");
    for f in &r.formats {
        let (gms, ggb, gpct, grat) = match &f.gpu {
            Some(g) => (
                format!("{:.3}", g.seconds * 1e3),
                format!("{:.2}", g.moved_gbps),
                format!("{:.1}", 100.0 * g.ratio_to_copy),
                fp32.and_then(|b| b.gpu.as_ref()).map_or("-".into(), |b| format!("{:.2}", g.seconds / b.seconds)),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        let half = match (&f.gpu, &f.gpu_f16) {
            (Some(g), Some(h)) => format!("{:.2}", h.seconds / g.seconds),
            _ => "-".into(),
        };
        let (bag_ms, bag_pct) = match &f.gpu_bag {
            Some(b) => (format!("{:.3}", b.seconds * 1e3), format!("{:.1}", 100.0 * b.ratio_to_copy)),
            None => ("-".into(), "-".into()),
        };
        println!(
            "{:<13} {:>10} {:>9} {:>9} {:>9}{}{}   {:>10.3} {:>9.2} {:>9.1}",
            f.format,
            gms,
            ggb,
            gpct,
            grat,
            f16_cell(half),
            bag_cells(bag_ms, bag_pct),
            f.cpu.seconds * 1e3,
            f.cpu.output_gbps,
            100.0 * f.cpu.ratio_to_copy
        );
    }
    println!();
    if r.formats.iter().any(|f| f.gpu.is_some()) {
        println!("GB/s: packed rows + ids read and f32 rows written, per second. % copy: of the device's own");
        println!("copy (the faster of the two above). vs fp32: time over the fp32 gather.");
    } else {
        println!("GPU columns: none in this run (the CPU path only).");
    }
    println!("out GB/s: f32 rows written by the CPU path per second. % memcpy: those bytes per second over a");
    println!("memcpy of as many on the same threads. Timings are medians; only ratios compare across machines");
    println!("(software Vulkan such as lavapipe runs the GPU path on the CPU).");
    if bag {
        println!("bag ms, bag %cp: sum bags of {} of the same ids on the GPU; bytes moved (packed rows + ids", r.bag.unwrap_or(0));
        println!("read, pooled rows written) per second, as % of the device's copy.");
    }
    if f16 {
        println!("f16 out: time of the same GPU gather writing f16 rows (half the output bytes) over its time");
        println!("writing f32.");
    }
}
