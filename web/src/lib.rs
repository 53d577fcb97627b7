//! edo in the browser: the same engine behind a wasm-bindgen API.
//!
//! `EdoEngine.create()` takes WebGPU when `navigator.gpu` gives an adapter and falls back to the
//! CPU path (plain WASM) otherwise, and says which. Tables are built from a `Float32Array` in any
//! format or read from the bytes of a file (`.edo`, `.npy`, `.safetensors`, word2vec text);
//! `engine.upload(table)` makes them resident for lookups, bags and Hamming search. Every call that
//! touches the GPU returns a Promise; nothing blocks. Errors are exceptions carrying edo's typed
//! message and a stable `code` (an `Error` named `EdoError`).
//!
//! Apps use these exports through the npm package `edo-embeddings` (`web/npm`): a hand-written
//! JavaScript layer with options objects, typed results, `dispose()`, downloads with a cache, a
//! worker and TypeScript typings. The positional arguments and JSON strings here are its
//! internals.

use edo::file::import::{self, FileKind, FileLayout};
use edo::file::{TableFile, Vocab};
use edo::search::{CodeTransform, ItqOptions};
use std::cell::RefCell;

mod cache;
mod engine;
mod fetch;
mod live;
mod model;
mod resident;
mod search;
mod table;

pub use cache::EdoCache;
pub use engine::EdoEngine;
pub use live::EdoLiveTable;
pub use model::{EdoModel, EdoResidentModel};
pub use resident::{EdoGpuRows, EdoResident};
pub use search::{EdoCodes, EdoNeighbors, EdoScored, EdoSearchIndex};
pub use table::{table_shape, EdoShape, EdoTable};
// The modules' crate-wide helpers, for one another (each does `use super::*`).
use cache::*;
use fetch::*;
use resident::*;
use search::*;
use table::*;

use edo::cache::PolicyKind;
use edo::file::remote::{range_header, range_reply, HttpOptions, RangeReader, RemoteTable};
use edo::gpu::{CacheSpec, RecoveryEvent};
use edo::model::{SentenceTransformersLayout, StaticModel};
use edo::{
    AnyTable, AsyncLookup, Backend, Bags, Bounds, Element, Engine, EngineOptions, Format, GpuCache, GpuCodes, GpuLookup, GpuPrunedTable, GpuStaticModel,
    GpuTable, HostRows, Lookup, PackedTable, Placed, Pooling, PrunedTable, RecoveringEngine, Request,
};
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

/// An error as JavaScript gets it: an `Error` named `EdoError` with a stable `code` (the
/// package's wrapper turns it into its `EdoError` class) and edo's typed message.
#[derive(Debug)]
pub struct Failure {
    /// One of the codes of [`edo::Error::code`], or `INVALID_ARGUMENT`.
    pub code: &'static str,
    /// What went wrong, naming the argument or the value.
    pub message: String,
}

impl Failure {
    /// A bad argument from JavaScript (an unknown name, a wrong kind of value).
    fn arg(message: impl Into<String>) -> Failure {
        Failure { code: "INVALID_ARGUMENT", message: message.into() }
    }
}

impl From<Failure> for JsValue {
    fn from(f: Failure) -> JsValue {
        let e = js_sys::Error::new(&f.message);
        e.set_name("EdoError");
        let _ = js_sys::Reflect::set(&e, &"code".into(), &f.code.into());
        e.into()
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

fn err(e: impl Into<edo::Error>) -> Failure {
    let e = e.into();
    Failure { code: e.code(), message: e.to_string() }
}

fn format_of(name: &str) -> Result<Format, Failure> {
    Format::from_name(name).ok_or_else(|| Failure::arg(format!("unknown format {name:?} ({})", Format::ALL.map(Format::name).join(", "))))
}

/// Prints every panic's message to the console before the module aborts (the browser build
/// aborts on panic, which JavaScript sees only as `RuntimeError: unreachable`). The package's
/// wrapper calls it once, right after loading the module.
#[wasm_bindgen(js_name = installPanicHook)]
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&format!("edo panicked: {info}").into());
    }));
}

/// Panics, for the package's test of the panic hook (the module is unusable afterwards).
#[doc(hidden)]
#[wasm_bindgen(js_name = __panicForTests)]
pub fn panic_for_tests() {
    panic!("the panic hook's test");
}

/// The names of every format edo stores, in `Format::ALL`'s order.
#[wasm_bindgen(js_name = formatNames)]
pub fn format_names() -> Vec<String> {
    Format::ALL.iter().map(|f| f.name().to_string()).collect()
}

/// The charts and the table of one or more benchmark results files (their JSON text), as an
/// HTML fragment: the same charts `edo bench suite` and `edo bench compare` write.
#[cfg(feature = "suite")]
#[wasm_bindgen(js_name = benchReport)]
pub fn bench_report(results: Vec<String>) -> Result<String, Failure> {
    let files = results.iter().map(|r| edo_bench::suite::Results::from_json(r)).collect::<Result<Vec<_>, _>>().map_err(err)?;
    Ok(edo_bench::suite::report::fragment(&files))
}

/// The plain-text summary of one or more benchmark results files, as `edo bench compare` prints.
#[cfg(feature = "suite")]
#[wasm_bindgen(js_name = benchSummary)]
pub fn bench_summary(results: Vec<String>) -> Result<String, Failure> {
    let files = results.iter().map(|r| edo_bench::suite::Results::from_json(r)).collect::<Result<Vec<_>, _>>().map_err(err)?;
    Ok(edo_bench::suite::report::text(&files))
}
