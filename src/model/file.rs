//! A static model in one `.edo` file: the table in any edo format, the `tokenizer.json`, the
//! per-token mapping and weights, and the settings that make encoding the reference's — one file
//! to deploy, memory-mapped natively, fetched whole in a browser.
//!
//! It is a table file (see [`crate::file`]) with the model's parts beside the table:
//!
//! | where                     | holds                                                          |
//! |---------------------------|----------------------------------------------------------------|
//! | tensor `model.tokenizer`  | U8: the `tokenizer.json`, byte for byte                        |
//! | tensor `model.mapping`    | U32 `[vocab]`: token id → table row (vocabulary quantisation)  |
//! | tensor `model.weights`    | F32 `[vocab]`: per-token weights                               |
//! | metadata `edo.model`      | JSON settings: `vocab_size`, `normalize`, `max_length`, `drop_unknown`, `clip_ids`, `truncation` |
//! | metadata `edo.model_crc32`| CRC-32 of the `model.*` tensors' bytes in name order           |
//!
//! `truncation` (`null`, or `{"max_length": N, "keep_last": bool}`) is the tokenizer's own
//! truncation that a sentence-transformers model keeps; files without it have none.
//!
//! Everything derived from the vocabulary (the median token length of model2vec's cut, the
//! unknown token's id) is derived again on reading, from the same tokenizer, so a file cannot hold
//! settings that disagree with its tokenizer.

use std::collections::BTreeMap;
use std::sync::Arc;

use safetensors::Dtype;

use super::{bad, check_mapping, check_rows, check_weights, StaticModel, Truncation, Vocabulary};
use crate::file::{ModelParts, ModelTensor, TableFile};
use crate::Error;

impl StaticModel {
    /// The model as a `.edo` model file (its table in the model's format: [`StaticModel::quantize`]
    /// first for another). Write it with [`TableFile::write`] or [`TableFile::to_bytes`].
    pub fn to_edo(&self) -> TableFile {
        let settings = serde_json::json!({
            "vocab_size": self.vocab_size,
            "normalize": self.normalize,
            "max_length": self.max_length,
            "drop_unknown": self.unk.is_some(),
            "clip_ids": self.clip_ids,
            "truncation": self.truncation.map(|t| serde_json::json!({ "max_length": t.max_length, "keep_last": t.keep_last })),
        });
        let mut tensors = BTreeMap::new();
        tensors.insert(
            "model.tokenizer".to_string(),
            ModelTensor { dtype: Dtype::U8, shape: vec![self.tokenizer_json.len()], data: self.tokenizer_json.to_vec() },
        );
        if let Some(m) = &self.mapping {
            tensors.insert("model.mapping".to_string(), ModelTensor { dtype: Dtype::U32, shape: vec![m.len()], data: bytemuck::cast_slice(m).to_vec() });
        }
        if let Some(w) = &self.weights {
            let data = w.iter().flat_map(|x| x.to_le_bytes()).collect();
            tensors.insert("model.weights".to_string(), ModelTensor { dtype: Dtype::F32, shape: vec![w.len()], data });
        }
        TableFile::new(self.table.clone()).with_model(ModelParts { settings: settings.to_string(), tensors })
    }

    /// The model a `.edo` model file holds. Every row is checked against the file's checksums
    /// (a model is read whole), the tokenizer parsed, the mapping and weights checked as a model
    /// folder's are.
    pub fn from_edo(file: &TableFile) -> Result<StaticModel, Error> {
        let Some(parts) = file.model() else {
            return Err(bad("a table file without a model (make one with `edo quantize-model`)"));
        };
        file.verify()?;
        let settings: serde_json::Value = serde_json::from_str(&parts.settings).map_err(|e| bad(format!("edo.model settings: {e}")))?;
        let flag = |key: &str| settings[key].as_bool().ok_or_else(|| bad(format!("edo.model setting {key:?} is not true or false")));
        let (normalize, drop_unknown, clip_ids) = (flag("normalize")?, flag("drop_unknown")?, flag("clip_ids")?);
        let count = |v: &serde_json::Value, key: &str| {
            v.as_u64().and_then(|m| usize::try_from(m).ok()).ok_or_else(|| bad(format!("edo.model setting {key:?} is not a count")))
        };
        let max_length = match &settings["max_length"] {
            serde_json::Value::Null => None,
            v => Some(count(v, "max_length")?),
        };
        let truncation = match &settings["truncation"] {
            serde_json::Value::Null => None,
            t => Some(Truncation {
                max_length: count(&t["max_length"], "truncation.max_length")?,
                keep_last: t["keep_last"].as_bool().ok_or_else(|| bad("edo.model setting \"truncation.keep_last\" is not true or false"))?,
            }),
        };
        let tensor = |name: &str, dtype: Dtype| -> Result<Option<&ModelTensor>, Error> {
            match parts.tensors.get(name) {
                Some(t) if t.dtype != dtype || t.shape.len() != 1 => {
                    Err(bad(format!("tensor {name:?} is {:?} {:?}, expected a {dtype:?} vector", t.dtype, t.shape)))
                }
                t => Ok(t),
            }
        };
        let tokenizer_json = tensor("model.tokenizer", Dtype::U8)?.ok_or_else(|| bad("tensor \"model.tokenizer\" is missing"))?;
        let Vocabulary { tokenizer, vocab_size, median_token_length, unk, fast } = Vocabulary::parse(&tokenizer_json.data)?;
        if settings["vocab_size"].as_u64() != Some(vocab_size as u64) {
            return Err(Error::ShapeMismatch {
                what: "token ids of the tokenizer (edo.model's vocab_size)",
                expected: settings["vocab_size"].as_u64().unwrap_or(0) as usize,
                actual: vocab_size,
            });
        }
        let rows = file.table().rows();
        let mapping = match tensor("model.mapping", Dtype::U32)? {
            Some(t) => {
                Some(check_mapping(t.data.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as i64).collect(), vocab_size, rows)?)
            }
            None => None,
        };
        check_rows(mapping.is_some(), !clip_ids, vocab_size, rows)?;
        let weights = match tensor("model.weights", Dtype::F32)? {
            Some(t) => Some(check_weights(t.data.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect(), vocab_size)?),
            None => None,
        };
        Ok(StaticModel {
            tokenizer,
            tokenizer_json: Arc::from(tokenizer_json.data.as_slice()),
            fast,
            table: file.table().clone(),
            mapping,
            weights,
            normalize,
            max_length,
            median_token_length,
            unk: if drop_unknown { unk } else { None },
            vocab_size,
            clip_ids,
            truncation,
        })
    }

    /// [`StaticModel::from_edo`] of a file's bytes (what a browser fetched).
    pub fn from_edo_bytes(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> Result<StaticModel, Error> {
        StaticModel::from_edo(&TableFile::from_bytes(bytes)?)
    }

    /// Opens a model: a `.edo` model file (memory-mapped) or a model folder
    /// ([`StaticModel::from_dir`]).
    #[cfg(native)]
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<StaticModel, Error> {
        let path = path.as_ref();
        if path.is_dir() {
            return StaticModel::from_dir(path);
        }
        use crate::file::import::FileKind;
        // (A missing path goes on to the open below: missing, not of the wrong kind.)
        if let Some(kind) = FileKind::from_path(path).filter(|&k| k != FileKind::Edo && path.is_file()) {
            // Named as a table of another kind: say so, not what its bytes read as in an .edo header.
            let folder = if kind == FileKind::Safetensors { "; for a model folder's weights, pass the folder" } else { "" };
            let ext = path.extension().unwrap_or_default().to_string_lossy().to_lowercase();
            return Err(crate::file::in_file(path, bad(format!("a .{ext} table, not a model (a model is a folder or an .edo model file{folder})"))));
        }
        let file = TableFile::open(path).map_err(|e| match e {
            Error::BadFile { reason, .. } => bad(format!("{reason} (a model is a folder or an .edo model file)")),
            e => e,
        })?;
        StaticModel::from_edo(&file).map_err(|e| crate::file::in_file(path, e))
    }
}
