//! No code. See Cargo.toml: this crate only names dependency features, so that the tests' build
//! and the Python wheel's resolve the same and the wheel reuses the tests' compiled dependencies.
