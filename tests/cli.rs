//! The command line as a user runs it, and the README's promises about it.

use std::process::Command;

fn edo(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_edo")).args(args).output().expect("run edo")
}

#[test]
fn readme_names_the_two_commands_and_ci_runs_the_same_tests() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let ci = std::fs::read_to_string(format!("{root}/.ci/run")).unwrap();
    assert!(readme.contains("\ncargo run --release -- demo\n"), "README shows the main job");
    assert!(readme.contains("\n./scripts/test.sh\n"), "README shows the test command");
    assert!(ci.lines().any(|l| l.trim() == "./scripts/test.sh"), ".ci/run runs the README's test command");
    assert!(ci.contains("EDO_REQUIRE_GPU=1") && ci.contains("mesa-vulkan-drivers"), ".ci/run requires a GPU and installs lavapipe");
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
    let out = edo(&["demo", "--dim", "0"]);
    assert_eq!(out.status.code(), Some(2));
}
