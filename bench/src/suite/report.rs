//! What results files become: SVG charts (written here, so the browser draws the very same ones
//! without a plotting library in its .wasm), a self-contained HTML report, a plain-text summary
//! for terminals and a Markdown page. Each takes one results file or several — several devices or
//! runs side by side, one series per file and backend.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::{Case, Results};

/// A line of charts and tables: one backend of one results file.
struct Series<'a> {
    name: String,
    file: &'a Results,
    backend: &'a str,
}

fn series(files: &[Results]) -> Vec<Series<'_>> {
    let mut out = Vec::new();
    for file in files {
        for b in &file.backends {
            if !file.cases.iter().any(|c| c.backend == b.id) {
                continue;
            }
            let name = if files.len() == 1 || b.kind == "peer" {
                b.name.clone()
            } else if file.label.contains(&b.name) {
                file.label.clone()
            } else {
                format!("{} · {}", file.label, b.name)
            };
            out.push(Series { name, file, backend: &b.id });
        }
    }
    out
}

/// The identity of a measurement across files: operation, format, size, items per call.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    op_rank: usize,
    op: String,
    size_rank: usize,
    size: String,
    format_rank: usize,
    format: String,
    items: usize,
}

fn key(c: &Case) -> Key {
    let op_rank = super::Op::from_name(&c.op).map_or(99, |o| super::Op::ALL.iter().position(|&x| x == o).unwrap_or(99));
    let size_rank = ["small", "medium", "large", "model"].iter().position(|&s| s == c.size).unwrap_or(9);
    let format_rank = edo::Format::from_name(&c.format).map_or(99, |f| edo::Format::ALL.iter().position(|&x| x == f).unwrap_or(99));
    Key { op_rank, op: c.op.clone(), size_rank, size: c.size.clone(), format_rank, format: c.format.clone(), items: c.items }
}

/// The series' case of `k` (the ranks follow from the names, so the names and items decide; no
/// key is built per case).
fn find<'a>(s: &Series<'a>, k: &Key) -> Option<&'a Case> {
    s.file.cases.iter().find(|c| c.backend == s.backend && c.items == k.items && c.op == k.op && c.size == k.size && c.format == k.format)
}

fn keys(files: &[Results]) -> Vec<Key> {
    let set: BTreeSet<Key> = files.iter().flat_map(|f| f.cases.iter().map(key)).collect();
    set.into_iter().collect()
}

/// A number with an SI prefix: 1.23 M, 456 k, 7.8 m.
pub fn si(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    let (d, p) = match a {
        a if a >= 1e9 => (1e9, " G"),
        a if a >= 1e6 => (1e6, " M"),
        a if a >= 1e3 => (1e3, " k"),
        a if a >= 1.0 || a == 0.0 => (1.0, ""),
        a if a >= 1e-3 => (1e-3, " m"),
        _ => (1e-6, " µ"),
    };
    let x = v / d;
    let digits = if x.abs() >= 100.0 {
        0
    } else if x.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{x:.digits$}{p}")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const PALETTE: [&str; 10] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

/// An SVG's opening, white background, title and legend (one colour per series, in order).
fn svg_start<'a>(width: f64, height: f64, title: &str, names: impl Iterator<Item = &'a str>) -> String {
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><text x="10" y="20" font-size="14" font-weight="bold">{}</text>"#,
        esc(title)
    );
    for (i, name) in names.enumerate() {
        let y = 36.0 + 16.0 * i as f64;
        let _ = write!(
            svg,
            r#"<rect x="10" y="{}" width="10" height="10" fill="{}"/><text x="26" y="{y}">{}</text>"#,
            y - 9.0,
            PALETTE[i % PALETTE.len()],
            esc(name)
        );
    }
    svg
}

/// A horizontal grouped bar chart: one group per category, one bar per series. `log`: a
/// logarithmic axis (throughputs that span decades).
pub fn bar_chart(title: &str, unit: &str, categories: &[String], series: &[(String, Vec<Option<f64>>)], log: bool) -> String {
    let (left, right, top) = (190.0, 30.0, 58.0 + 16.0 * series.len() as f64);
    let bar = 9.0;
    let group = bar * series.len().max(1) as f64 + 8.0;
    let width = 760.0;
    let plot_w = width - left - right;
    let height = top + group * categories.len() as f64 + 40.0;
    let values: Vec<f64> = series.iter().flat_map(|(_, v)| v.iter().flatten().copied()).filter(|&v| plottable(v)).collect();
    let max = values.iter().copied().fold(0.0, f64::max);
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let mut svg = svg_start(width, height, title, series.iter().map(|(name, _)| name.as_str()));
    if values.is_empty() {
        let _ = write!(svg, r#"<text x="{left}" y="{}">no figures</text></svg>"#, top + 20.0);
        return svg;
    }
    // The axis: decades for log, five steps from 0 for linear.
    let (lo, hi) = if log { (10f64.powf(min.log10().floor()), 10f64.powf(max.log10().ceil().max(min.log10().floor() + 1.0))) } else { (0.0, nice(max)) };
    let x_of = |v: f64| {
        let f = if log { (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10()) } else { v / hi };
        left + plot_w * f.clamp(0.0, 1.0)
    };
    let ticks: Vec<f64> = if log {
        let (a, b) = (lo.log10().round() as i32, hi.log10().round() as i32);
        (a..=b).map(|e| 10f64.powi(e)).collect()
    } else {
        (0..=5).map(|i| hi * i as f64 / 5.0).collect()
    };
    let bottom = height - 40.0;
    for t in ticks {
        let x = x_of(t);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{bottom}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            bottom + 14.0,
            si(t)
        );
    }
    let _ = write!(svg, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, left + plot_w / 2.0, bottom + 30.0, esc(unit));
    for (ci, cat) in categories.iter().enumerate() {
        let y0 = top + group * ci as f64;
        let _ = write!(svg, r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#, left - 6.0, y0 + group / 2.0, esc(cat));
        for (si_, (name, vals)) in series.iter().enumerate() {
            if let Some(v) = vals.get(ci).copied().flatten().filter(|&v| plottable(v)) {
                let y = y0 + 4.0 + bar * si_ as f64;
                let _ = write!(
                    svg,
                    r#"<rect x="{left}" y="{y:.1}" width="{:.1}" height="{}" fill="{}"><title>{}: {} {}</title></rect>"#,
                    (x_of(v) - left).max(1.0),
                    bar - 1.0,
                    PALETTE[si_ % PALETTE.len()],
                    esc(name),
                    si(v),
                    esc(unit)
                );
            }
        }
    }
    let _ = write!(svg, r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#333"/></svg>"##);
    svg
}

/// Whether a figure can be drawn on the charts' axes: finite, positive, and within 30 decades of 1
/// (a results file from elsewhere may hold anything; no benchmark figure is outside that).
fn plottable(v: f64) -> bool {
    v.is_finite() && v > 1e-30 && v < 1e30
}

/// A round number at least `v` (1, 2 or 5 times a power of ten).
fn nice(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|&x| x >= v).unwrap_or(10.0 * p)
}

/// A line chart on log-log axes: one line of (x, y) points per series.
pub fn line_chart(title: &str, x_unit: &str, y_unit: &str, series: &[(String, Vec<(f64, f64)>)]) -> String {
    let (left, right, top, width, height) = (70.0, 30.0, 58.0 + 16.0 * series.len() as f64, 760.0, 380.0 + 16.0 * series.len() as f64);
    let bottom = height - 40.0;
    let pts: Vec<(f64, f64)> = series.iter().flat_map(|(_, p)| p.iter().copied()).filter(|&(x, y)| plottable(x) && plottable(y)).collect();
    let mut svg = svg_start(width, height, title, series.iter().map(|(name, _)| name.as_str()));
    if pts.is_empty() {
        let _ = write!(svg, r#"<text x="{left}" y="{}">no figures</text></svg>"#, top + 20.0);
        return svg;
    }
    let decades = |f: fn(&(f64, f64)) -> f64| {
        let lo = pts.iter().map(f).fold(f64::INFINITY, f64::min).log10().floor();
        let hi = pts.iter().map(f).fold(0.0, f64::max).log10().ceil().max(lo + 1.0);
        (lo, hi)
    };
    let (xl, xh) = decades(|p| p.0);
    let (yl, yh) = decades(|p| p.1);
    let sx = |x: f64| left + (width - left - right) * (x.log10() - xl) / (xh - xl);
    let sy = |y: f64| bottom - (bottom - top) * (y.log10() - yl) / (yh - yl);
    for e in xl as i32..=xh as i32 {
        let x = sx(10f64.powi(e));
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{bottom}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            bottom + 14.0,
            si(10f64.powi(e))
        );
    }
    for e in yl as i32..=yh as i32 {
        let y = sy(10f64.powi(e));
        let _ = write!(
            svg,
            r##"<line x1="{left}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            width - right,
            left - 6.0,
            y + 4.0,
            si(10f64.powi(e))
        );
    }
    let _ = write!(svg, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, left + (width - left - right) / 2.0, bottom + 30.0, esc(x_unit));
    let _ = write!(
        svg,
        r#"<text x="14" y="{}" transform="rotate(-90 14 {})" text-anchor="middle">{}</text>"#,
        (top + bottom) / 2.0,
        (top + bottom) / 2.0,
        esc(y_unit)
    );
    for (i, (name, points)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let p: Vec<String> = points.iter().filter(|&&(x, y)| plottable(x) && plottable(y)).map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y))).collect();
        let _ = write!(svg, r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#, p.join(" "));
        for &(x, y) in points.iter().filter(|&&(x, y)| plottable(x) && plottable(y)) {
            let _ =
                write!(svg, r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"><title>{}: {} → {}</title></circle>"#, sx(x), sy(y), esc(name), si(x), si(y));
        }
    }
    svg.push_str("</svg>");
    svg
}

/// The charts of one or more results files, as (id, SVG) pairs: bytes per row per format,
/// throughput of each operation per format and size, the gather's ratio to the device's own
/// copy, and round-trip latency against the ids per call.
pub fn charts(files: &[Results]) -> Vec<(String, String)> {
    let ser = series(files);
    let keys = keys(files);
    let mut out = Vec::new();

    // Bytes per row of each format, from the gather cases (the same on every backend).
    // At the dim of the largest table measured (bytes per row depend on it).
    let gathers = || files.iter().flat_map(|f| &f.cases).filter(|c| c.op == "gather" && c.rows > 0);
    let dim = gathers().max_by_key(|c| c.rows).map_or(0, |c| c.dim);
    let mut bytes: Vec<(String, f64)> = Vec::new();
    for c in gathers().filter(|c| c.dim == dim) {
        if !bytes.iter().any(|(n, _)| *n == c.format) {
            bytes.push((c.format.clone(), c.table_bytes as f64 / c.rows as f64));
        }
    }
    if !bytes.is_empty() {
        let (cats, vals): (Vec<String>, Vec<Option<f64>>) = bytes.into_iter().map(|(c, v)| (c, Some(v))).unzip();
        out.push((
            "bytes".to_string(),
            bar_chart(
                &format!("Bytes per row at dim {dim}, by format"),
                &format!("bytes per row (FP32: {})", 4 * dim),
                &cats,
                &[("bytes per row".into(), vals)],
                false,
            ),
        ));
    }

    // Throughput: one chart per table operation, and one for search, cache and embed.
    let groups: [(&str, &[&str], &str); 5] = [
        ("gather", &["gather"], "Gather"),
        ("bags", &["bag_sum", "bag_mean"], "EmbeddingBag (16 rows per bag)"),
        ("hashed", &["hashed_bag"], "Hashed bags (2 hashes per id, 16 ids per bag)"),
        ("search", &["search", "cache"], "Search (queries/s) and the hot-row cache (ids/s)"),
        ("embed", &["embed"], "Static model embedding (texts/s)"),
    ];
    for (id, ops, title) in groups {
        let ks: Vec<&Key> = keys.iter().filter(|k| ops.contains(&k.op.as_str())).collect();
        if ks.is_empty() {
            continue;
        }
        let cats: Vec<String> = ks.iter().map(|k| label(k, ops.len() > 1 || id == "embed")).collect();
        let vals = present(ser.iter().map(|s| (s.name.clone(), ks.iter().map(|k| find(s, k).map(|c| c.items_per_s)).collect())));
        out.push((format!("throughput-{id}"), bar_chart(&format!("{title}: throughput"), "items per second (log scale)", &cats, &vals, true)));
    }

    // Ratio to the device's own copy: gather and bags, where bytes moved is the cost.
    let ks: Vec<&Key> = keys.iter().filter(|k| k.op == "gather" || k.op == "bag_sum").collect();
    if !ks.is_empty() {
        let cats: Vec<String> = ks.iter().map(|k| label(k, true)).collect();
        let vals = present(ser.iter().map(|s| (s.name.clone(), ks.iter().map(|k| find(s, k).map(|c| c.ratio_to_copy)).collect())));
        out.push((
            "ratio".to_string(),
            bar_chart(
                "Bytes moved per second over the device's own copy (memcpy for the CPU path)",
                "ratio to copy (1 = as fast as copying)",
                &cats,
                &vals,
                false,
            ),
        ));
    }

    // Latency against ids per call.
    let lat: Vec<(String, Vec<(f64, f64)>)> = ser
        .iter()
        .map(|s| {
            let mut p: Vec<(f64, f64)> =
                s.file.cases.iter().filter(|c| c.backend == s.backend && c.op == "latency").map(|c| (c.items as f64, c.median_s * 1e3)).collect();
            p.sort_by(|a, b| a.0.total_cmp(&b.0));
            (s.name.clone(), p)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if !lat.is_empty() {
        out.push((
            "latency".to_string(),
            line_chart("Gather latency against batch size (INT8, small table; GPU: ids up and rows back)", "ids per call", "milliseconds per call", &lat),
        ));
    }
    out
}

/// The series that have a figure in a chart (the others would only crowd its legend).
fn present(series: impl Iterator<Item = (String, Vec<Option<f64>>)>) -> Vec<(String, Vec<Option<f64>>)> {
    series.filter(|(_, v)| v.iter().any(Option::is_some)).collect()
}

fn label(k: &Key, with_op: bool) -> String {
    let what = if k.op == "embed" { format!("{} texts", k.items) } else { k.size.clone() };
    if with_op {
        format!("{} {} {}", k.op, k.format, what)
    } else {
        format!("{} {}", k.format, what)
    }
}

fn when(unix: u64) -> String {
    // Civil date from days since 1970 (Howard Hinnant's algorithm).
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", secs / 3600, secs / 60 % 60)
}

fn machine_line(r: &Results) -> String {
    let m = &r.machine;
    let mut s = format!("{} — {}", r.label, m.os);
    if let Some(cpu) = &m.cpu {
        let _ = write!(s, ", {cpu}");
    }
    let _ = write!(s, ", {} core{}", m.cores, if m.cores == 1 { "" } else { "s" });
    if let Some(b) = m.memory_bytes {
        let _ = write!(s, ", {:.0} GiB", b as f64 / (1u64 << 30) as f64);
    }
    if let Some(ua) = &m.user_agent {
        let _ = write!(s, ", {ua}");
    }
    let _ = write!(s, "; {} suite v{}, {}, {}, {:.0} s", r.scale.name(), r.suite_version, r.tool, when(r.created_unix), r.seconds);
    s
}

/// The environment, cold start, peak memory and artifacts of a run, where the file has them
/// (files older than these fields have none: `None`).
fn environment_line(r: &Results) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(e) = &r.environment {
        parts.push(format!(
            "{} {} build, CPU path on {}, {}{}",
            e.target,
            e.profile,
            e.simd,
            e.runtime,
            if e.emulated { ", EMULATED (timings: correctness only)" } else { "" }
        ));
    }
    if let Some(c) = &r.cold_start {
        let named = [("module", c.module_s), ("engines", c.engines_s), ("model", c.model_s), ("first table", c.first_table_s), ("first call", c.first_call_s)];
        let known: Vec<String> = named.iter().filter_map(|(n, v)| v.map(|v| format!("{n} {}s", si(v)))).collect();
        if !known.is_empty() {
            parts.push(format!("cold start: {}", known.join(", ")));
        }
    }
    if let (Some(b), Some(kind)) = (r.peak_memory_bytes, &r.peak_memory_kind) {
        parts.push(format!("peak {kind} {:.1} MiB", b as f64 / (1u64 << 20) as f64));
    }
    for a in &r.artifacts {
        let gz = a.gzip_bytes.map_or(String::new(), |g| format!(", {:.2} MiB gzipped", g as f64 / (1u64 << 20) as f64));
        parts.push(format!("{} {:.2} MiB{gz}", a.name, a.bytes as f64 / (1u64 << 20) as f64));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn backend_line(b: &super::BackendInfo) -> String {
    let mut s = format!("{}: {}", b.id, b.name);
    for v in [&b.api, &b.device_type, &b.driver].into_iter().flatten() {
        let _ = write!(s, ", {v}");
    }
    if let Some(l) = &b.limits {
        let _ = write!(s, "; binding ≤ {} MiB", l.max_storage_buffer_binding_size >> 20);
    }
    if b.copy_gbps > 0.0 {
        match (b.buffer_copy_gbps, b.shader_copy_gbps) {
            (Some(buffer), Some(shader)) => {
                let _ = write!(s, "; copy {:.1} GB/s of {} MiB (copy kernel {shader:.1}, buffer copy {buffer:.1})", b.copy_gbps, b.copy_bytes >> 20);
            }
            _ => {
                let _ = write!(s, "; {} {:.1} GB/s of {} MiB", if b.kind == "gpu" { "buffer copy" } else { "memcpy" }, b.copy_gbps, b.copy_bytes >> 20);
            }
        }
    }
    if let Some(clock) = &b.clock {
        let _ = write!(s, "; timed by {clock}");
    }
    s
}

/// A plain-text summary for terminals: the machines and backends, then per measurement each
/// series' items per second and, in brackets, its ratio to its device's copy.
pub fn text(files: &[Results]) -> String {
    let ser = series(files);
    let mut out = String::new();
    for f in files {
        let _ = writeln!(out, "{}", machine_line(f));
        if let Some(e) = environment_line(f) {
            let _ = writeln!(out, "  {e}");
        }
        for b in &f.backends {
            let _ = writeln!(out, "  {}", backend_line(b));
        }
        if !f.skipped.is_empty() {
            let budget = f.skipped.iter().filter(|s| s.reason == "budget").count();
            let _ =
                writeln!(out, "  skipped: {} case(s){}", f.skipped.len(), if budget > 0 { format!(", {budget} for the time budget") } else { String::new() });
            for s in f.skipped.iter().filter(|s| s.reason != "budget") {
                let _ = writeln!(out, "    {} {} {} on {}: {}", s.op, s.format, s.size, s.backend, s.reason);
            }
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "items/s (ratio to the device's copy or memcpy) per series:");
    for (i, s) in ser.iter().enumerate() {
        let _ = writeln!(out, "  [{}] {}", i + 1, s.name);
    }
    let w = 18;
    let _ = write!(out, "{:<34}", "operation format size items");
    for i in 0..ser.len() {
        let _ = write!(out, "{:>w$}", format!("[{}]", i + 1));
    }
    let _ = writeln!(out);
    for k in keys(files) {
        let _ = write!(out, "{:<34}", format!("{} {} {} {}", k.op, k.format, k.size, k.items));
        for s in &ser {
            let cell = find(s, &k).map_or("-".to_string(), |c| {
                if c.ratio_to_copy.is_finite() && c.ratio_to_copy > 0.0 {
                    format!("{} ({:.2})", si(c.items_per_s), c.ratio_to_copy)
                } else {
                    si(c.items_per_s)
                }
            });
            let _ = write!(out, "{cell:>w$}");
        }
        let _ = writeln!(out);
    }
    // The round trips' tails, where a case has one.
    let mut tails = keys(files).into_iter().filter(|k| k.op == "latency").peekable();
    if tails.peek().is_some() {
        // In microseconds: the CPU path's calls of one id take a few (0.000 ms in milliseconds).
        let _ = writeln!(out, "\nlatency per call, P50 / P90 / P99 (µs):");
        for k in tails {
            let _ = write!(out, "{:<34}", format!("{} {} {} {}", k.op, k.format, k.size, k.items));
            for s in &ser {
                let cell = find(s, &k).map_or("-".to_string(), |c| match (c.p90_s, c.p99_s) {
                    (Some(p90), Some(p99)) => format!("{:.1}/{:.1}/{:.1}", 1e6 * c.median_s, 1e6 * p90, 1e6 * p99),
                    (None, Some(p99)) => format!("{:.1} / {:.1}", 1e6 * c.median_s, 1e6 * p99),
                    _ => format!("{:.1}", 1e6 * c.median_s),
                });
                let _ = write!(out, " {cell:>w$}");
            }
            let _ = writeln!(out);
        }
    }
    // The quality each case kept: the same for every backend of a file (computed from the same
    // table on the CPU), so one figure a key, from the first series that has it.
    let quality: Vec<(Key, &super::Quality)> =
        keys(files).into_iter().filter_map(|k| ser.iter().find_map(|s| find(s, &k)?.quality.as_ref()).map(|q| (k, q))).collect();
    if !quality.is_empty() {
        let _ = writeln!(out, "\nquality kept:");
        for (k, q) in quality.iter().filter(|(k, _)| k.op != "bag_sum" && k.op != "bag_mean" && k.op != "hashed_bag") {
            let _ = writeln!(out, "  {:<32} {} {:.6}", format!("{} {} {}", k.op, k.format, k.size), q.metric, q.value);
        }
    }
    out
}

/// The columns of [`csv`] and the fields of [`jsonl`]'s lines: a case with its run's identity.
pub const FLAT_FIELDS: [&str; 26] = [
    "label",
    "runtime",
    "target",
    "simd",
    "emulated",
    "backend",
    "backend_name",
    "op",
    "format",
    "size",
    "rows",
    "dim",
    "items",
    "unit",
    "timing",
    "reps",
    "p50_s",
    "p90_s",
    "p99_s",
    "first_call_s",
    "items_per_s",
    "gbps",
    "ratio_to_copy",
    "quality_metric",
    "quality",
    "peak_memory_bytes",
];

/// Every case of every file as a flat record of [`FLAT_FIELDS`] (absent values: JSON null).
fn flat(files: &[Results]) -> Vec<Vec<serde_json::Value>> {
    use serde_json::Value;
    let mut rows = Vec::new();
    for f in files {
        let env = f.environment.clone().unwrap_or_default();
        for c in &f.cases {
            let backend = f.backend(&c.backend).map_or(String::new(), |b| b.name.clone());
            let q = c.quality.as_ref();
            rows.push(vec![
                f.label.clone().into(),
                env.runtime.clone().into(),
                env.target.clone().into(),
                env.simd.clone().into(),
                env.emulated.into(),
                c.backend.clone().into(),
                backend.into(),
                c.op.clone().into(),
                c.format.clone().into(),
                c.size.clone().into(),
                c.rows.into(),
                c.dim.into(),
                c.items.into(),
                c.unit.clone().into(),
                c.timing.clone().into(),
                c.reps.into(),
                c.median_s.into(),
                c.p90_s.map_or(Value::Null, Value::from),
                c.p99_s.map_or(Value::Null, Value::from),
                c.first_call_s.into(),
                c.items_per_s.into(),
                c.gbps.into(),
                c.ratio_to_copy.into(),
                q.map_or(Value::Null, |q| q.metric.clone().into()),
                q.map_or(Value::Null, |q| q.value.into()),
                f.peak_memory_bytes.map_or(Value::Null, Value::from),
            ]);
        }
    }
    rows
}

/// The cases as CSV (RFC 4180: a header line, then a case a line; text quoted where it must be).
pub fn csv(files: &[Results]) -> String {
    let cell = |v: &serde_json::Value| match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(t) if t.contains([',', '"', '\n']) => format!("\"{}\"", t.replace('"', "\"\"")),
        serde_json::Value::String(t) => t.clone(),
        other => other.to_string(),
    };
    let mut out = FLAT_FIELDS.join(",");
    out.push('\n');
    for row in flat(files) {
        out.push_str(&row.iter().map(cell).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

/// The cases as JSON Lines: one object a case, with [`FLAT_FIELDS`] as keys.
pub fn jsonl(files: &[Results]) -> String {
    let mut out = String::new();
    for row in flat(files) {
        let object: serde_json::Map<String, serde_json::Value> = FLAT_FIELDS.iter().map(|k| k.to_string()).zip(row).collect();
        out.push_str(&serde_json::Value::Object(object).to_string());
        out.push('\n');
    }
    out
}

fn table_html(files: &[Results]) -> String {
    let ser = series(files);
    let mut t = String::from("<table><thead><tr><th>operation</th><th>format</th><th>size</th><th>items</th>");
    for s in &ser {
        let _ = write!(t, "<th>{}</th>", esc(&s.name));
    }
    t.push_str("</tr></thead><tbody>");
    for k in keys(files) {
        let _ = write!(t, "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>", esc(&k.op), esc(&k.format), esc(&k.size), k.items);
        for s in &ser {
            match find(s, &k) {
                Some(c) => {
                    let _ = write!(
                        t,
                        "<td title=\"median {} s, min {} s, P99 {} s, max {} s, first call {} s, {} reps, {} timing{}\">{}/s<br><small>{} s · ×{:.2} copy</small></td>",
                        si(c.median_s),
                        si(c.min_s),
                        c.p99_s.map_or("-".to_string(), si),
                        si(c.max_s),
                        si(c.first_call_s),
                        c.reps,
                        esc(&c.timing),
                        c.note.as_deref().map_or(String::new(), |n| format!("; {}", esc(n))),
                        si(c.items_per_s),
                        si(c.median_s),
                        c.ratio_to_copy
                    );
                }
                None => t.push_str("<td>-</td>"),
            }
        }
        t.push_str("</tr>");
    }
    t.push_str("</tbody></table>");
    t
}

/// The charts and the table as an HTML fragment (no page around it), for the demo page.
pub fn fragment(files: &[Results]) -> String {
    let mut h = String::new();
    for (id, svg) in charts(files) {
        let _ = write!(h, "<figure id=\"chart-{id}\">{svg}</figure>");
    }
    h.push_str(&table_html(files));
    h
}

/// One self-contained HTML page (no scripts, nothing fetched): machines, charts, all figures.
pub fn html(files: &[Results]) -> String {
    let mut h = String::from(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>edo benchmark report</title><style>body{font-family:sans-serif;margin:2em;max-width:1100px}figure{margin:1em 0}table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:nth-child(-n+4),th{text-align:left}small{color:#666}li{margin:.2em 0}</style></head><body><h1>edo benchmark report</h1>",
    );
    h.push_str("<p>Figures are medians over repetitions, warm-up excluded. Ratios are to what the same device did in the same run (its copy, the faster of <code>copy_buffer_to_buffer</code> and a copy kernel, or memcpy on the CPU path's threads): they are what compare across devices. Hover a bar or cell for the spread and first-call time.</p><ul>");
    for f in files {
        let _ = write!(h, "<li><b>{}</b><ul>", esc(&machine_line(f)));
        if let Some(e) = environment_line(f) {
            let _ = write!(h, "<li>{}</li>", esc(&e));
        }
        for b in &f.backends {
            let _ = write!(h, "<li>{}</li>", esc(&backend_line(b)));
        }
        if !f.skipped.is_empty() {
            let _ = write!(
                h,
                "<li>{} case(s) skipped: {}</li>",
                f.skipped.len(),
                esc(&f
                    .skipped
                    .iter()
                    .take(8)
                    .map(|s| format!("{} {} {} on {} ({})", s.op, s.format, s.size, s.backend, s.reason))
                    .collect::<Vec<_>>()
                    .join("; "))
            );
        }
        h.push_str("</ul></li>");
    }
    h.push_str("</ul>");
    h.push_str(&fragment(files));
    h.push_str("</body></html>\n");
    h
}

/// A Markdown page: machines, backends and one table per operation (for `docs/`).
pub fn markdown(files: &[Results]) -> String {
    let ser = series(files);
    let mut m = String::from("# Benchmark suite results\n\n");
    m.push_str("Generated by `edo bench compare` from the results files named below; do not edit by hand. Each cell: items per second at the median, and its ratio to the device's own copy (memcpy for the CPU path) measured in the same run.\n\n");
    for f in files {
        let _ = writeln!(m, "- **{}**", machine_line(f).replace('|', "/"));
        if let Some(e) = environment_line(f) {
            let _ = writeln!(m, "  - {}", e.replace('|', "/"));
        }
        for b in &f.backends {
            let _ = writeln!(m, "  - {}", backend_line(b));
        }
    }
    let ks = keys(files);
    let mut ops: Vec<&str> = ks.iter().map(|k| k.op.as_str()).collect();
    ops.dedup();
    for op in ops {
        let _ = writeln!(m, "\n## {op}\n");
        // The series that ran this operation.
        let ser: Vec<&Series> = ser.iter().filter(|s| ks.iter().any(|k| k.op == op && find(s, k).is_some())).collect();
        m.push_str("| format | size | items |");
        for s in &ser {
            let _ = write!(m, " {} |", s.name.replace('|', "/"));
        }
        m.push_str("\n|---|---|---|");
        for _ in &ser {
            m.push_str("---|");
        }
        m.push('\n');
        for k in ks.iter().filter(|k| k.op == op) {
            let _ = write!(m, "| {} | {} | {} |", k.format, k.size, k.items);
            for s in &ser {
                match find(s, k) {
                    Some(c) if c.ratio_to_copy.is_finite() && c.ratio_to_copy > 0.0 => {
                        let _ = write!(m, " {}/s ({:.2}) |", si(c.items_per_s), c.ratio_to_copy);
                    }
                    Some(c) => {
                        let _ = write!(m, " {}/s |", si(c.items_per_s));
                    }
                    None => m.push_str(" - |"),
                }
            }
            m.push('\n');
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_dates_read_as_people_write_them() {
        assert_eq!(si(1_234_567.0), "1.23 M");
        assert_eq!(si(456_000.0), "456 k");
        assert_eq!(si(0.0078), "7.80 m");
        assert_eq!(si(0.0), "0.00");
        assert_eq!(si(f64::NAN), "-");
        assert_eq!(nice(3.2), 5.0);
        assert_eq!(nice(120.0), 200.0);
        assert_eq!(when(0), "1970-01-01 00:00 UTC");
        assert_eq!(when(1_764_553_500), "2025-12-01 01:45 UTC");
        assert_eq!(when(951_782_400), "2000-02-29 00:00 UTC");
    }

    /// The `bench_json` fuzz target's corpus (fuzz/corpus/bench_json, grown by scripts/checks/fuzz.sh):
    /// every file is read, and every one that reads is reported, alone and beside itself.
    #[test]
    fn fuzz_corpus_replays_without_panics() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/bench_json");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).expect("the corpus") {
            let bytes = std::fs::read(entry.expect("an entry").path()).expect("a corpus file");
            let Ok(text) = std::str::from_utf8(&bytes) else { continue };
            if let Ok(r) = Results::from_json(text) {
                let two = [r.clone(), r];
                for files in [&two[..1], &two[..]] {
                    assert!(text_report_and_html_are_whole(files));
                }
                read += 1;
            }
        }
        assert!(read >= 3, "the seeds read ({read})");
    }

    fn text_report_and_html_are_whole(files: &[Results]) -> bool {
        let h = html(files);
        let _ = (text(files), markdown(files));
        h.starts_with("<!doctype html>") && h.ends_with("</html>\n") && h.matches("<svg").count() == h.matches("</svg>").count()
    }

    #[test]
    fn charts_draw_every_series_and_escape_names() {
        let svg = bar_chart(
            "a <title>",
            "ids/s",
            &["x".into(), "y".into()],
            &[("s&1".into(), vec![Some(10.0), None]), ("s2".into(), vec![Some(1000.0), Some(5.0)])],
            true,
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("a &lt;title&gt;") && svg.contains("s&amp;1"));
        assert_eq!(svg.matches("<rect x=\"190\"").count(), 3, "one bar per value present");
        let empty = bar_chart("none", "ids/s", &["x".into()], &[("s".into(), vec![None])], false);
        assert!(empty.contains("no figures"));
        let line = line_chart("l", "ids", "ms", &[("a".into(), vec![(1.0, 0.5), (64.0, 0.7), (4096.0, 3.0)])]);
        assert_eq!(line.matches("<circle").count(), 3);
    }
}
