//! `edo quantize`, `inspect`, `lookup`, `reorder` and `export`: table files from a shell, a file
//! each; this module holds what they share (the source arguments, opening and checking files).

mod export;
mod inspect;
mod lookup;
mod quantize;
mod reorder;

pub use export::{export, ExportArgs};
pub use inspect::{inspect, InspectArgs};
pub use lookup::{lookup, LookupArgs};
pub use quantize::{quantize, QuantizeArgs};
pub use reorder::{reorder, ReorderArgs};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::reports::inspect::{picture, table_error_stats, ErrorStats};
use clap::Args;
use edo::file::import::{self, FileKind, FileLayout, Imported};
use edo::file::{export as exp, TableFile};
use edo::GpuLookup;
use edo::{Bounds, Error, Format, PackedTable};
use serde_json::json;

use crate::bench::human_bytes as mib;
use crate::{exit, Failure, FormatParser};

/// Where a table comes from: a file, and how to read it.
#[derive(Args, Clone, Default)]
pub struct SourceArgs {
    /// Tensor to read from a safetensors file (e.g. embeddings.word_embeddings.weight); may be
    /// left out when the file has one 2-D tensor.
    #[arg(long)]
    tensor: Option<String>,
    /// How a byte (uint8/int8) array is laid out: fbgemm8, fbgemm4, packbits (numpy /
    /// sentence-transformers, MSB-first), packbits-lsb (faiss), or the name of the format `edo
    /// export` wrote it in (q8_0, int4_g32, q4_k, …). Float arrays need no layout, nor does a
    /// .safetensors file `edo export` wrote (it names its format).
    #[arg(long)]
    layout: Option<String>,
    /// Values per row, for a byte array whose width fits several: fbgemm4 (an odd dim), packbits
    /// (not a multiple of 8), a format's rows (a ggml row is whole blocks).
    #[arg(long)]
    dim: Option<usize>,
    /// For a GGUF file cut short (one part of a split model, a truncated download): read the
    /// tensor's rows that are in the file instead of refusing the tensor.
    #[arg(long)]
    partial: bool,
}

impl SourceArgs {
    fn layout(&self) -> Result<FileLayout, Failure> {
        match &self.layout {
            None => Ok(FileLayout::Dense),
            Some(name) => FileLayout::from_name(name, self.dim).ok_or_else(|| {
                Failure::new(exit::USAGE, format!("unknown --layout {name:?} (dense, fbgemm8, fbgemm4, packbits, packbits-lsb, or a format's name)"))
            }),
        }
    }

    /// The same, reading tensor `tensor` of a safetensors file.
    pub fn with_tensor(mut self, tensor: Option<String>) -> SourceArgs {
        self.tensor = tensor;
        self
    }

    /// The same, reading byte arrays in `layout`.
    pub fn with_layout(mut self, layout: &str) -> SourceArgs {
        self.layout = Some(layout.to_string());
        self
    }

    pub fn read(&self, path: &Path) -> Result<Imported, Failure> {
        require_input(path)?;
        if FileKind::from_path(path).is_none() {
            // An input of the wrong kind is malformed input, as a damaged file is.
            return Err(Failure::new(
                exit::DATA,
                format!("{}: edo reads .safetensors, .npy, .txt/.vec (word2vec, GloVe, fastText), .gguf and .edo files", path.display()),
            ));
        }
        if self.partial {
            if FileKind::from_path(path) != Some(FileKind::Gguf) {
                return Err(Failure::new(exit::USAGE, format!("{}: --partial reads the rows present in a GGUF file cut short", path.display())));
            }
            let name = self.tensor.as_deref().unwrap_or(edo::file::gguf::EMBEDDING_TENSOR);
            return Ok(edo::file::gguf::Gguf::read_present_rows(path, name)?);
        }
        let layout = self.layout()?;
        if let Ok(Err(_)) = open_table_or_reordered(path) {
            // A reordered table (`edo reorder`): the table its ids name, its rows in id order.
            return Ok(Imported { table: import::Table::Packed(open_table(path)?.into_table()), vocab: None, lossy_tokens: 0 });
        }
        let imported = import::path(path, self.tensor.as_deref(), layout)?;
        // (A layout is for arrays: an .edo or GGUF input knows its dim.)
        let array = matches!(FileKind::from_path(path), Some(FileKind::Npy | FileKind::Safetensors));
        if let (
            true,
            FileLayout::Fbgemm4 { dim: None } | FileLayout::Packbits { dim: None } | FileLayout::PackbitsLsb { dim: None },
            import::Table::Packed(t),
        ) = (array, layout, &imported.table)
        {
            // The width alone fits several dims: the most it holds was read. Say so.
            let (format, dim) = (t.format(), t.dim());
            let fewest = (1..dim).rev().take_while(|&d| format.unpadded_row_bytes(d) == format.unpadded_row_bytes(dim)).last();
            if let Some(fewest) = fewest {
                let fewer = if fewest + 1 == dim { fewest.to_string() } else { format!("{fewest} to {}", dim - 1) };
                eprintln!(
                    "edo: note: {}: read as {dim} values a row, the most its {} bytes a row hold; if the table has {fewer} a row, pass --dim",
                    path.display(),
                    format.unpadded_row_bytes(dim)
                );
            }
        }
        Ok(imported)
    }
}

pub(crate) fn require_input(path: &Path) -> Result<(), Failure> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(Failure::new(exit::NO_INPUT, format!("{}: not a file", path.display()))),
        Err(e) => Err(Failure::new(exit::NO_INPUT, format!("{}: {e}", path.display()))),
    }
}

/// " (0.266 of fp32, 3.8× smaller)", or nothing for a table of no rows.
/// A row-aligned table's rows on a GPU: "N bytes each (M packed), S in all".
pub(crate) fn gpu_rows(t: &PackedTable) -> String {
    format!("{} bytes each ({} packed), {} in all", 4 * t.gpu_row_words(), 4 * t.row_words(), mib(t.gpu_bytes()))
}

pub(crate) fn size_ratio(packed: u64, f32_bytes: u64) -> String {
    if packed == 0 || f32_bytes == 0 {
        return String::new();
    }
    let ratio = packed as f64 / f32_bytes as f64;
    format!(" ({ratio:.3} of fp32, {:.1}× smaller)", 1.0 / ratio)
}

/// The table file at `path`; a reordered table's (`edo reorder`) with its rows back in id order,
/// the table its ids name, with the file's metadata and checksum chunk.
pub(crate) fn open_table(path: &Path) -> Result<TableFile, Failure> {
    match open_table_or_reordered(path)? {
        Ok(file) => Ok(file),
        Err(_) => {
            let stored = TableFile::open_stored(path)?;
            let mut file = TableFile::new(edo::PrunedTable::open(path)?.original_order()?).with_chunk_bytes(stored.chunk_bytes())?;
            for (k, v) in stored.metadata() {
                file.set_metadata(k.clone(), v.clone())?;
            }
            Ok(file)
        }
    }
}

/// That `path` exists and is named as an .edo file.
pub(crate) fn require_edo(path: &Path) -> Result<(), Failure> {
    require_input(path)?;
    if FileKind::from_path(path) != Some(FileKind::Edo) {
        return Err(Failure::new(exit::DATA, format!("{}: expected an .edo table file (make one with `edo quantize`)", path.display())));
    }
    Ok(())
}

/// The table file at `path`, or (inside) that it is a reordered table (`edo reorder`), which
/// only `edo lookup` reads.
pub(crate) fn open_table_or_reordered(path: &Path) -> Result<Result<TableFile, edo::Unsupported>, Failure> {
    require_edo(path)?;
    match TableFile::open(path) {
        Err(Error::Unsupported(edo::Unsupported::ReorderedTableFile)) => Ok(Err(edo::Unsupported::ReorderedTableFile)),
        other => Ok(Ok(other?)),
    }
}

/// The text of `edo lookup --ids-file` (`-`: standard input), and what to call it in messages.
pub(crate) fn ids_file_text(path: &Path) -> Result<(String, String), Failure> {
    let stdin = path.as_os_str() == "-";
    let name = if stdin { "standard input".to_string() } else { path.display().to_string() };
    let text = if stdin { std::io::read_to_string(std::io::stdin()) } else { std::fs::read_to_string(path) };
    let text = text.map_err(|e| Failure::new(exit::NO_INPUT, format!("{name}: {e}")))?;
    Ok((name, text))
}

pub(crate) fn write_failure(e: Error) -> Failure {
    let mut f = Failure::from(e);
    f.code = exit::CANT_CREATE;
    f
}
