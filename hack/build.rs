// Empty: it exists so that the host dependencies in Cargo.toml are part of the build's resolution.
fn main() {}
