//! Writing tables in the layouts other tools read.
//!
//! [`packed_array`] gives a table's rows without edo's word padding, which for each format is the
//! layout its ecosystem uses:
//!
//! | format         | array                               | read by                                        |
//! |----------------|-------------------------------------|------------------------------------------------|
//! | `fp32`         | f32 `[rows, dim]`                   | anything                                       |
//! | `fp16`         | f16 `[rows, dim]`                   | anything                                       |
//! | `int8`         | u8 `[rows, dim + 8]`                | FBGEMM / PyTorch fused 8-bit row-wise ops      |
//! | `int4`         | u8 `[rows, ⌈dim/2⌉ + 4]`            | FBGEMM / PyTorch fused 4-bit row-wise ops      |
//! | `binary`       | u8 `[rows, ⌈dim/8⌉]`                | `numpy.unpackbits`, sentence-transformers `ubinary`, faiss after bit reversal |
//! | `binary+scale` | u8 `[rows, ⌈dim/8⌉ + 4]`            | edo (packbits bytes, then the f32 scale)       |
//!
//! [`dense_array`] gives the decoded f32 values instead, for tools that know no packed layout.

use std::collections::BTreeMap;

use safetensors::tensor::Dtype;

use super::{npy, write_safetensors, Tensor, Vocab};
use crate::format::{Format, PackedTable};
use crate::Error;

/// An array to write: element type, shape and little-endian bytes.
pub struct Array {
    /// The element type.
    pub dtype: npy::Dtype,
    /// The array's shape.
    pub shape: Vec<usize>,
    /// The elements, little-endian, in C order.
    pub data: Vec<u8>,
}

/// The table's rows without word padding, in its format's ecosystem layout (see the module docs).
pub fn packed_array(table: &PackedTable) -> Array {
    let format = table.format();
    let dim = table.dim();
    let row = format.unpadded_row_bytes(dim);
    let mut data = vec![0u8; table.rows() * row];
    for (r, out) in data.chunks_exact_mut(row.max(1)).enumerate() {
        format.write_external(table.row(r), dim, out);
    }
    let (dtype, shape) = match format {
        Format::F32 => (npy::Dtype::F32, vec![table.rows(), dim]),
        Format::F16 => (npy::Dtype::F16, vec![table.rows(), dim]),
        _ => (npy::Dtype::U8, vec![table.rows(), row]),
    };
    Array { dtype, shape, data }
}

/// The decoded table as f32 `[rows, dim]`.
pub fn dense_array(table: &PackedTable) -> Array {
    let values = table.dequantize();
    Array { dtype: npy::Dtype::F32, shape: vec![table.rows(), table.dim()], data: bytemuck::cast_slice(&values).to_vec() }
}

impl Array {
    /// The bytes of a `.npy` file holding the array, as `numpy.save` writes it.
    pub fn to_npy(&self) -> Vec<u8> {
        npy::write(self.dtype, &self.shape, &self.data)
    }

    /// The bytes of a safetensors file holding the array as tensor `name`, with `metadata`.
    pub fn to_safetensors(&self, name: &str, metadata: &BTreeMap<String, String>) -> Vec<u8> {
        let dtype = match self.dtype {
            npy::Dtype::F64 => Dtype::F64,
            npy::Dtype::F32 => Dtype::F32,
            npy::Dtype::F16 => Dtype::F16,
            npy::Dtype::U8 => Dtype::U8,
            npy::Dtype::I8 => Dtype::I8,
            npy::Dtype::U32 => Dtype::U32,
            npy::Dtype::I32 => Dtype::I32,
            npy::Dtype::I64 => Dtype::I64,
        };
        let tensor = Tensor { dtype, shape: self.shape.clone(), data: (&self.data[..]).into() };
        let mut out = Vec::with_capacity(self.data.len() + 256);
        write_safetensors(&mut out, &[(name.to_string(), tensor)], metadata).expect("writing to a Vec cannot fail");
        out
    }
}

/// The decoded table as word2vec / GloVe text (`token v1 … vD` per line, no header), values
/// printed in the shortest form that reads back to the same f32. Rows without a vocabulary are
/// named by their index; a token holding whitespace could not be read back and is refused.
pub fn text(table: &PackedTable, vocab: Option<&Vocab>) -> Result<String, Error> {
    use std::fmt::Write;
    let mut out = String::new();
    let mut row = vec![0f32; table.dim()];
    for r in 0..table.rows() {
        table.decode_row_into(r, &mut row);
        match vocab.and_then(|v| v.token(r as u32)) {
            Some(t) if t.is_empty() || t.contains(char::is_whitespace) => return Err(Error::Unsupported(crate::Unsupported::Word2vecToken)),
            Some(t) => out.push_str(t),
            None => write!(out, "{r}").expect("writing to a String"),
        }
        for v in &row {
            write!(out, " {v}").expect("writing to a String");
        }
        out.push('\n');
    }
    Ok(out)
}
