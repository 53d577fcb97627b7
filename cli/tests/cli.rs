//! The command line as a user runs it, and the README's promises about it.

use std::process::Command;

fn edo(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_edo")).args(args).output().expect("run edo")
}

#[test]
fn readme_names_the_two_commands_and_ci_runs_the_same_tests() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let ci = std::fs::read_to_string(format!("{root}/.ci/run")).unwrap();
    assert!(readme.contains("\ncargo run --release -- demo\n"), "README shows the main job");
    assert!(readme.contains("\n./scripts/test.sh\n"), "README shows the test command");
    assert!(ci.lines().any(|l| l.trim() == "./scripts/test.sh"), ".ci/run runs the README's test command");
    assert!(ci.contains("EDO_REQUIRE_GPU=1") && ci.contains("mesa-vulkan-drivers"), ".ci/run requires a GPU and installs lavapipe");
    assert!(
        ci.contains("EDO_REQUIRE_WEB=1") && ci.contains("chromium chromium-driver") && ci.contains("wasm-bindgen-cli"),
        ".ci/run requires the browser tests and installs what they need"
    );
}

#[test]
fn bench_json_reports_every_format_with_figures() {
    let out = edo(&["bench", "--rows", "3000", "--dim", "20", "--ids", "777", "--iters", "2", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    let formats = report["formats"].as_array().unwrap();
    assert_eq!(formats.len(), edo::Format::ALL.len());
    for f in formats {
        assert!(f["cpu"]["seconds"].as_f64().unwrap() > 0.0);
        assert!(f["bytes"].as_u64().unwrap() > 0);
        // With a GPU the report has GPU figures and a copy bandwidth to compare them with.
        if report["adapter"].is_string() {
            assert!(f["gpu"]["ratio_to_copy"].as_f64().unwrap() > 0.0);
            assert!(f["gpu_bag"]["ratio_to_copy"].as_f64().unwrap() > 0.0, "bags of 16 timed too");
            let copies = &report["gpu_copies"];
            assert!(copies["buffer"].as_f64().unwrap() > 0.0 && copies["shader"].as_f64().unwrap() > 0.0, "{copies}");
        }
    }
    if std::env::var("EDO_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        assert!(report["adapter"].is_string(), "EDO_REQUIRE_GPU=1 but the bench ran without a GPU: {}", report["no_gpu_reason"]);
    }
}

#[test]
fn demo_prints_accuracy_and_speed_tables() {
    let out = edo(&["demo", "--rows", "2000", "--dim", "33", "--ids", "100", "--iters", "1", "--cpu"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in ["mean cos", "% memcpy", "GPU: none (--cpu given)", "int8", "binary+scale"] {
        assert!(text.contains(needle), "demo output lacks {needle:?}:\n{text}");
    }
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let out = edo(&["bench", "--formats", "int3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown format"));
    for (args, flag) in [(&["demo", "--dim", "0"][..], "--dim"), (&["bench", "--ids", "0"], "--ids"), (&["bench", "--shard-mib", "0"], "--shard-mib")] {
        let out = edo(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(flag), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // A mistyped command is offered today's names, not the hidden old ones (`search-bench`).
    let out = edo(&["search"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("'bench search'") && !err.contains("search-bench"), "{err}");
    // The demo's help gives the demo's defaults, the benchmark's its own.
    let demo = String::from_utf8_lossy(&edo(&["demo", "--help"]).stdout).into_owned();
    assert!(demo.contains("[default: 1 000 000]") && !demo.contains("2 000 000"), "{demo}");
    assert!(String::from_utf8_lossy(&edo(&["bench", "--help"]).stdout).contains("[default: 2 000 000"));
}

fn fixture(name: &str) -> String {
    format!("{}/../tests/data/files/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A directory of one test's own under the temporary directory, removed when it goes out of
/// scope (the test's files do not pile up run after run).
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("edo-cli-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ok(args: &[&str]) -> String {
    let out = edo(args);
    assert!(out.status.success(), "edo {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn quantize_inspect_lookup_export_a_checkpoint_tensor() {
    let dir = Scratch::new("checkpoint");
    let t = dir.path("words.edo");
    let t = t.to_str().unwrap();
    let st = fixture("model.safetensors");
    let out = ok(&["quantize", &st, "--tensor", "embeddings.word_embeddings.weight", "--format", "int8", "-o", t]);
    assert!(out.contains("int8 37 × 13"), "{out}");

    // inspect finds the recorded source, reports the error and writes the picture.
    let png = dir.path("words.png");
    let _ = std::fs::remove_file(&png);
    let out = ok(&["inspect", t]);
    for needle in ["37 rows × 13 dim", "checksums OK", "embeddings.word_embeddings.weight", "RMSE", "37 of 37 rows within it", "picture:"] {
        assert!(out.contains(needle), "inspect lacks {needle:?}:\n{out}");
    }
    let img = image::open(&png).expect("inspect wrote a PNG").to_rgb8();
    assert_eq!(img.height(), 37 * 13, "37 rows magnified 13×");
    assert!(img.width() > 2 * 13, "two panels");

    let json: serde_json::Value = serde_json::from_str(&ok(&["inspect", t, "--json", "--no-png"])).unwrap();
    assert_eq!(json["rows"], 37);
    assert_eq!(json["format"], "int8");
    assert!(json["error"]["max_abs"].as_f64().unwrap() > 0.0);
    assert_eq!(json["error"]["rows_beyond_bound"], 0);

    // lookup: the same values as the library's CPU path on the same file.
    let table = edo::file::TableFile::open(t).unwrap();
    let want = edo::cpu::gather(table.table(), &[5, 0], edo::Bounds::Error).unwrap();
    let json: serde_json::Value = serde_json::from_str(&ok(&["lookup", t, "--ids", "5,0", "--json"])).unwrap();
    let got: Vec<f32> =
        json["rows"].as_array().unwrap().iter().flat_map(|r| r["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32)).collect();
    assert_eq!(got, want);

    // export as FBGEMM rows, then import those back: the same table.
    let npy = dir.path("words_fbgemm.npy");
    ok(&["export", t, "-o", npy.to_str().unwrap()]);
    let back = dir.path("back.edo");
    ok(&["quantize", npy.to_str().unwrap(), "--layout", "fbgemm8", "-f", "int8", "-o", back.to_str().unwrap()]);
    assert_eq!(edo::file::TableFile::open(&back).unwrap().table(), table.table());

    // Any format's export reads back as it was: a .npy with the format named as its layout (the
    // export says how), a .safetensors by itself. q8_0 at dim 13: a short block, whole in GGUF.
    let q = dir.path("words_q8.edo");
    ok(&["quantize", &fixture("table_f32.npy"), "-f", "q8_0", "-o", q.to_str().unwrap()]);
    let q_table = edo::file::TableFile::open(&q).unwrap();
    let q_npy = dir.path("words_q8.npy");
    let out = ok(&["export", q.to_str().unwrap(), "-o", q_npy.to_str().unwrap()]);
    assert!(out.contains("--layout q8_0 --dim 13"), "{out}");
    ok(&["quantize", q_npy.to_str().unwrap(), "--layout", "q8_0", "--dim", "13", "-f", "q8_0", "-o", back.to_str().unwrap()]);
    assert_eq!(edo::file::TableFile::open(&back).unwrap().table(), q_table.table());
    let e = edo(&["quantize", q_npy.to_str().unwrap(), "--layout", "q8_0", "-f", "q8_0", "-o", back.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&e.stderr).contains("any dim from 1 to 32: pass the dim"), "{}", String::from_utf8_lossy(&e.stderr));
    assert_eq!(e.status.code(), Some(2), "a dim to pass is an argument, not a malformed file");
    let q_st = dir.path("words_q8.safetensors");
    ok(&["export", q.to_str().unwrap(), "-o", q_st.to_str().unwrap()]);
    ok(&["quantize", q_st.to_str().unwrap(), "-f", "q8_0", "-o", back.to_str().unwrap()]);
    assert_eq!(edo::file::TableFile::open(&back).unwrap().table(), q_table.table());

    // FBGEMM 4-bit rows of an odd dim read as the even dim their width holds, and say so.
    let i4 = dir.path("words_i4.edo");
    ok(&["quantize", &fixture("table_f32.npy"), "-f", "int4", "-o", i4.to_str().unwrap()]);
    let i4_npy = dir.path("words_i4.npy");
    ok(&["export", i4.to_str().unwrap(), "-o", i4_npy.to_str().unwrap()]);
    let r = edo(&["quantize", i4_npy.to_str().unwrap(), "--layout", "fbgemm4", "-f", "int4", "-o", back.to_str().unwrap()]);
    assert!(
        r.status.success()
            && String::from_utf8_lossy(&r.stderr).contains("read as 14 values a row")
            && String::from_utf8_lossy(&r.stderr).contains("13 a row, pass --dim"),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
}

#[test]
fn text_tables_keep_tokens_for_lookup() {
    let dir = Scratch::new("text");
    let t = dir.path("glove.edo");
    let t = t.to_str().unwrap();
    ok(&["quantize", &fixture("glove.txt"), "-f", "fp16", "-o", t]);
    let out = ok(&["lookup", t, "--tokens", "word3,word7"]);
    assert!(out.starts_with("3 \"word3\": [0.25000, 0.25000"), "{out}");
    assert!(out.contains("7 \"word7\""), "{out}");
    let out = edo(&["lookup", t, "--tokens", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"nope\" is not in the vocabulary"));
    // Text export and re-import round trips the decoded values and tokens.
    let txt = dir.path("glove_out.txt");
    ok(&["export", t, "-o", txt.to_str().unwrap()]);
    let again = edo::file::import::text(std::fs::read(&txt).unwrap()).unwrap();
    assert_eq!(again.vocab.unwrap().token(7), Some("word7"));
}

#[test]
fn exit_codes_say_what_went_wrong() {
    let dir = Scratch::new("exit-codes");
    let t = dir.path("codes.edo");
    let t = t.to_str().unwrap();
    ok(&["quantize", &fixture("table_f32.npy"), "-f", "int4", "-o", t]);
    let code = |args: &[&str]| {
        let out = edo(args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(err.starts_with("edo: error: ") || out.status.code() == Some(2), "{args:?}: {err}");
        (out.status.code(), err)
    };
    // Missing input: 66.
    assert_eq!(code(&["inspect", "/nonexistent/t.edo"]).0, Some(66));
    assert_eq!(code(&["quantize", "/nonexistent/x.npy", "-f", "int8", "-o", t]).0, Some(66));
    // Malformed input: 65, with the reason.
    let junk = dir.path("junk.edo");
    std::fs::write(&junk, b"definitely not a table").unwrap();
    let (c, err) = code(&["inspect", junk.to_str().unwrap()]);
    assert_eq!(c, Some(65), "{err}");
    assert!(err.contains("malformed edo table file"), "{err}");
    let (c, err) = code(&["quantize", &fixture("ubinary.npy"), "-f", "int8", "-o", dir.path("u.edo").to_str().unwrap()]);
    assert_eq!(c, Some(65), "{err}");
    assert!(err.contains("layout"), "{err}");
    // Damaged rows: 65, and inspect still prints what it can.
    let mut bytes = std::fs::read(t).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0x40;
    let damaged = dir.path("damaged.edo");
    std::fs::write(&damaged, bytes).unwrap();
    let out = edo(&["inspect", damaged.to_str().unwrap(), "--no-png"]);
    assert_eq!(out.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&out.stdout).contains("checksums FAILED"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("checksum mismatch"));
    // A table of no rows: nothing to compare, no row named.
    let npy = edo::file::export::Array { dtype: edo::file::npy::Dtype::F32, shape: vec![0, 4], data: Vec::new() }.to_npy();
    let (empty, empty_edo) = (dir.path("empty.npy"), dir.path("empty.edo"));
    std::fs::write(&empty, npy).unwrap();
    ok(&["quantize", empty.to_str().unwrap(), "-f", "int8", "-o", empty_edo.to_str().unwrap()]);
    let shown = ok(&["inspect", empty_edo.to_str().unwrap(), "--no-png", "--source", empty.to_str().unwrap()]);
    assert!(shown.contains("no rows to compare") && !shown.contains("(row 0)"), "{shown}");
    // Bad arguments: 2.
    assert_eq!(code(&["lookup", t, "--ids", "37"]).0, Some(2));
    assert!(ok(&["lookup", t, "--ids", "3", "--show", "0"]).ends_with(": [… 13 more]\n"), "no values shown, no stray comma");
    assert_eq!(code(&["quantize", &fixture("table_f32.npy"), "-f", "int8", "-o", dir.path("x.npy").to_str().unwrap()]).0, Some(2));
    // Unwritable output: 74.
    assert_eq!(code(&["quantize", &fixture("table_f32.npy"), "-f", "int8", "-o", "/nonexistent/dir/t.edo"]).0, Some(74));
}

#[test]
fn eval_prints_recall_memory_and_latency_per_method() {
    let out = ok(&["eval", "--rows", "3000", "--dim", "64", "--queries", "20", "--iters", "1", "--json"]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let methods = r["methods"].as_array().unwrap();
    let by = |name: &str, path: &str| {
        methods.iter().find(|m| m["name"].as_str().unwrap().starts_with(name) && m["path"] == path).unwrap_or_else(|| panic!("no {name} on {path}"))
    };
    assert_eq!(by("fp32 exact", "CPU")["recall_at_10"], 1.0);
    let plain = by("binary hamming", "CPU")["recall_at_10"].as_f64().unwrap();
    let rescored = by("binary + int8 rescore", "CPU")["recall_at_10"].as_f64().unwrap();
    assert!(rescored > plain && rescored >= 0.9, "rescored {rescored}, plain {plain}");
    assert!(by("binary hamming", "CPU")["ratio_to_fp32"].as_f64().unwrap() < 0.04);
    if r["adapter"].is_string() {
        assert_eq!(by("binary + int8 rescore", "GPU")["recall_at_10"].as_f64().unwrap(), rescored);
    }
    // Centred and ITQ codes, alone and rescored.
    for name in ["binary centred hamming", "binary itq hamming", "binary centred + int8 rescore ×4", "binary itq + int8 rescore ×4"] {
        assert!(by(name, "CPU")["recall_at_10"].as_f64().unwrap() > 0.0, "{name}");
    }
    assert!(by("binary itq + int8 rescore", "CPU")["recall_at_10"].as_f64().unwrap() >= 0.9);
    // Rows wider than ITQ trains: the report goes on without its rows.
    let wide: serde_json::Value =
        serde_json::from_str(&ok(&["eval", "--rows", "1100", "--dim", "1030", "--queries", "3", "--iters", "1", "--cpu", "--json"])).unwrap();
    let names: Vec<&str> = wide["methods"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"binary centred hamming") && !names.iter().any(|n| n.contains("itq")), "{names:?}");
    // A table from a file: its last rows are the queries.
    let out = ok(&["eval", "--input", &fixture("glove.txt"), "--queries", "5", "--iters", "1", "--cpu"]);
    assert!(out.contains("32 × 13 corpus, 5 queries"), "{out}");
}

#[test]
fn search_bench_checks_the_gpu_against_the_cpu() {
    let out = ok(&["bench", "search", "--rows", "5000", "--bits", "200", "--queries", "7", "--k", "5", "--iters", "1", "--json"]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["ids"].as_array().unwrap().len(), 35);
    assert!(r["cpu_queries_per_second"].as_f64().unwrap() > 0.0);
    if std::env::var("EDO_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        assert_eq!(r["gpu_equals_cpu"], true);
        assert!(r["gpu_scan_ratio_to_copy"].as_f64().unwrap() > 0.0);
        // Seven queries in one tile of up to eight: one read of the corpus.
        assert_eq!(r["gpu_corpus_reads"], 1);
        assert!(r["gpu_read_ratio_to_copy"].as_f64().unwrap() > 0.0);
    }
}

/// Where faiss is installed (numpy + faiss-cpu), the peer script checks edo's distances against
/// faiss IndexBinaryFlat's on the same codes, rank by rank.
#[test]
fn distances_equal_faiss_where_it_is_installed() {
    let has_faiss = Command::new("python3").args(["-c", "import numpy, faiss"]).output().is_ok_and(|o| o.status.success());
    if !has_faiss {
        eprintln!("SKIPPED: faiss not installed (pip install numpy faiss-cpu)");
        return;
    }
    let script = format!("{}/../scripts/peers/faiss_peer.py", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .args([&script, "--rows", "20000", "--bits", "200", "--queries", "12", "--k", "25", "--iters", "1", "--edo", env!("CARGO_BIN_EXE_edo")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("distances equal faiss's, rank by rank: yes"), "{text}");
}

#[test]
fn cache_bench_reports_every_policy_and_checks_against_the_resident_table() {
    let out = ok(&["bench", "cache", "--rows", "20000", "--dim", "24", "--warmup", "30", "--batches", "6", "--batch", "1000", "--json"]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let runs = r["runs"].as_array().unwrap();
    for run in runs {
        let hit = run["hit_rate"].as_f64().unwrap();
        assert!(hit > 0.3 && hit <= 1.0, "{run}");
        assert!(run["bytes_uploaded_per_lookup"].as_f64().unwrap() > 0.0, "{run}");
    }
    let optimum = r["static_optimum"].as_array().unwrap();
    assert_eq!(optimum.len(), 2);
    if std::env::var("EDO_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        assert_eq!(r["equals_resident"], true);
        // Every policy and LFU with prefetch, at each of two cache sizes.
        assert_eq!(runs.len(), 2 * (edo::cache::PolicyKind::ALL.len() + 1));
        assert!(runs.iter().all(|run| run["ratio_to_resident"].as_f64().unwrap() > 0.0));
        for run in runs {
            let (p50, p99) = (run["batch_p50_s"].as_f64().unwrap(), run["batch_p99_s"].as_f64().unwrap());
            assert!(p50 > 0.0 && p99 >= p50, "{run}");
            assert!(run["resident_batch_p99_s"].as_f64().unwrap() >= run["resident_batch_p50_s"].as_f64().unwrap(), "{run}");
        }
    }
    let text = ok(&["bench", "cache", "--rows", "5000", "--warmup", "10", "--batches", "3", "--cpu", "--policies", "lru,arc"]);
    for needle in ["no GPU", "lru", "arc", "optimum", "uploaded/id"] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
    let bad = edo(&["bench", "cache", "--fractions", "0"]);
    assert_eq!(bad.status.code(), Some(2));

    // Issue 35: the other streams and a trace, with Belady's bound beside every policy.
    let text = ok(&["bench", "cache", "--rows", "5000", "--warmup", "10", "--batches", "3", "--cpu", "--stream", "scan"]);
    assert!(text.contains("of them a scan") && text.contains("belady") && text.contains("lfu+tinylfu"), "{text}");
    let dir = Scratch::new("cache-trace");
    let trace = dir.path("trace.txt");
    let ids: Vec<String> = edo::synth::zipf_ids(20_000, 3000, 1.1, 5).iter().map(|i| i.to_string()).collect();
    std::fs::write(&trace, format!("# a trace\n{}\n", ids.join("\n"))).unwrap();
    let out = ok(&["bench", "cache", "--rows", "3000", "--cpu", "--trace", trace.to_str().unwrap(), "--batch", "500", "--json"]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((r["warmup_batches"].as_u64(), r["batches"].as_u64()), (Some(20), Some(20)), "the trace's halves");
    let bound = r["belady"][0][1].as_f64().unwrap();
    for run in r["runs"].as_array().unwrap() {
        let hit = run["hit_rate"].as_f64().unwrap();
        assert!(hit > 0.3 && hit <= bound, "{run} against Belady's {bound}");
        // The CPU path's cache, measured: rates and tail times beside the resident table's.
        assert!(run["lookups_per_second"].as_f64().unwrap() > 0.0 && run["ratio_to_resident"].as_f64().unwrap() > 0.0, "{run}");
        assert!(run["batch_p99_s"].as_f64().unwrap() >= run["batch_p50_s"].as_f64().unwrap(), "{run}");
    }
    assert_eq!(r["equals_resident"], true, "the CPU path's cache returns the resident rows");
    for (bytes, needle) in [("1\n2\nx\n", "line 3"), ("", "no ids"), ("1\n3000\n", "out of range")] {
        std::fs::write(&trace, bytes).unwrap();
        let bad = edo(&["bench", "cache", "--rows", "3000", "--cpu", "--trace", trace.to_str().unwrap()]);
        assert_eq!(bad.status.code(), Some(2), "{needle}");
        assert!(String::from_utf8_lossy(&bad.stderr).contains(needle), "{needle}: {}", String::from_utf8_lossy(&bad.stderr));
    }
}

#[test]
fn plan_fits_the_budget_and_explains_itself() {
    let out = ok(&["plan", "--budget", "3MiB", "--table", "users:200000:32:zipf=1.1", "--table", "items:50000:16:uniform:lookups=2", "--json"]);
    let p: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(p["bytes"].as_u64().unwrap() <= 3 << 20);
    assert_eq!(p["tables"].as_array().unwrap().len(), 2);
    assert!(p["expected_error"].as_f64().unwrap() < p["int8_error"].as_f64().unwrap());
    let text = ok(&["plan", "--table", "a:100000:64"]);
    for needle in ["INT8 everywhere", "expected error", "a ", "1 table into"] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
    // A table already in INT8 has no error against INT8: no ratio to it (it was NaN).
    let dir = Scratch::new("plan-int8");
    let int8 = dir.path("t.edo");
    ok(&["quantize", &fixture("table_f32.npy"), "--format", "int8", "-o", int8.to_str().unwrap()]);
    let text = ok(&["plan", "--table", &format!("t={}", int8.display())]);
    assert!(text.contains("expected error") && !text.contains("NaN"), "{text}");
    let bad = edo(&["plan", "--table", "a:10:0"]);
    assert_eq!(bad.status.code(), Some(2));
    // A budget no plan fits is an argument to change: 2.
    let small = edo(&["plan", "--budget", "1KiB", "--table", "a:100000:64"]);
    assert_eq!(small.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&small.stderr).contains("smallest plan"), "{}", String::from_utf8_lossy(&small.stderr));
}

#[test]
fn plan_writes_the_tables_it_plans_from_files() {
    use edo::file::{export::Array, npy, TableFile};
    use edo::{Bounds, Format, Lookup, MixedTable, PackedTable};
    let dir = Scratch::new("plan-write");
    let (rows, dim) = (20_000, 32);
    let data = edo::synth::embedding_table(rows, dim, 3);
    let words = dir.path("words.npy");
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(&words, Array { dtype: npy::Dtype::F32, shape: vec![rows, dim], data: bytes }.to_npy()).unwrap();
    let out = dir.path("planned");
    let (w, o) = (words.to_str().unwrap(), out.to_str().unwrap());
    let table = format!("words={w}:zipf=1.2");
    let plan = |args: &[&str]| -> String {
        let json = ok(&[&["plan", "--table", &table, "--write", o, "--json"], args].concat());
        let p: serde_json::Value = serde_json::from_str(&json).unwrap();
        p["tables"][0]["choice"].as_str().unwrap().to_string()
    };

    // No caches, a budget between INT4 and FP16 everywhere: precision mixed for a skewed table.
    let choice = plan(&["--budget", "600KiB", "--min-hit-rate", "2"]);
    assert_eq!(choice, "mixed: 4000 hot rows fp16, rest int4");
    let hot = TableFile::open(out.join("words.hot.edo")).unwrap();
    let cold = TableFile::open(out.join("words.cold.edo")).unwrap();
    assert_eq!((hot.metadata()["plan.choice"].as_str(), hot.metadata()["plan.part"].as_str()), (choice.as_str(), "hot"));
    let ids_file = std::fs::read(out.join("words.hot_rows.npy")).unwrap();
    let ids = npy::read(&ids_file).unwrap();
    assert_eq!((ids.dtype, ids.shape.clone()), (npy::Dtype::U32, vec![4000]));
    let hot_rows: Vec<u32> = ids.data.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    assert_eq!(hot_rows, (0..4000).collect::<Vec<u32>>(), "under Zipf the first rows are the hot ones");
    // Rebuilt from its parts, it is the table the choice builds, bit for bit, within the budget.
    let mixed = MixedTable::from_parts(&hot_rows, hot.into_table(), cold.into_table()).unwrap();
    let want = MixedTable::quantize(&data, rows, dim, &hot_rows, Format::F16, Format::Int4).unwrap();
    let all: Vec<u32> = (0..rows as u32).collect();
    assert_eq!(mixed.gather(&all, Bounds::Error).unwrap(), want.gather(&all, Bounds::Error).unwrap());
    assert!(mixed.bytes() <= 600 << 10, "{} bytes", mixed.bytes());

    // A cache: the host table in its format, with the cache's rows noted.
    let choice = plan(&["--budget", "900KiB"]);
    assert!(choice.starts_with("cached fp16"), "{choice}");
    let t = TableFile::open(out.join("words.edo")).unwrap();
    assert_eq!(t.metadata()["plan.choice"], choice);
    assert!(choice.contains(&format!("{} rows", t.metadata()["plan.cache_rows"])), "{choice}");
    assert_eq!(t.table().words(), PackedTable::quantize(Format::F16, &data, rows, dim).unwrap().words());

    // Resident when the budget holds FP16 everywhere.
    assert_eq!(plan(&["--budget", "2MiB", "--formats", "fp16,int8"]), "resident fp16");
    assert!(!TableFile::open(out.join("words.edo")).unwrap().metadata().contains_key("plan.cache_rows"));

    // Tables without rows cannot be written; a missing file is named.
    let bad = edo(&["plan", "--table", "a:1000:8", "--write", o]);
    assert_eq!(bad.status.code(), Some(2));
    let missing = edo(&["plan", "--table", "a=/nonexistent/t.npy"]);
    assert_eq!(missing.status.code(), Some(66), "{}", String::from_utf8_lossy(&missing.stderr));
    // A name given twice would write one table over the other.
    let twice = edo(&["plan", "--table", &table, "--table", "words:1000:8", "--write", o]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&twice.stderr).contains("given twice"), "{}", String::from_utf8_lossy(&twice.stderr));
}

#[test]
fn embed_prints_model2vecs_vectors_and_writes_npy() {
    let model = format!("{}/../tests/data/models/wordpiece", env!("CARGO_MANIFEST_DIR"));
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{}/../tests/data/models/expected.json", env!("CARGO_MANIFEST_DIR"))).unwrap()).unwrap();
    let texts: Vec<String> = expected["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
    let mut args = vec!["embed".to_string(), model.clone(), "--json".into()];
    for t in &texts[1..4] {
        args.extend(["--text".to_string(), t.clone()]);
    }
    let out = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let got: Vec<Vec<f32>> = serde_json::from_str(&out).unwrap();
    for (k, row) in got.iter().enumerate() {
        let want = expected["models"]["wordpiece"]["vectors"][k + 1].as_array().unwrap();
        for (a, b) in row.iter().zip(want) {
            assert!((a - b.as_f64().unwrap() as f32).abs() <= 1e-5, "text {k}: {a} vs {b}");
        }
    }
    let dir = Scratch::new("embed");
    let input = dir.path("lines.txt");
    std::fs::write(&input, "the quick brown fox\ncafé naïve\n").unwrap();
    let npy_path = dir.path("v.npy");
    let text = ok(&["embed", &model, "--input", input.to_str().unwrap(), "--format", "int8", "-o", npy_path.to_str().unwrap()]);
    assert!(text.contains("2 texts") && text.contains("int8"), "{text}");
    let bytes = std::fs::read(&npy_path).unwrap();
    let a = edo::file::npy::read(&bytes).unwrap();
    assert_eq!((a.dtype, a.shape.clone()), (edo::file::npy::Dtype::F32, vec![2, 16]));
    // No texts is a usage error; a folder that is no model says what is missing.
    assert_eq!(edo(&["embed", &model]).status.code(), Some(2));
    assert_eq!(edo(&["embed", "/nonexistent/model", "--text", "x"]).status.code(), Some(66));
}

/// `edo embed` streams: a file of texts read, embedded and written a batch at a time gives the
/// same .npy whatever the batch; the .npy goes to standard output (row count first) or a file
/// (count written last); standard input works; --json streams one array; bad input is named.
#[test]
fn embed_streams_batches_to_npy_json_and_standard_output() {
    use std::io::Write;
    let model = format!("{}/../tests/data/models/wordpiece", env!("CARGO_MANIFEST_DIR"));
    let dir = Scratch::new("embed-stream");
    let input = dir.path("lines.txt");
    // CRLF and LF endings, an empty line, a last line without an ending.
    std::fs::write(&input, "the quick brown fox\r\ncafé naïve\n\njumps over\nthe lazy dog\nlast line").unwrap();
    let input = input.to_str().unwrap();
    let whole = dir.path("whole.npy");
    ok(&["embed", &model, "--input", input, "-o", whole.to_str().unwrap()]);
    let whole = std::fs::read(&whole).unwrap();
    let a = edo::file::npy::read(&whole).unwrap();
    assert_eq!(a.shape, vec![6, 16], "six lines, as str::lines counts them");
    let split = dir.path("split.npy");
    let text = ok(&["embed", &model, "--input", input, "--batch", "4", "-o", split.to_str().unwrap()]);
    assert!(text.contains("6 texts") && text.contains("wrote"), "{text}");
    assert_eq!(std::fs::read(&split).unwrap(), whole, "batches of 4 write the bytes one batch does");

    // To standard output: the same bytes; the summary on standard error.
    let out = edo(&["embed", &model, "--input", input, "--batch", "1", "-o", "-"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, whole);
    assert!(String::from_utf8_lossy(&out.stderr).contains("6 texts"));

    // From standard input, to a file: the same bytes.
    let from_stdin = dir.path("stdin.npy");
    let mut child = Command::new(env!("CARGO_BIN_EXE_edo"))
        .args(["embed", &model, "--input", "-", "--batch", "2", "-o", from_stdin.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&std::fs::read(input).unwrap()).unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
    assert_eq!(std::fs::read(&from_stdin).unwrap(), whole);

    // --json streams one array of rows, the .npy's values.
    let json: Vec<Vec<f32>> = serde_json::from_str(&ok(&["embed", &model, "--input", input, "--batch", "4", "--json"])).unwrap();
    let values: Vec<f32> = a.data.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    assert_eq!(json.concat(), values);

    // An .npy on standard output needs its row count first: standard input has none to give.
    let out = edo(&["embed", &model, "--input", "-", "-o", "-"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    // A line that is not UTF-8 is named; a missing input file is exit 66.
    let bad = dir.path("bad.txt");
    std::fs::write(&bad, b"fine\nnot \xff utf-8\n").unwrap();
    let out = edo(&["embed", &model, "--input", bad.to_str().unwrap(), "-o", dir.path("bad.npy").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2"), "{}", String::from_utf8_lossy(&out.stderr));
    // Two lines that split one character between them: neither is UTF-8, though joined they are.
    std::fs::write(&bad, b"fine\nhalf \xc3\n\xa9 half\n").unwrap();
    let out = edo(&["embed", &model, "--input", bad.to_str().unwrap(), "-o", dir.path("bad.npy").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(edo(&["embed", &model, "--input", "/nonexistent/texts.txt", "--json"]).status.code(), Some(66));
    assert_eq!(edo(&["embed", &model, "--text", "x", "--batch", "0"]).status.code(), Some(2));
}

#[test]
fn quantize_model_writes_one_file_that_embeds_like_its_folder() {
    let root = format!("{}/..", env!("CARGO_MANIFEST_DIR"));
    let model = format!("{root}/tests/data/models/unigram_vq");
    let dir = Scratch::new("quantize-model");
    let file = dir.path("m.edo");
    let out = ok(&["quantize-model", &model, "--format", "int8", "-o", file.to_str().unwrap()]);
    assert!(out.contains("146-token vocabulary") && out.contains("int8") && out.contains("mean cosine 0.99"), "{out}");
    // The file embeds as the folder quantised to the same format does (the CPU path).
    let from_file: Vec<Vec<f32>> = serde_json::from_str(&ok(&["embed", file.to_str().unwrap(), "--text", "naïve café", "--json"])).unwrap();
    let from_dir: Vec<Vec<f32>> = serde_json::from_str(&ok(&["embed", &model, "--format", "int8", "--text", "naïve café", "--json"])).unwrap();
    assert_eq!(from_file, from_dir);
    let shown = ok(&["inspect", file.to_str().unwrap(), "--no-png"]);
    assert!(shown.contains("static embedding model: 146-token tokenizer"), "{shown}");
    assert!(shown.contains("quantisation error not measured: no source recorded") && !shown.contains("error:"), "{shown}");
    // WordLlama's layout (weights + tokenizer), Matryoshka-truncated; the real model is tested
    // in tests/model.rs, a made-up one here.
    let tokenizer = format!("{model}/tokenizer.json");
    let weights = format!("{model}/model.safetensors");
    let wl = dir.path("wl.edo");
    let out = ok(&["quantize-model", &weights, "--wordllama", "--tokenizer", &tokenizer, "--dim", "8", "--format", "fp16", "-o", wl.to_str().unwrap()]);
    assert!(out.contains("40 × 8 table"), "{out}");
    // Refusals: not .edo output, --dim without --wordllama, a source that is no model.
    assert_eq!(edo(&["quantize-model", &model, "-o", dir.path("m.npy").to_str().unwrap()]).status.code(), Some(2));
    assert_eq!(edo(&["quantize-model", &model, "--dim", "8", "-o", file.to_str().unwrap()]).status.code(), Some(2));
    let not_model = edo(&["embed", &fixture("table_f32.npy"), "--text", "x"]);
    assert_eq!(not_model.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&not_model.stderr).contains("a .npy table, not a model (a model is a folder or an .edo model file)"));
    assert_eq!(edo(&["embed", dir.path("absent.npy").to_str().unwrap(), "--text", "x"]).status.code(), Some(66), "missing, not of the wrong kind");
    let plain = dir.path("plain.edo");
    ok(&["quantize", &fixture("table_f32.npy"), "--format", "int8", "-o", plain.to_str().unwrap()]);
    let not_model = edo(&["embed", plain.to_str().unwrap(), "--text", "x"]);
    assert_eq!(not_model.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&not_model.stderr).contains("quantize-model"), "{}", String::from_utf8_lossy(&not_model.stderr));
}

#[test]
fn embed_bench_reports_texts_per_second_per_format_and_batch() {
    let model = format!("{}/../tests/data/models/unigram_vq", env!("CARGO_MANIFEST_DIR"));
    let dir = Scratch::new("embed-bench");
    let texts = dir.path("texts.txt");
    let out = ok(&["bench", "embed", &model, "--cpu", "--json", "--iters", "1", "--formats", "fp32,int4", "--texts-out", texts.to_str().unwrap()]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6, "two formats × three batch sizes");
    for run in runs {
        assert!(run["cpu_texts_per_second"].as_f64().unwrap() > 0.0 && run["gpu_texts_per_second"].is_null(), "{run}");
    }
    assert!(runs[3]["table_bytes"].as_u64() < runs[0]["table_bytes"].as_u64(), "INT4 is smaller");
    assert_eq!(std::fs::read_to_string(&texts).unwrap().lines().count(), 1024);
    // No repetitions to time is a bad argument, for every benchmark.
    for command in [&["bench", "embed", &model][..], &["bench"], &["demo"], &["bench", "search"], &["eval"]] {
        let out = edo(&[command, &["--iters", "0"]].concat());
        assert_eq!(out.status.code(), Some(2), "{command:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("at least 1 repetition"), "{command:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn index_and_query_find_a_line_by_its_meaning() {
    let model = format!("{}/../tests/data/models/wordpiece", env!("CARGO_MANIFEST_DIR"));
    let dir = Scratch::new("index");
    let corpus = dir.path("corpus.txt");
    let lines = [
        "the quick brown fox jumps over the lazy dog",
        "embedding tables are compressed and looked up on the GPU",
        "café naïve résumé jalapeño",
        "",
        "Graphics processors run compute shaders written in WGSL",
        "numbers 12345 and 3.14159",
        "a longer sentence about retrieval, recommender systems and quantisation of vectors",
    ];
    std::fs::write(&corpus, lines.join("\n")).unwrap();
    let index = dir.path("corpus.edo");
    let out = ok(&["index", &model, corpus.to_str().unwrap(), "-o", index.to_str().unwrap()]);
    assert!(out.contains("indexed 6 lines"), "{out}");
    // Each line's own words find it first.
    for line in lines.iter().filter(|l| !l.is_empty()) {
        let out = ok(&["query", index.to_str().unwrap(), line, "-k", "3"]);
        let first = out.lines().nth(1).unwrap();
        assert!(first.trim_start().starts_with("1.") && first.ends_with(line), "{line:?}:\n{out}");
    }
    assert_eq!(edo(&["query", index.to_str().unwrap(), "x", "-k", "0"]).status.code(), Some(2));
    // One code of the last row damaged: a checksum error (65), not other neighbours.
    let mut bytes = std::fs::read(&index).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let rows_end = header["rows"]["data_offsets"][1].as_u64().unwrap() as usize;
    bytes[8 + header_len + rows_end - 1] ^= 0x40;
    let damaged = dir.path("damaged.edo");
    std::fs::write(&damaged, bytes).unwrap();
    let out = edo(&["query", damaged.to_str().unwrap(), "--model", &model, "fox"]);
    assert_eq!(out.status.code(), Some(65), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("checksum mismatch"), "{}", String::from_utf8_lossy(&out.stderr));
    // A table without lines, an empty corpus: typed refusals.
    let plain = dir.path("plain.edo");
    ok(&["quantize", &fixture("table_f32.npy"), "--format", "int8", "-o", plain.to_str().unwrap()]);
    assert_eq!(edo(&["query", plain.to_str().unwrap(), "--model", &model, "x"]).status.code(), Some(65));
    // A table with lines that `edo index` did not write (a GloVe file's words) is not an index.
    let words = dir.path("words.edo");
    ok(&["quantize", &fixture("glove.txt"), "--format", "int8", "-o", words.to_str().unwrap()]);
    let out = edo(&["query", words.to_str().unwrap(), "--model", &model, "x"]);
    assert_eq!(out.status.code(), Some(65), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an index"), "{}", String::from_utf8_lossy(&out.stderr));
    // Another model of the same dim is refused; the same model under another path is the same.
    let other = format!("{}/../tests/data/models/wordpiece_int8", env!("CARGO_MANIFEST_DIR"));
    let out = edo(&["query", index.to_str().unwrap(), "--model", &other, "fox"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not the model that wrote"), "{}", String::from_utf8_lossy(&out.stderr));
    let copy = dir.path("model-copy");
    std::fs::create_dir(&copy).unwrap();
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(format!("{model}/{f}"), copy.join(f)).unwrap();
    }
    ok(&["query", index.to_str().unwrap(), "--model", copy.to_str().unwrap(), "fox"]);
    // An index whose model has moved names it as the index's, and the way out; past 1024 results, 2.
    let moved = dir.path("moved.edo");
    ok(&["index", copy.to_str().unwrap(), corpus.to_str().unwrap(), "-o", moved.to_str().unwrap()]);
    std::fs::rename(&copy, dir.path("model-moved")).unwrap();
    let out = edo(&["query", moved.to_str().unwrap(), "fox"]);
    assert_eq!(out.status.code(), Some(66), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("records; give another with --model"), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::rename(dir.path("model-moved"), &copy).unwrap();
    // A question the model has no token of says so (its vector is zero).
    let out = edo(&["query", index.to_str().unwrap(), ""]);
    assert!(out.status.success() && String::from_utf8_lossy(&out.stderr).contains("knows no token"), "{}", String::from_utf8_lossy(&out.stderr));
    // More results than lines: every line. Past 1024 results of a larger index: 2, naming the -k given.
    assert!(ok(&["query", index.to_str().unwrap(), "fox", "-k", "200000"]).starts_with("6 of 6 lines"));
    let many = dir.path("many.txt");
    std::fs::write(&many, (0..1100).map(|i| format!("line {i} of the fox")).collect::<Vec<_>>().join("\n")).unwrap();
    let many_index = dir.path("many.edo");
    ok(&["index", &model, many.to_str().unwrap(), "-o", many_index.to_str().unwrap()]);
    let out = edo(&["query", many_index.to_str().unwrap(), "fox", "-k", "2000"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-k 2000: a search returns at most 1024"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(edo(&["bench", "search", "--cpu", "-k", "2000"]).status.code(), Some(2));
    // The same F32 model as an .edo model file, and reordered, is the same model.
    let (as_edo, hot) = (dir.path("model.edo"), dir.path("model-hot.edo"));
    ok(&["quantize-model", &model, "-f", "fp32", "-o", as_edo.to_str().unwrap()]);
    ok(&["query", index.to_str().unwrap(), "--model", as_edo.to_str().unwrap(), "fox"]);
    ok(&["reorder", as_edo.to_str().unwrap(), "--texts", corpus.to_str().unwrap(), "-o", hot.to_str().unwrap()]);
    ok(&["query", index.to_str().unwrap(), "--model", hot.to_str().unwrap(), "fox"]);
    // One value of the table changed, same format and shape: another model.
    let mut weights = std::fs::read(copy.join("model.safetensors")).unwrap();
    let last = weights.len() - 1;
    weights[last] ^= 0x01;
    std::fs::write(copy.join("model.safetensors"), weights).unwrap();
    let out = edo(&["query", index.to_str().unwrap(), "--model", copy.to_str().unwrap(), "fox"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let empty = dir.path("empty.txt");
    std::fs::write(&empty, "\n\n").unwrap();
    assert_eq!(edo(&["index", &model, empty.to_str().unwrap(), "-o", dir.path("e.edo").to_str().unwrap()]).status.code(), Some(65));
}

#[test]
fn ids_come_from_a_file_or_standard_input_and_bad_ones_say_why() {
    let dir = Scratch::new("ids-file");
    let t = dir.path("t.edo");
    ok(&["quantize", &fixture("table_f32.npy"), "--format", "int8", "-o", t.to_str().unwrap()]);
    let t = t.to_str().unwrap();
    // 200 000 ids do not fit a command line; a file of them does.
    let ids: Vec<String> = (0..200_000u32).map(|i| (i % 37).to_string()).collect();
    let path = dir.path("ids.txt");
    std::fs::write(&path, ids.join("\n")).unwrap();
    let out = ok(&["lookup", t, "--ids-file", path.to_str().unwrap(), "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rows["rows"].as_array().map(Vec::len), Some(200_000));
    assert_eq!(rows["rows"][199_999]["id"], 199_999 % 37);
    // Standard input, separated by commas and spaces.
    let mut child = Command::new(env!("CARGO_BIN_EXE_edo"))
        .args(["lookup", t, "--ids-file", "-", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"3, 5 7\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows["rows"].as_array().unwrap().iter().map(|r| r["id"].as_u64().unwrap()).collect::<Vec<_>>(), [3, 5, 7]);
    // A negative id is named as such, not taken for a flag.
    let neg = edo(&["lookup", t, "--ids", "-1"]);
    assert_eq!(neg.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&neg.stderr).contains("-1 is negative"), "{}", String::from_utf8_lossy(&neg.stderr));
    std::fs::write(&path, "1 two 3").unwrap();
    let bad = edo(&["lookup", t, "--ids-file", path.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("\"two\" is not an id"));
    // A file with no ids in it is refused, not answered with nothing.
    std::fs::write(&path, " \n,\n").unwrap();
    let none = edo(&["lookup", t, "--ids-file", path.to_str().unwrap()]);
    assert_eq!(none.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no ids in it"), "{}", String::from_utf8_lossy(&none.stderr));
    // A file of the wrong kind is malformed input (65), like a damaged one.
    assert_eq!(edo(&["lookup", &fixture("table_f32.npy"), "--ids", "1"]).status.code(), Some(65));
    assert_eq!(
        edo(&["quantize", &format!("{}/../README.md", env!("CARGO_MANIFEST_DIR")), "--format", "int8", "-o", dir.path("r.edo").to_str().unwrap()])
            .status
            .code(),
        Some(65)
    );
}

#[test]
fn a_table_of_no_rows_goes_everywhere_and_says_so() {
    let dir = Scratch::new("empty-table");
    let npy_path = dir.path("empty.npy");
    std::fs::write(&npy_path, edo::file::npy::write(edo::file::npy::Dtype::F32, &[0, 8], &[])).unwrap();
    let t = dir.path("empty.edo");
    let run = edo(&["quantize", npy_path.to_str().unwrap(), "--format", "int8", "-o", t.to_str().unwrap()]);
    let (out, err) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{err}");
    assert!(out.contains("0 × 8, 0 B packed") && !out.contains("smaller"), "{out}");
    assert!(err.contains("has no rows"), "{err}");
    let out = ok(&["inspect", t.to_str().unwrap()]);
    assert!(out.contains("0 rows × 8 dim") && !out.contains("smaller"), "{out}");
    let bad = edo(&["lookup", t.to_str().unwrap(), "--ids", "0"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("out of range for a table of 0 rows"));
}

/// A GGUF file through the command line: inspect lists its tensors, quantize keeps a Q4_1 tensor's
/// blocks as they are (or requantises, with --min-error for a group-wise format), export writes a
/// GGUF file holding the same blocks.
#[test]
fn gguf_inspect_quantize_export() {
    let dir = Scratch::new("gguf");
    let gguf = format!("{}/../tests/data/ggml/blocks.gguf", env!("CARGO_MANIFEST_DIR"));
    let out = ok(&["inspect", &gguf]);
    for needle in ["GGUF v3", "general.architecture", "* q4_1", "Q4_1", "24 × 96"] {
        assert!(out.contains(needle), "inspect lacks {needle:?}:\n{out}");
    }
    let t = dir.path("q4_1.edo");
    let out = ok(&["quantize", &gguf, "--tensor", "q4_1", "-f", "q4_1", "-o", t.to_str().unwrap()]);
    assert!(out.contains("max |x − x̂| 0.000e0"), "kept as is: {out}");
    let back = dir.path("back.gguf");
    ok(&["export", t.to_str().unwrap(), "-o", back.to_str().unwrap()]);
    let (a, b) = (std::fs::read(&gguf).unwrap(), std::fs::read(&back).unwrap());
    let (ga, gb) = (edo::file::gguf::Gguf::parse(&a).unwrap(), edo::file::gguf::Gguf::parse(&b).unwrap());
    let bytes = |g: &edo::file::gguf::Gguf, data: &[u8], name: &str| {
        let t = g.tensor(name).unwrap();
        data[(g.data_start + t.offset) as usize..][..t.bytes.unwrap() as usize].to_vec()
    };
    assert_eq!(bytes(&gb, &b, "token_embd.weight"), bytes(&ga, &a, "q4_1"));
    // Requantised from the floats: least squared error does better than min/max, and says so.
    let rmse = |args: &[&str]| -> f64 {
        let json: serde_json::Value = serde_json::from_str(&ok(args)).unwrap();
        json["error"]["rmse"].as_f64().unwrap()
    };
    let (p, m) = (dir.path("plain.edo"), dir.path("min.edo"));
    let plain = rmse(&["quantize", &gguf, "--tensor", "input", "-f", "int4_g32", "-o", p.to_str().unwrap(), "--json"]);
    let searched = rmse(&["quantize", &gguf, "--tensor", "input", "-f", "int4_g32", "--min-error", "-o", m.to_str().unwrap(), "--json"]);
    assert!(searched < plain, "{searched} vs {plain}");
    assert_eq!(edo::file::TableFile::open(&m).unwrap().metadata()["quantize.min_error"], "true");
    // A format GGUF has no type for is refused with a message.
    let e = edo(&["export", p.to_str().unwrap(), "-o", dir.path("x.gguf").to_str().unwrap()]);
    assert!(e.status.code() == Some(2) && String::from_utf8_lossy(&e.stderr).contains("GGUF"), "a bad argument, exit 2: {e:?}");
}

#[test]
fn gguf_cut_short_is_read_with_partial() {
    // The fixture with its last tensor (bf16, 24 × 96) cut after 12 rows, as a split model's part.
    let dir = Scratch::new("gguf-partial");
    let src = std::fs::read(format!("{}/../tests/data/ggml/blocks.gguf", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let g = edo::file::gguf::Gguf::parse(&src).unwrap();
    let t = g.tensor("bf16").unwrap();
    let end = (g.data_start + t.offset) as usize + t.bytes.unwrap() as usize / 2;
    let cut = dir.path("cut.gguf");
    std::fs::write(&cut, &src[..end]).unwrap();
    let out = dir.path("t.edo");
    let args = ["quantize", cut.to_str().unwrap(), "--tensor", "bf16", "-f", "fp32", "-o", out.to_str().unwrap()];
    let e = edo(&args);
    assert!(!e.status.success() && String::from_utf8_lossy(&e.stderr).contains("12 of its 24 rows"), "{e:?}");
    let text = ok(&[&args[..], &["--partial"]].concat());
    assert!(text.contains("fp32 12 × 96"), "{text}");
    assert_eq!(edo::file::TableFile::open(&out).unwrap().table().rows(), 12);
    // inspect re-reads the source the same way.
    let text = ok(&["inspect", out.to_str().unwrap()]);
    assert!(text.contains("error against") && text.contains("12 of 12 rows within it"), "{text}");
    // A k-quant of a row narrower than its super-block stores only the sub-blocks it reaches: at
    // dim 96 q4_k takes 64 bytes a row, under a quarter more than whole super-blocks' rate (54),
    // so no warning; rows of 13 values in q6_k (32 bytes, 19.7 bits a value) are warned of.
    let e = edo(&["quantize", cut.to_str().unwrap(), "--tensor", "bf16", "-f", "q4_k", "-o", dir.path("k.edo").to_str().unwrap(), "--partial"]);
    assert!(e.status.success() && !String::from_utf8_lossy(&e.stderr).contains("bits a value"), "{e:?}");
    assert_eq!(edo::file::TableFile::open(dir.path("k.edo")).unwrap().table().bytes(), 12 * 64);
    let npy = format!("{}/../tests/data/files/table_f32.npy", env!("CARGO_MANIFEST_DIR"));
    let e = edo(&["quantize", &npy, "-f", "q6_k", "-o", dir.path("k6.edo").to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&e.stderr);
    assert!(e.status.success() && stderr.contains("a row of 13 takes 32 bytes") && stderr.contains("19.69 bits a value"), "{e:?}");
    // Only GGUF files are read in part.
    let npy = format!("{}/../tests/data/files/table_f32.npy", env!("CARGO_MANIFEST_DIR"));
    let e = edo(&["quantize", &npy, "-f", "int8", "-o", dir.path("n.edo").to_str().unwrap(), "--partial"]);
    assert!(!e.status.success() && String::from_utf8_lossy(&e.stderr).contains("--partial"), "{e:?}");
}

#[test]
fn gather_block_quantized_quantize_and_export() {
    // onnxruntime's GatherBlockQuantized inputs in, kept as they are, and written back.
    let dir = Scratch::new("gbq");
    let src = format!("{}/../tests/data/gbq/b4_g32_f16_zp.safetensors", env!("CARGO_MANIFEST_DIR"));
    let t = dir.path("t.edo");
    let out = ok(&["quantize", &src, "-f", "int4_zp32", "-o", t.to_str().unwrap()]);
    assert!(out.contains("max |x − x̂| 0.000e0"), "kept as is: {out}");
    let back = dir.path("back.safetensors");
    ok(&["export", t.to_str().unwrap(), "-o", back.to_str().unwrap(), "--gbq"]);
    let (a, b) = (std::fs::read(&src).unwrap(), std::fs::read(&back).unwrap());
    let (ga, gb) = (edo::file::gbq::Gbq::from_safetensors(&a).unwrap(), edo::file::gbq::Gbq::from_safetensors(&b).unwrap());
    assert_eq!((ga.data, ga.scales), (gb.data, gb.scales));
    // A table in another format is refused with what to do.
    let q = dir.path("q.edo");
    ok(&["quantize", &src, "-f", "int4_g32", "-o", q.to_str().unwrap()]);
    let e = edo(&["export", q.to_str().unwrap(), "-o", dir.path("x.safetensors").to_str().unwrap(), "--gbq"]);
    assert!(!e.status.success() && String::from_utf8_lossy(&e.stderr).contains("int4_zp"), "{e:?}");
}

#[test]
fn bench_suite_writes_results_and_a_report_that_compare_reads() {
    let dir = Scratch::new("suite");
    let (a, b) = (dir.path("a.json"), dir.path("b.json"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let html = dir.path("a.html");
    let text = ok(&["bench", "suite", "--scale", "tiny", "--reps", "2", "-o", a_s, "--html", html.to_str().unwrap()]);
    assert!(text.contains("items/s") && text.contains("gather int8 medium"), "{text}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    assert_eq!((r["schema"].as_str(), r["schema_version"].as_u64(), r["scale"].as_str()), (Some("edo-bench"), Some(1), Some("tiny")));
    let backends = r["backends"].as_array().unwrap();
    let gpu = backends.iter().find(|b| b["kind"] == "gpu");
    if gpu.is_none() {
        assert_ne!(std::env::var("EDO_REQUIRE_GPU").as_deref(), Ok("1"), "EDO_REQUIRE_GPU=1 but the suite found no adapter");
        eprintln!("SKIPPED: no adapter (the suite's GPU cases; its CPU cases ran)");
    }
    assert!(backends.iter().any(|b| b["id"] == "cpu1" && b["threads"] == 1), "a one-thread CPU backend");
    let cases = r["cases"].as_array().unwrap();
    for b in backends {
        let id = b["id"].as_str().unwrap();
        assert!(b["copy_gbps"].as_f64().unwrap() > 0.0, "{id} measured its copy");
        if b["kind"] == "gpu" {
            // Both copies, and the reference is the faster (the copy kernel's output is checked).
            let (buffer, shader) = (b["buffer_copy_gbps"].as_f64().unwrap(), b["shader_copy_gbps"].as_f64().unwrap());
            assert!(buffer > 0.0 && shader > 0.0, "{id}: {b}");
            assert_eq!(b["copy_gbps"].as_f64().unwrap(), buffer.max(shader), "{id}");
        }
        for op in ["gather", "bag_sum", "bag_mean", "hashed_bag", "search", "latency"] {
            for size in ["small", "medium", "large"] {
                if op == "latency" && size != "small" {
                    continue;
                }
                assert!(cases.iter().any(|c| c["backend"] == id && c["op"] == op && c["size"] == size), "{id} ran {op} on the {size} table");
            }
        }
        assert_eq!(cases.iter().any(|c| c["backend"] == id && c["op"] == "cache"), b["kind"] == "gpu", "the cache runs on GPUs only");
    }
    for c in cases {
        for f in ["median_s", "min_s", "max_s", "first_call_s", "items_per_s", "gbps", "ratio_to_copy", "p90_s", "p99_s"] {
            assert!(c[f].as_f64().is_some_and(|v| v > 0.0 && v.is_finite()), "{f} of {c}");
        }
        let at = |f: &str| c[f].as_f64().unwrap();
        assert!(at("min_s") <= at("median_s") && at("median_s") <= at("p90_s") && at("p90_s") <= at("p99_s") && at("p99_s") <= at("max_s"), "{c}");
        // The quality beside the speed: every lookup's format against FP32, every search's recall.
        let q = &c["quality"];
        match c["op"].as_str().unwrap() {
            "gather" | "bag_sum" | "bag_mean" | "hashed_bag" => {
                let want = if c["format"] == "int4" { 0.99..=0.9999 } else { 0.9999..=1.0 };
                assert!(q["metric"] == "cosine to fp32" && want.contains(&q["value"].as_f64().unwrap()), "{c}");
            }
            "search" => assert!(q["metric"] == "recall@10 of exact fp32" && (0.0..=1.0).contains(&q["value"].as_f64().unwrap()), "{c}"),
            _ => assert!(q.is_null(), "{c}"),
        }
    }
    // The run's rules, environment, cold start, peak memory and artifacts.
    assert_eq!((r["rules"]["warmup_calls"].as_u64(), r["rules"]["reps"].as_u64()), (Some(1), Some(2)), "{}", r["rules"]);
    let env = &r["environment"];
    assert_eq!(env["runtime"], "native");
    assert!(["avx2", "sse4.1", "neon", "scalar"].contains(&env["simd"].as_str().unwrap()), "{env}");
    assert_eq!(env["target"].as_str().unwrap(), format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS));
    assert_eq!(env["emulated"], std::env::var_os("EDO_EMULATED").is_some());
    let cold = &r["cold_start"];
    assert!(cold["first_table_s"].as_f64().unwrap() > 0.0 && cold["first_call_s"].as_f64().unwrap() > 0.0, "{cold}");
    assert!(cold["engines_s"].is_number(), "the adapters were looked for: {cold}");
    assert!(r["peak_memory_bytes"].as_u64().unwrap() > 1 << 20 && r["peak_memory_kind"] == "process RSS", "{}", r["peak_memory_bytes"]);
    let binary = r["artifacts"].as_array().unwrap().iter().find(|a| a["name"] == "binary").unwrap();
    assert!(binary["bytes"].as_u64().unwrap() > binary["gzip_bytes"].as_u64().unwrap(), "{binary}");
    if gpu.is_some() {
        // The large table is held in shards of at most 256 KiB in the tiny suite: several of them.
        let large = cases.iter().find(|c| c["op"] == "gather" && c["size"] == "large" && c["format"] == "fp32" && c["backend"] == "gpu0").unwrap();
        assert!(large["shards"].as_u64().unwrap() >= 5, "{large}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.matches("<svg").count() >= 6, "the report has its charts");
    assert!(!page.contains("<script") && !page.contains("src=\"http") && !page.contains("href=\"http"), "the report fetches nothing");

    // A second run, CPU only, some operations, then both side by side.
    ok(&[
        "bench",
        "suite",
        "--scale",
        "tiny",
        "--cpu",
        "--ops",
        "gather,latency",
        "--reps",
        "1",
        "--label",
        "second run",
        "-o",
        b_s,
        "--html",
        dir.path("b.html").to_str().unwrap(),
    ]);
    let (ch, md, csv, jsonl) = (dir.path("c.html"), dir.path("c.md"), dir.path("c.csv"), dir.path("c.jsonl"));
    let text = ok(&[
        "bench",
        "compare",
        a_s,
        b_s,
        "--html",
        ch.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--jsonl",
        jsonl.to_str().unwrap(),
    ]);
    assert!(text.contains("second run · CPU path, 1 thread"), "{text}");
    assert!(text.contains("CPU path on ") && text.contains("quality kept:") && text.contains("P50 / P90 / P99"), "{text}");
    // CSV and JSON Lines: a case a line, the same cases, with their run's identity.
    let b_cases = serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&b).unwrap()).unwrap()["cases"].as_array().unwrap().len();
    let csv = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + cases.len() + b_cases);
    assert!(lines[0].starts_with("label,runtime,target,simd,emulated,backend,backend_name,op,format"), "{}", lines[0]);
    assert!(lines.iter().any(|l| l.starts_with("second run,native,") && l.contains(",\"CPU path, 1 thread\",latency,int8,small,")), "{csv}");
    let jsonl = std::fs::read_to_string(&jsonl).unwrap();
    let records: Vec<serde_json::Value> = jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), cases.len() + b_cases);
    assert!(records.iter().all(|r| r["p50_s"].as_f64().unwrap() > 0.0 && r["runtime"] == "native"), "{jsonl}");
    assert!(std::fs::read_to_string(&ch).unwrap().contains("second run · CPU path, 1 thread"));
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains("## gather") && md.contains("| int8 | medium | 3001 |"), "{md}");

    // Bad input: named, with the exit status of its kind.
    let foreign = dir.path("foreign.json");
    std::fs::write(&foreign, r#"{"formats": []}"#).unwrap();
    let out = edo(&["bench", "compare", foreign.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an edo benchmark file"), "{}", String::from_utf8_lossy(&out.stderr));
    let future = dir.path("future.json");
    std::fs::write(&future, std::fs::read_to_string(&a).unwrap().replacen("\"schema_version\": 1", "\"schema_version\": 9", 1)).unwrap();
    let out = edo(&["bench", "compare", future.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&out.stderr).contains("version"), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&foreign, "not json").unwrap();
    assert_eq!(edo(&["bench", "compare", foreign.to_str().unwrap()]).status.code(), Some(65));
    std::fs::write(&foreign, [0x93, b'N', b'U', b'M', 0xff]).unwrap();
    let out = edo(&["bench", "compare", foreign.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(65), "not text: malformed, not missing");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an edo benchmark file"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(edo(&["bench", "compare", dir.path("missing.json").to_str().unwrap()]).status.code(), Some(66));
    let out = edo(&["bench", "suite", "--scale", "tiny", "--adapter", "no such adapter", "-o", b_s]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("matches none"), "{}", String::from_utf8_lossy(&out.stderr));
    // (The server matrix is a scale the command line takes: it gets as far as the budget.)
    for scale in ["tiny", "server"] {
        let out = edo(&["bench", "suite", "--scale", scale, "--cpu", "--budget-seconds", "0.000001", "-o", b_s]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("too small for any case"), "{scale}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let out = edo(&["bench", "suite", "--ops", "embed"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `edo reorder`: a table stored by lookup frequency, looked up by the same ids as before (with
/// `edo lookup`, which applies the id map); counts or a trace that do not fit are refused.
#[test]
fn reorder_stores_rows_by_frequency_and_keeps_ids() {
    let dir = Scratch::new("reorder");
    let (rows, dim) = (500, 16);
    let table = edo::PackedTable::quantize(edo::Format::Int8, &edo::synth::embedding_table(rows, dim, 3), rows, dim).unwrap();
    let src = dir.path("t.edo");
    edo::file::TableFile::new(table.clone()).write(&src).unwrap();
    let trace = dir.path("trace.txt");
    let ids: Vec<String> = edo::synth::zipf_ids(5000, rows, 1.1, 2).iter().map(|&r| ((r * 7 + 3) % rows as u32).to_string()).collect();
    std::fs::write(&trace, ids.join("\n")).unwrap();
    let out_path = dir.path("hot.edo");
    let (s, o) = (src.to_str().unwrap(), out_path.to_str().unwrap());
    let text = ok(&["reorder", s, "--trace", trace.to_str().unwrap(), "-o", o]);
    assert!(text.contains("500 rows reordered") && text.contains("first 10 %"), "{text}");
    let reordered = edo::PrunedTable::open(&out_path).unwrap();
    assert!(reordered.is_reordering());
    assert_eq!(reordered.table().row(0), table.row(3), "the hottest id (rank 0 → 3) first");
    // The same rows for the same ids, through the CLI.
    let want = edo::cpu::gather(&table, &[3, 499, 0], edo::Bounds::Error).unwrap();
    let json: serde_json::Value = serde_json::from_str(&ok(&["lookup", o, "--ids", "3,499,0", "--json"])).unwrap();
    let got: Vec<f32> =
        json["rows"].as_array().unwrap().iter().flat_map(|r| r["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32)).collect();
    assert_eq!(got, want);
    // Ids from standard input, as for a plain table.
    let mut child = Command::new(env!("CARGO_BIN_EXE_edo"))
        .args(["lookup", o, "--ids-file", "-", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"3 499\n0").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let got: Vec<f32> =
        json["rows"].as_array().unwrap().iter().flat_map(|r| r["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32)).collect();
    assert_eq!(got, want);
    // Counts: one per row.
    let counts = dir.path("counts.txt");
    std::fs::write(&counts, (0..rows).map(|r| (r % 5).to_string()).collect::<Vec<_>>().join("\n")).unwrap();
    ok(&["reorder", s, "--counts", counts.to_str().unwrap(), "-o", o]);
    assert_eq!(edo::PrunedTable::open(&out_path).unwrap().table().row(0), table.row(4));
    for (bytes, flag, needle) in [("1\n2\n", "--counts", "one per row"), ("1\n500\n", "--trace", "out of range"), ("x\n", "--trace", "line 1")] {
        std::fs::write(&counts, bytes).unwrap();
        let bad = edo(&["reorder", s, flag, counts.to_str().unwrap(), "-o", o]);
        assert_eq!(bad.status.code(), Some(2), "{needle}: {}", String::from_utf8_lossy(&bad.stderr));
        assert!(String::from_utf8_lossy(&bad.stderr).contains(needle), "{needle}: {}", String::from_utf8_lossy(&bad.stderr));
    }
    // A reordered file is read as the table its ids name: reordered again by a trace (as the
    // plain file would be), exported and quantised as the plain file.
    let again = dir.path("again.edo");
    let mut with_meta = edo::file::TableFile::new(table.clone()).with_chunk_bytes(4096).unwrap();
    with_meta.set_metadata("source.path", "kept").unwrap();
    with_meta.write(&src).unwrap();
    ok(&["reorder", s, "--trace", trace.to_str().unwrap(), "-o", o]);
    ok(&["reorder", o, "--trace", trace.to_str().unwrap(), "-o", again.to_str().unwrap()]);
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(o).unwrap(), "reordered again by the same trace: the same file");
    let (plain_npy, hot_npy) = (dir.path("plain.npy"), dir.path("hot.npy"));
    ok(&["export", s, "-o", plain_npy.to_str().unwrap()]);
    ok(&["export", o, "-o", hot_npy.to_str().unwrap()]);
    assert_eq!(std::fs::read(&hot_npy).unwrap(), std::fs::read(&plain_npy).unwrap(), "a reordered table exports in id order");
    let requantised = dir.path("requantised.edo");
    ok(&["quantize", o, "-f", "int8", "-o", requantised.to_str().unwrap()]);
    assert_eq!(edo::file::TableFile::open(&requantised).unwrap().table(), &table, "quantised from a reordered file: the table in id order");
    // `edo inspect` describes it as stored, and measures it against its source (recorded by
    // `edo quantize`, kept by `edo reorder`) as the plain file: the same error, the same worst id.
    let npy = dir.path("t.npy");
    let values = edo::synth::embedding_table(rows, dim, 3);
    std::fs::write(&npy, edo::file::npy::write(edo::file::npy::Dtype::F32, &[rows, dim], bytemuck::cast_slice(&values))).unwrap();
    ok(&["quantize", npy.to_str().unwrap(), "--format", "int8", "-o", s]);
    ok(&["reorder", s, "--trace", trace.to_str().unwrap(), "-o", o]);
    let text = ok(&["inspect", o, "--png", dir.path("hot.png").to_str().unwrap()]);
    assert!(text.contains("reordered   rows stored most looked-up first") && text.contains("rows in stored order"), "{text}");
    let report = |f: &str| -> serde_json::Value { serde_json::from_str(&ok(&["inspect", f, "--no-png", "--json"])).unwrap() };
    let (plain, hot) = (report(s), report(o));
    assert_eq!((plain["reordered"].as_bool(), hot["reordered"].as_bool()), (Some(false), Some(true)));
    for key in ["max_abs", "worst_row", "rows_beyond_bound"] {
        assert_eq!(hot["error"][key], plain["error"][key], "{key}");
    }
    // Means summed in another row order.
    for key in ["rmse", "mean_cosine"] {
        let (a, b) = (hot["error"][key].as_f64().unwrap(), plain["error"][key].as_f64().unwrap());
        assert!((a - b).abs() <= 1e-12 * b.abs(), "{key}: {a} vs {b}");
    }
    assert_eq!(hot["error"]["rows_beyond_bound"], 0, "every row within int8's bound");
}

/// `edo reorder` of a model file by a corpus (`--texts`): its rows stored by how often the texts'
/// tokens look them up, and every text embedded as before, bit for bit; --texts is for models.
#[test]
fn reorder_of_a_model_keeps_every_vector() {
    let root = format!("{}/..", env!("CARGO_MANIFEST_DIR"));
    let dir = Scratch::new("reorder-model");
    let src = dir.path("m.edo");
    let s = src.to_str().unwrap();
    ok(&["quantize-model", &format!("{root}/tests/data/models/wordpiece"), "--format", "int8", "-o", s]);
    let corpus = dir.path("corpus.txt");
    std::fs::write(&corpus, "the quick brown fox\njumps over the lazy dog\nthe the the\ncafé naïve\n").unwrap();
    let out = dir.path("r.edo");
    let o = out.to_str().unwrap();
    let text = ok(&["reorder", s, "--texts", corpus.to_str().unwrap(), "-o", o]);
    assert!(text.contains("reordered by 4 texts' tokens") && text.contains("the same vector"), "{text}");
    let (model, reordered) = (edo::model::StaticModel::open(&src).unwrap(), edo::model::StaticModel::open(&out).unwrap());
    let the = model.bags(&["the"]).unwrap().rows[0] as usize;
    assert_eq!(reordered.table().row(0), model.table().row(the), "the most used token's row first");
    let texts = ["the quick brown fox", "an unseen text, tokens and all", "café"];
    let embed = |m: &str| -> Vec<Vec<f32>> {
        let mut args = vec!["embed", m, "--json"];
        for t in &texts {
            args.extend(["--text", t]);
        }
        serde_json::from_str(&ok(&args)).unwrap()
    };
    assert_eq!(embed(o), embed(s));
    // `edo lookup` of a model reads token ids from their rows, wherever the rows now lie.
    let lookup = |m: &str| -> serde_json::Value { serde_json::from_str(&ok(&["lookup", m, "--ids", &format!("{the},0,5"), "--json"])).unwrap() };
    let (before, after) = (lookup(s), lookup(o));
    assert_eq!(after["rows"][0]["row"], 0, "the most used token's row is stored first");
    for i in 0..3 {
        assert_eq!(after["rows"][i]["values"], before["rows"][i]["values"], "token {i}");
    }
    let text = ok(&["inspect", o, "--no-png"]);
    assert!(text.contains(&format!("mapping     its {} token ids", model.vocab_size())), "{text}");
    let past = edo(&["lookup", o, "--ids", &model.vocab_size().to_string()]);
    assert_eq!(past.status.code(), Some(2), "{}", String::from_utf8_lossy(&past.stderr));
    assert!(String::from_utf8_lossy(&past.stderr).contains("is not a token id"), "{}", String::from_utf8_lossy(&past.stderr));
    // Row counts and traces work for a model too; --texts does not for a table.
    let counts = dir.path("counts.txt");
    std::fs::write(&counts, (0..model.table().rows()).map(|r| (r % 3).to_string()).collect::<Vec<_>>().join("\n")).unwrap();
    ok(&["reorder", s, "--counts", counts.to_str().unwrap(), "-o", o]);
    assert_eq!(embed(o), embed(s));
    let table = dir.path("t.edo");
    edo::file::TableFile::new(model.table().clone()).write(&table).unwrap();
    let bad = edo(&["reorder", table.to_str().unwrap(), "--texts", corpus.to_str().unwrap(), "-o", o]);
    assert_eq!(bad.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad.stderr));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--texts orders a model's rows"), "{}", String::from_utf8_lossy(&bad.stderr));
    let none = edo(&["reorder", s, "-o", o]);
    assert_eq!(none.status.code(), Some(2), "one of --texts, --trace, --counts");
}

/// `edo quantize --format binary --center / --itq`: codes through a transform that the file
/// keeps (version 3), equal to the library's; `edo inspect` names it and measures against the
/// transformed source; the flags belong to binary codes only.
#[test]
fn quantize_makes_centred_and_itq_codes_that_the_file_keeps() {
    use edo::search::{CodeTransform, ItqOptions};
    let dir = Scratch::new("codes");
    let (rows, dim) = (600, 24);
    let values: Vec<f32> = edo::synth::embedding_table(rows, dim, 8).iter().enumerate().map(|(i, x)| x + 0.02 * (i % dim) as f32).collect();
    let npy = dir.path("t.npy");
    std::fs::write(&npy, edo::file::npy::write(edo::file::npy::Dtype::F32, &[rows, dim], bytemuck::cast_slice(&values))).unwrap();
    let src = npy.to_str().unwrap();
    for (flag, want) in
        [("--center", CodeTransform::centered(&values, dim).unwrap()), ("--itq", CodeTransform::itq(&values, dim, &ItqOptions::default()).unwrap())]
    {
        let out = dir.path(&format!("codes{flag}.edo"));
        let o = out.to_str().unwrap();
        let text = ok(&["quantize", src, "--format", "binary", flag, "-o", o]);
        assert!(text.contains(&format!("codes: {}", want.kind())), "{text}");
        let file = edo::file::TableFile::open(&out).unwrap();
        assert_eq!(file.code_transform(), Some(&want));
        assert_eq!(file.table().words(), want.encode(&values).unwrap().words());
        let text = ok(&["inspect", o, "--no-png"]);
        assert!(text.contains("edo table file v3") && text.contains(&format!("codes       {}", want.kind())), "{text}");
        assert!(text.contains("through the code transform"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&ok(&["inspect", o, "--no-png", "--json"])).unwrap();
        assert_eq!(json["codes"], want.kind());
        // Against the transformed source, the codes' cosine is that of signs (well above 0).
        assert!(json["error"]["mean_cosine"].as_f64().unwrap() > 0.6, "{json}");
    }
    // Codes are not a table to quantise, reorder or (silently) export again.
    let coded = dir.path("codes--itq.edo");
    let c = coded.to_str().unwrap();
    let r = edo(&["quantize", c, "--format", "binary", "-o", dir.path("again.edo").to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(65), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stderr).contains("holds itq codes"), "{}", String::from_utf8_lossy(&r.stderr));
    std::fs::write(dir.path("counts.txt"), "1\n".repeat(rows)).unwrap();
    let r = edo(&["reorder", c, "--counts", dir.path("counts.txt").to_str().unwrap(), "-o", dir.path("r.edo").to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(65), "{}", String::from_utf8_lossy(&r.stderr));
    let r = edo(&["export", c, "-o", dir.path("codes.npy").to_str().unwrap()]);
    assert!(r.status.success() && String::from_utf8_lossy(&r.stderr).contains("not their transform"), "{}", String::from_utf8_lossy(&r.stderr));
    let out = dir.path("x.edo");
    for args in [["--format", "int8", "--itq"], ["--format", "binary_scaled", "--center"], ["--format", "binary", "--itq-iterations=3"]] {
        let mut a = vec!["quantize", src, "-o", out.to_str().unwrap()];
        a.extend(args);
        assert_eq!(edo(&a).status.code(), Some(2), "{a:?}");
    }
    // Too few rows for a rotation: a data error that says so.
    let few = dir.path("few.npy");
    std::fs::write(&few, edo::file::npy::write(edo::file::npy::Dtype::F32, &[10, dim], bytemuck::cast_slice(&values[..10 * dim]))).unwrap();
    let r = edo(&["quantize", few.to_str().unwrap(), "--format", "binary", "--itq", "-o", out.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&r.stderr).contains("10 rows, at least 25 needed"), "{}", String::from_utf8_lossy(&r.stderr));
}

/// `--row-alignment`: `edo quantize` keeps it in the file (rows packed there), `edo inspect` says
/// what the rows take on a GPU, `edo bench gather` aligns its tables (checked against the CPU
/// path, the padding in `gpu_bytes`); a bad alignment is a usage error before any work.
#[test]
fn row_alignment_from_quantize_to_inspect_and_bench() {
    let dir = Scratch::new("aligned");
    let (rows, dim) = (500, 128);
    let values = edo::synth::embedding_table(rows, dim, 3);
    let npy = dir.path("t.npy");
    std::fs::write(&npy, edo::file::npy::write(edo::file::npy::Dtype::F32, &[rows, dim], bytemuck::cast_slice(&values))).unwrap();
    let (src, out) = (npy.to_str().unwrap(), dir.path("a.edo"));
    let o = out.to_str().unwrap();
    let text = ok(&["quantize", src, "--format", "int8", "--row-alignment", "16", "-o", o]);
    assert!(text.contains("rows on a GPU: aligned to 16 bytes, 144 bytes each (136 packed)"), "{text}");
    let file = edo::file::TableFile::open(&out).unwrap();
    assert_eq!(file.table().row_alignment(), 16);
    assert_eq!(file.table().words(), edo::PackedTable::quantize(edo::Format::Int8, &values, rows, dim).unwrap().words());
    let text = ok(&["inspect", o, "--no-png"]);
    assert!(text.contains("on a GPU    rows aligned to 16 bytes: 144 bytes each (136 packed)"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&ok(&["inspect", o, "--no-png", "--json"])).unwrap();
    assert_eq!((json["row_alignment"].as_u64(), json["gpu_bytes"].as_u64()), (Some(16), Some(144 * rows as u64)));
    // Quantised again from the .edo file, to another format, it keeps the alignment; asked, it
    // drops it.
    let again = dir.path("b.edo");
    ok(&["quantize", o, "--format", "int4", "-o", again.to_str().unwrap()]);
    assert_eq!(edo::file::TableFile::open(&again).unwrap().table().row_alignment(), 16);
    ok(&["quantize", o, "--format", "int8", "--row-alignment", "4", "-o", again.to_str().unwrap()]);
    assert_eq!(edo::file::TableFile::open(&again).unwrap().table().row_alignment(), 4);
    for bad in ["12", "0", "512"] {
        let r = edo(&["quantize", src, "--format", "int8", "--row-alignment", bad, "-o", dir.path("bad.edo").to_str().unwrap()]);
        assert_eq!(r.status.code(), Some(2), "{bad}: {}", String::from_utf8_lossy(&r.stderr));
        assert!(String::from_utf8_lossy(&r.stderr).contains("row alignment"), "{}", String::from_utf8_lossy(&r.stderr));
        assert!(!dir.path("bad.edo").exists());
    }
    let r =
        edo(&["bench", "gather", "--rows", "3000", "--dim", "32", "--ids", "777", "--iters", "2", "--formats", "int8,fp32", "--row-alignment", "16", "--json"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let report: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(report["row_alignment"], 16);
    if report["adapter"].is_string() {
        // INT8 rows of 32 values are 40 bytes, 48 aligned; FP32's 128 are aligned already.
        let gpu_bytes: Vec<_> =
            report["formats"].as_array().unwrap().iter().map(|f| (f["gpu_bytes"].as_u64().unwrap(), f["bytes"].as_u64().unwrap())).collect();
        assert_eq!(gpu_bytes, [(48 * 3000, 40 * 3000), (128 * 3000, 128 * 3000)]);
    } else {
        assert_ne!(std::env::var("EDO_REQUIRE_GPU").as_deref(), Ok("1"), "EDO_REQUIRE_GPU=1 but the bench found no adapter");
    }
    let r = edo(&["bench", "gather", "--rows", "10", "--row-alignment", "3"]);
    assert_eq!(r.status.code(), Some(2), "{}", String::from_utf8_lossy(&r.stderr));
}

#[test]
fn bench_bags_pools_fbgemm_rows_and_reports_the_difference_from_a_peers_output() {
    use edo::file::npy::{write, Dtype};
    let dir = Scratch::new("bagbench");
    // FBGEMM's fused INT8 rows (as embedding_bag_byte_prepack writes them): the codes, then the
    // row's scale and bias as f32.
    let (rows, dim) = (50usize, 24usize);
    let mut fused = Vec::new();
    let mut decoded = vec![0f32; rows * dim];
    for r in 0..rows {
        let (scale, bias) = (0.01 + r as f32 * 1e-3, -0.5 + r as f32 * 0.01);
        for c in 0..dim {
            let q = ((r * 7 + c * 13) % 256) as u8;
            fused.push(q);
            decoded[r * dim + c] = q as f32 * scale + bias;
        }
        fused.extend_from_slice(&scale.to_le_bytes());
        fused.extend_from_slice(&bias.to_le_bytes());
    }
    let path = |name: &str| dir.path(name).to_str().unwrap().to_string();
    std::fs::write(path("t.npy"), write(Dtype::U8, &[rows, dim + 8], &fused)).unwrap();
    let indices: Vec<i64> = vec![3, 7, 49, 0, 0, 12, 5];
    let offsets: Vec<i64> = vec![0, 3, 3, 7]; // three bags, the middle one empty
    std::fs::write(path("i.npy"), write(Dtype::I64, &[indices.len()], bytemuck::cast_slice(&indices))).unwrap();
    std::fs::write(path("o.npy"), write(Dtype::I64, &[offsets.len()], bytemuck::cast_slice(&offsets))).unwrap();
    // The peer's output: the sums in index order, one value off by 0.25.
    let mut want = vec![0f32; 3 * dim];
    for b in 0..3 {
        for &i in &indices[offsets[b] as usize..offsets[b + 1] as usize] {
            for c in 0..dim {
                want[b * dim + c] += decoded[i as usize * dim + c];
            }
        }
    }
    want[dim + 5] += 0.25;
    std::fs::write(path("want.npy"), write(Dtype::F32, &[3, dim], bytemuck::cast_slice(&want))).unwrap();
    let args = ["bench", "bags", &path("t.npy"), "--layout", "fbgemm8", "--indices", &path("i.npy"), "--offsets", &path("o.npy")];
    let text = ok(&[&args[..], &["--iters", "3", "--threads", "1", "--expect", &path("want.npy")]].concat());
    let r: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(
        (r["format"].as_str(), r["rows"].as_u64(), r["dim"].as_u64(), r["bags"].as_u64(), r["ids"].as_u64()),
        (Some("int8"), Some(50), Some(24), Some(3), Some(7)),
        "{r}"
    );
    assert_eq!(r["max_abs_diff"].as_f64(), Some(0.25), "only the planted difference: the rest is bit for bit");
    assert!(r["median_s"].as_f64().unwrap() > 0.0 && r["threads"] == 1, "{r}");
    // Bad input: an id past the table's end, and offsets that are not integers.
    std::fs::write(path("bad.npy"), write(Dtype::I64, &[1], bytemuck::cast_slice(&[50i64]))).unwrap();
    let one: Vec<i64> = vec![0, 1];
    std::fs::write(path("one.npy"), write(Dtype::I64, &[2], bytemuck::cast_slice(&one))).unwrap();
    let out = edo(&["bench", "bags", &path("t.npy"), "--layout", "fbgemm8", "--indices", &path("bad.npy"), "--offsets", &path("one.npy")]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("out of range"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = edo(&["bench", "bags", &path("t.npy"), "--layout", "fbgemm8", "--indices", &path("i.npy"), "--offsets", &path("want.npy")]);
    assert_eq!(out.status.code(), Some(65), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn update_replays_a_log_into_a_keyed_table_and_lookup_reads_it_by_key() {
    let dir = Scratch::new("update");
    let (rows, dim) = (50, 8);
    let data = edo::synth::embedding_table(rows, dim, 5);
    let table = edo::PackedTable::quantize(edo::Format::F32, &data, rows, dim).unwrap();
    let src = dir.path("t.edo");
    edo::file::TableFile::new(table).write(&src).unwrap();
    let mut log = edo::live::UpdateLog::new(dim);
    log.push(vec![3, 1 << 40], [vec![1.5; dim], vec![-2.0; dim]].concat()).unwrap();
    log.push(vec![1 << 40], vec![7.0; dim]).unwrap();
    let log_path = dir.path("updates.edolog");
    std::fs::write(&log_path, log.to_bytes()).unwrap();
    let out_path = dir.path("live.edo");
    let (s, l, o) = (src.to_str().unwrap(), log_path.to_str().unwrap(), out_path.to_str().unwrap());
    let text = ok(&["update", s, l, "-o", o]);
    assert!(text.contains("2 batches, 3 rows applied (1 new keys, 0 evicted); 50 → 51 keys"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&ok(&["lookup", o, "--ids", "1099511627776,3,4", "--json"])).unwrap();
    let got: Vec<f32> =
        json["rows"].as_array().unwrap().iter().flat_map(|r| r["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32)).collect();
    assert_eq!(got, [vec![7.0; dim], vec![1.5; dim], data[4 * dim..5 * dim].to_vec()].concat());
    let text = ok(&["inspect", o]);
    assert!(text.contains("edo table file v4") && text.contains("51 64-bit keys"), "{text}");
    // An unknown key, a damaged log: refused, the output left as it was.
    let out = edo(&["lookup", o, "--ids", "99"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("keys[0] = 99 is not in the table"), "{}", String::from_utf8_lossy(&out.stderr));
    let mut bytes = log.to_bytes();
    bytes.truncate(bytes.len() - 3);
    std::fs::write(&log_path, bytes).unwrap();
    let before = std::fs::read(&out_path).unwrap();
    let out = edo(&["update", o, l]);
    assert_eq!(out.status.code(), Some(65), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("batch 1"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&out_path).unwrap(), before);
    // The benchmark runs and prints its figures.
    let text = ok(&["bench", "live", "--keys", "3000", "--dim", "8", "--seconds", "0.05", "--cpu"]);
    for needle in ["inserts/s", "P99", "longest pause of lookups"] {
        assert!(text.contains(needle), "bench live lacks {needle:?}:\n{text}");
    }
}
