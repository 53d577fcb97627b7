include!("src/wgsl_min.rs");

fn main() {
    // The one split edo knows about: native (threads, blocking wrappers) vs the browser.
    cfg_aliases::cfg_aliases! {
        web: { target_arch = "wasm32" },
        native: { not(target_arch = "wasm32") },
    }
    // The browser build's copies of the kernels' sources, without comments and indentation
    // (`wgsl!` includes them there): half the bytes the .wasm carries for them. Native builds
    // include `shaders/` as written, so a shader error's line numbers are the files'.
    println!("cargo:rerun-if-changed=../shaders");
    println!("cargo:rerun-if-changed=src/wgsl_min.rs");
    let out = std::path::Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("shaders");
    std::fs::create_dir_all(&out).expect("OUT_DIR is writable");
    for entry in std::fs::read_dir("../shaders").expect("../shaders/") {
        let path = entry.expect("shaders/ lists").path();
        if path.extension().is_some_and(|e| e == "wgsl") {
            let source = std::fs::read_to_string(&path).expect("a WGSL file is UTF-8");
            std::fs::write(out.join(path.file_name().expect("a file")), strip_wgsl(&source)).expect("OUT_DIR is writable");
        }
    }
}
