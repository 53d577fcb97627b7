fn main() {
    // The one split edo knows about: native (threads, blocking wrappers) vs the browser.
    cfg_aliases::cfg_aliases! {
        web: { target_arch = "wasm32" },
        native: { not(target_arch = "wasm32") },
    }
}
