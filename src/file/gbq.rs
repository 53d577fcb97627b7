//! ONNX Runtime's `GatherBlockQuantized` (com.microsoft) tables: the operator's (data, scales,
//! zero_points) triplet, to and from edo tables and safetensors files.
//!
//! The operator gathers rows of `data` (`uint8 [rows, dim · bits / 8]`, 4-bit codes packed low
//! nibble first, or 8-bit codes) and decodes value `k` of a row as `(q − zp) · scale` with the
//! scale (`f32` or `f16`, `[rows, ⌈dim / block_size⌉]`) and zero point of its block, the zero
//! points in a `uint8 [rows, ⌈blocks · bits / 8⌉]` tensor or, without them, 8 for 4-bit codes and
//! 128 for 8-bit ones; `block_size` is a power of two ≥ 16. Four-bit zero points are read as
//! ONNX Runtime's kernel (1.23) reads them: two to a byte, low nibble first, in the order of the
//! flattened scales — so with an odd number of blocks per row a row's zero points do not start on
//! a byte, and the tensor's last bytes are slack.
//!
//! [`Gbq::to_table`] keeps such a table as it is — the zero-point formats
//! ([`Format::Int4Zp32`] … [`Format::Int8Zp128`]) hold the same codes, scales and zero points —
//! when its blocks are 32, 64 or 128 values and its scales are fp16 (or f32 values that fp16 holds
//! exactly); other tables come back as the operator's decoded f32 values. Either way every lookup
//! equals the operator's output (in f32; with f16 scales the operator rounds its output to f16,
//! which is edo's value rounded). [`Gbq::from_table`] writes a zero-point table back byte for byte.
//! In a safetensors file the triplet is the tensors `data`, `scales` and (optionally)
//! `zero_points`, with `bits` and `block_size` in the metadata.

use std::collections::BTreeMap;

use half::f16;
use safetensors::Dtype;

use super::tensor::Table;
use super::{write_safetensors, Tensor};
use crate::format::{Format, PackedTable};
use crate::Error;

const WHAT: &str = "GatherBlockQuantized tensors";

/// The zero-point formats and the (bits, block size) of the operator's tables they hold.
const ZP_FORMATS: [(Format, u32, usize); 6] = [
    (Format::Int4Zp32, 4, 32),
    (Format::Int4Zp64, 4, 64),
    (Format::Int4Zp128, 4, 128),
    (Format::Int8Zp32, 8, 32),
    (Format::Int8Zp64, 8, 64),
    (Format::Int8Zp128, 8, 128),
];

/// The scales of a [`Gbq`] table, in the type the operator takes them.
#[derive(Clone, Debug, PartialEq)]
pub enum GbqScales {
    /// `float` scales.
    F32(Vec<f32>),
    /// `float16` scales, as bits.
    F16(Vec<u16>),
}

impl GbqScales {
    fn len(&self) -> usize {
        match self {
            GbqScales::F32(v) => v.len(),
            GbqScales::F16(v) => v.len(),
        }
    }

    fn get(&self, i: usize) -> f32 {
        match self {
            GbqScales::F32(v) => v[i],
            GbqScales::F16(v) => f16::from_bits(v[i]).to_f32(),
        }
    }
}

/// One `GatherBlockQuantized` table: its quantised data, scales and zero points.
#[derive(Clone, Debug, PartialEq)]
pub struct Gbq {
    /// Bits per code: 4 or 8.
    pub bits: u32,
    /// Values per block sharing a scale and zero point: a power of two ≥ 16.
    pub block_size: usize,
    /// Rows.
    pub rows: usize,
    /// Values per row.
    pub dim: usize,
    /// The codes, `rows × dim · bits / 8` bytes.
    pub data: Vec<u8>,
    /// One scale per block, `rows × ⌈dim / block_size⌉`.
    pub scales: GbqScales,
    /// The zero points (`rows × ⌈blocks · bits / 8⌉` bytes; 4-bit ones packed in the order of the
    /// flattened scales, see the module docs), or `None` for the operator's defaults (8 and 128).
    pub zero_points: Option<Vec<u8>>,
}

fn bad(reason: String) -> Error {
    Error::BadFile { what: WHAT, reason }
}

impl Gbq {
    /// Blocks per row.
    pub fn blocks(&self) -> usize {
        self.dim.div_ceil(self.block_size)
    }

    /// Bytes of zero points per row.
    fn zp_row_bytes(&self) -> usize {
        (self.blocks() * self.bits as usize).div_ceil(8)
    }

    /// Checks the shapes and parameters against each other.
    pub fn check(&self) -> Result<(), Error> {
        if self.bits != 4 && self.bits != 8 {
            return Err(bad(format!("bits is {}; edo reads 4- and 8-bit codes", self.bits)));
        }
        if self.block_size < 16 || !self.block_size.is_power_of_two() {
            return Err(bad(format!("block_size is {}; the operator takes a power of two ≥ 16", self.block_size)));
        }
        if self.dim == 0 || !(self.dim * self.bits as usize).is_multiple_of(8) {
            return Err(bad(format!("{} values of {} bits are not whole bytes", self.dim, self.bits)));
        }
        let data = self.rows.checked_mul(self.dim * self.bits as usize / 8);
        if data != Some(self.data.len()) {
            return Err(bad(format!("data has {} bytes; {} rows of {} values take {data:?}", self.data.len(), self.rows, self.dim)));
        }
        let scales = self.rows.checked_mul(self.blocks());
        if scales != Some(self.scales.len()) {
            return Err(bad(format!("scales has {} values; {} rows of {} blocks take {scales:?}", self.scales.len(), self.rows, self.blocks())));
        }
        if let Some(zp) = &self.zero_points {
            let want = self.rows.checked_mul(self.zp_row_bytes());
            if want != Some(zp.len()) {
                return Err(bad(format!("zero_points has {} bytes; {} rows take {want:?}", zp.len(), self.rows)));
            }
        }
        Ok(())
    }

    fn code(bytes: &[u8], bits: u32, i: usize) -> u32 {
        if bits == 8 {
            bytes[i] as u32
        } else {
            (bytes[i / 2] >> (4 * (i % 2)) & 0xF) as u32
        }
    }

    /// The zero point of block `b` of row `r`: code `r · blocks + b` of the zero points.
    fn zero_point(&self, r: usize, b: usize) -> u32 {
        match &self.zero_points {
            Some(zp) => Self::code(zp, self.bits, r * self.blocks() + b),
            None => 1 << (self.bits - 1),
        }
    }

    /// The operator's output for every row, in f32: `(q − zp) · scale`.
    pub fn decode(&self) -> Result<Vec<f32>, Error> {
        self.check()?;
        let row_bytes = self.dim * self.bits as usize / 8;
        let mut out = Vec::with_capacity(self.rows * self.dim);
        for r in 0..self.rows {
            let data = &self.data[r * row_bytes..];
            for i in 0..self.dim {
                let b = i / self.block_size;
                let q = Self::code(data, self.bits, i) as f32 - self.zero_point(r, b) as f32;
                out.push(q * self.scales.get(r * self.blocks() + b));
            }
        }
        Ok(out)
    }

    /// The edo format that holds this table exactly, if any.
    pub fn format(&self) -> Option<Format> {
        let &(format, ..) = ZP_FORMATS.iter().find(|&&(_, bits, block)| (bits, block) == (self.bits, self.block_size))?;
        let fp16_exact = match &self.scales {
            GbqScales::F16(v) => v.iter().all(|&h| f16::from_bits(h).is_finite()),
            GbqScales::F32(v) => v.iter().all(|&s| f16::from_f32(s).to_f32().to_bits() == s.to_bits() && s.is_finite()),
        };
        fp16_exact.then_some(format)
    }

    /// The table in a zero-point format when one holds it exactly ([`Gbq::format`]), else the
    /// operator's decoded values; refused when the decoded values are not finite.
    pub fn to_table(&self) -> Result<Table, Error> {
        self.check()?;
        let Some(format) = self.format() else {
            let data = self.decode()?;
            if let Some(i) = data.iter().position(|x| !x.is_finite()) {
                return Err(bad(format!("row {} decodes to {} at column {}", i / self.dim, data[i], i % self.dim)));
            }
            return Ok(Table::Dense { data, rows: self.rows, dim: self.dim });
        };
        let mut table = PackedTable::zeroed(format, self.rows, self.dim, "GatherBlockQuantized table")?;
        let code_words = format.code_words(self.dim);
        let row_bytes = self.dim * self.bits as usize / 8;
        for (r, words) in table.words_mut().chunks_exact_mut(format.row_words(self.dim)).enumerate() {
            let (codes, params) = words.split_at_mut(code_words);
            // Both layouts put element 2j in the low nibble of byte j (or element j in byte j),
            // and edo's codes are the operator's data row padded to a word (a row's blocks of 32
            // values or more start on words; a short last block ends where its values do).
            bytemuck::cast_slice_mut::<u32, u8>(codes)[..row_bytes].copy_from_slice(&self.data[r * row_bytes..][..row_bytes]);
            for (b, p) in params.iter_mut().enumerate() {
                let scale = f16::from_f32(self.scales.get(r * self.blocks() + b));
                *p = scale.to_bits() as u32 | self.zero_point(r, b) << 16;
            }
        }
        Ok(Table::Packed(table))
    }

    /// A zero-point table as the operator's triplet, byte for byte (fp16 scales; no zero points
    /// when all are the default). Other formats are refused: quantise to a zero-point format
    /// first.
    pub fn from_table(table: &PackedTable) -> Result<Gbq, Error> {
        let Some(&(_, bits, block_size)) = ZP_FORMATS.iter().find(|(f, ..)| *f == table.format()) else {
            return Err(Error::Unsupported(crate::Unsupported::GbqExportFormat));
        };
        let (rows, dim) = (table.rows(), table.dim());
        if !(dim * bits as usize).is_multiple_of(8) {
            return Err(Error::Unsupported(crate::Unsupported::GbqExportOddWidth));
        }
        let blocks = dim.div_ceil(block_size);
        let row_bytes = dim * bits as usize / 8;
        let code_words = table.format().code_words(dim);
        let (mut data, mut scales, mut zps) = (Vec::with_capacity(rows * row_bytes), Vec::with_capacity(rows * blocks), Vec::with_capacity(rows * blocks));
        for r in 0..rows {
            let words = table.row(r);
            data.extend_from_slice(&bytemuck::cast_slice::<u32, u8>(&words[..code_words])[..row_bytes]);
            for &p in &words[code_words..] {
                scales.push(p as u16);
                zps.push((p >> 16) as u8);
            }
        }
        let default = 1u8 << (bits - 1);
        let zero_points = if zps.iter().all(|&z| z == default) {
            None
        } else if bits == 8 {
            Some(zps)
        } else {
            // In the order of the flattened scales; the tensor's shape keeps a byte per row for
            // every two blocks, so an odd count leaves slack at the end.
            let mut packed = vec![0u8; rows * blocks.div_ceil(2)];
            for (i, &z) in zps.iter().enumerate() {
                packed[i / 2] |= z << (4 * (i % 2));
            }
            Some(packed)
        };
        Ok(Gbq { bits, block_size, rows, dim, data, scales: GbqScales::F16(scales), zero_points })
    }

    /// Reads the triplet from a safetensors file (tensors `data`, `scales`, optional
    /// `zero_points`; metadata `bits`, default 4, and `block_size`, default the one the shapes
    /// give).
    pub fn from_safetensors(bytes: &[u8]) -> Result<Gbq, Error> {
        let (_, meta) = safetensors::SafeTensors::read_metadata(bytes).map_err(|e| bad(e.to_string()))?;
        let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| bad(e.to_string()))?;
        let get = |name: &str| st.tensor(name).map_err(|_| bad(format!("no tensor {name:?}")));
        let number = |key: &str| -> Result<Option<usize>, Error> {
            match meta.metadata().as_ref().and_then(|m| m.get(key)) {
                Some(v) => v.parse().map(Some).map_err(|_| bad(format!("metadata {key} is {v:?}, not a number"))),
                None => Ok(None),
            }
        };
        let bits = number("bits")?.unwrap_or(4);
        if bits != 4 && bits != 8 {
            return Err(bad(format!("bits is {bits}; edo reads 4- and 8-bit codes")));
        }
        let data = get("data")?;
        let scales = get("scales")?;
        let (&[rows, cols], &[srows, blocks]) = (data.shape(), scales.shape()) else {
            return Err(bad(format!("data {:?} and scales {:?} must be 2-D", data.shape(), scales.shape())));
        };
        if data.dtype() != Dtype::U8 || srows != rows || blocks == 0 {
            return Err(bad(format!(
                "data must be U8 [rows, dim · bits / 8] and scales [rows, blocks]: data {:?} {:?}, scales {:?}",
                data.dtype(),
                data.shape(),
                scales.shape()
            )));
        }
        let dim = cols * 8 / bits;
        let block_size = match number("block_size")? {
            Some(b) => b,
            None => dim.div_ceil(blocks).next_power_of_two(),
        };
        let scales = match scales.dtype() {
            Dtype::F32 => GbqScales::F32(scales.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()),
            Dtype::F16 => GbqScales::F16(scales.data().chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect()),
            other => return Err(bad(format!("scales are {other:?}; the operator takes F32 or F16"))),
        };
        let zero_points = match st.tensor("zero_points") {
            Ok(z) if z.dtype() == Dtype::U8 => Some(z.data().to_vec()),
            Ok(z) => return Err(bad(format!("zero_points are {:?}, not U8", z.dtype()))),
            Err(_) => None,
        };
        let gbq = Gbq { bits: bits as u32, block_size, rows, dim, data: data.data().to_vec(), scales, zero_points };
        gbq.check()?;
        Ok(gbq)
    }

    /// The triplet as a safetensors file (see [`Gbq::from_safetensors`]).
    pub fn to_safetensors(&self) -> Vec<u8> {
        let mut meta = BTreeMap::new();
        meta.insert("bits".to_string(), self.bits.to_string());
        meta.insert("block_size".to_string(), self.block_size.to_string());
        meta.insert("edo.layout".to_string(), "onnxruntime GatherBlockQuantized (data, scales, zero_points)".to_string());
        let row_bytes = self.dim * self.bits as usize / 8;
        let mut tensors = vec![("data".to_string(), Tensor { dtype: Dtype::U8, shape: vec![self.rows, row_bytes], data: self.data.as_slice().into() })];
        let scales: Vec<u8> = match &self.scales {
            GbqScales::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            GbqScales::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        };
        let dtype = if matches!(self.scales, GbqScales::F32(_)) { Dtype::F32 } else { Dtype::F16 };
        tensors.push(("scales".to_string(), Tensor { dtype, shape: vec![self.rows, self.blocks()], data: scales.into() }));
        if let Some(zp) = &self.zero_points {
            tensors.push(("zero_points".to_string(), Tensor { dtype: Dtype::U8, shape: vec![self.rows, self.zp_row_bytes()], data: zp.as_slice().into() }));
        }
        let mut out = Vec::new();
        write_safetensors(&mut out, &tensors, &meta).expect("writing to memory");
        out
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn zero_point_formats_are_the_blocks_they_say() {
        for (format, bits, block) in super::ZP_FORMATS {
            assert_eq!((format.code_bits(), format.group()), (bits as usize, block), "{format}");
        }
    }
}
