//! Each format's WGSL decoder: the GPU half of a format, whose CPU half (layout, codec, oracle) is
//! [`edo_core::format`]. One entry per format in [`decoder`].
//!
//! # The WGSL decoder contract
//!
//! [`WgslDecoder::wgsl`] is WGSL with no bindings and no entry point, concatenated between a kernel's
//! helpers and its driver. It reads the packed words with `word(p: u32) -> u32`, word `p` of the
//! bound shard, which the kernel's helpers define, and defines:
//! - `RowParams`: a type (an `alias`) holding what a row's decoding needs — the row's scale and
//!   bias, or where its groups' parameters start;
//! - `fn row_params(base: u32, code_words: u32) -> RowParams`, read once per row; `base` is the
//!   row's first word in `shard`; the zero value of `RowParams` must be harmless to compute with;
//! - `fn decode1(base: u32, c: u32, p: RowParams) -> f32`: value `c` of the row;
//! - `fn decode4(base: u32, c: u32, p: RowParams) -> vec4<f32>`: values `c .. c + 4` (`c` a
//!   multiple of 4, all within the row, so within one group).
//!
//! [`WgslDecoder::wide`], where a format has it, follows the decoder in kernels that bind the shard
//! as 16-byte words (`quad(v)`, word `4v .. 4v + 4`; `word(p)` still reads one u32), on rows that
//! start on 16-byte boundaries, every dim a multiple of 16. It defines
//! - `fn decode16(base: u32, c: u32, p: RowParams) -> Quads`: values `c .. c + 16` (`c` a
//!   multiple of 16) as four quads, read with whole 16-byte loads.
//!
//! Each value must equal [`Codec::decode_row`](edo_core::Codec::decode_row)'s bit for bit: one
//! rounding at most, after a product that is exact in f32, so that a driver's fused multiply-add
//! cannot change it. Variants of one decoder are override constants ([`WgslDecoder::constants`]), not
//! copies.

use crate::format::Format;
use crate::{Error, Unsupported};

/// A format's WGSL decoder (see the module's contract).
#[derive(Clone, Copy, Debug)]
pub struct WgslDecoder {
    /// The decoder: `RowParams`, `row_params`, `decode1`, `decode4`.
    pub wgsl: &'static str,
    /// Override constants it needs (the binary decoder's `SCALED`).
    pub constants: &'static [(&'static str, f64)],
    /// Its 16-byte reads, `decode16`, if the format has them.
    pub wide: Option<&'static str>,
}

impl WgslDecoder {
    const fn new(wgsl: &'static str, constants: &'static [(&'static str, f64)], wide: Option<&'static str>) -> WgslDecoder {
        WgslDecoder { wgsl, constants, wide }
    }
}

/// `format`'s decoder; `None` for a format edo-core has and the GPU path cannot decode yet
/// (every format has one today: `every_format_has_a_decoder` checks).
pub fn decoder(format: Format) -> Option<WgslDecoder> {
    const GROUPED: &str = wgsl!("decode_grouped.wgsl");
    const BLOCKS: &str = wgsl!("decode_blocks.wgsl");
    const KQUANTS: &str = wgsl!("decode_kquants.wgsl");
    Some(match format {
        Format::F32 => WgslDecoder::new(wgsl!("decode_f32.wgsl"), &[], None),
        Format::F16 => WgslDecoder::new(wgsl!("decode_f16.wgsl"), &[], Some(wgsl!("decode_f16_16.wgsl"))),
        Format::Int8 => WgslDecoder::new(wgsl!("decode_int8.wgsl"), &[], Some(wgsl!("decode_int8_16.wgsl"))),
        Format::Int4 => WgslDecoder::new(wgsl!("decode_int4.wgsl"), &[], None),
        Format::Binary => WgslDecoder::new(wgsl!("decode_binary.wgsl"), &[("SCALED", 0.0)], None),
        Format::BinaryScaled => WgslDecoder::new(wgsl!("decode_binary.wgsl"), &[("SCALED", 1.0)], None),
        // ggml's blocks: BITS, MIN (a block minimum, the _1 formats) and OFFSET, 2^(BITS − 1).
        Format::Q8_0 => WgslDecoder::new(BLOCKS, &[("BITS", 8.0), ("MIN", 0.0), ("OFFSET", 128.0)], Some(wgsl!("decode_q8_0_16.wgsl"))),
        Format::Q4_0 => WgslDecoder::new(BLOCKS, &[("BITS", 4.0), ("MIN", 0.0), ("OFFSET", 8.0)], None),
        Format::Q4_1 => WgslDecoder::new(BLOCKS, &[("BITS", 4.0), ("MIN", 1.0), ("OFFSET", 8.0)], None),
        Format::Q5_0 => WgslDecoder::new(BLOCKS, &[("BITS", 5.0), ("MIN", 0.0), ("OFFSET", 16.0)], None),
        Format::Q5_1 => WgslDecoder::new(BLOCKS, &[("BITS", 5.0), ("MIN", 1.0), ("OFFSET", 16.0)], None),
        Format::Int4G32 => WgslDecoder::new(GROUPED, &[("BITS", 4.0), ("GROUP", 32.0), ("ZP", 0.0)], None),
        Format::Int4G64 => WgslDecoder::new(GROUPED, &[("BITS", 4.0), ("GROUP", 64.0), ("ZP", 0.0)], None),
        Format::Int4G128 => WgslDecoder::new(GROUPED, &[("BITS", 4.0), ("GROUP", 128.0), ("ZP", 0.0)], None),
        Format::Int8G32 => WgslDecoder::new(GROUPED, &[("BITS", 8.0), ("GROUP", 32.0), ("ZP", 0.0)], None),
        Format::Int8G64 => WgslDecoder::new(GROUPED, &[("BITS", 8.0), ("GROUP", 64.0), ("ZP", 0.0)], None),
        Format::Int8G128 => WgslDecoder::new(GROUPED, &[("BITS", 8.0), ("GROUP", 128.0), ("ZP", 0.0)], None),
        Format::Q4K => WgslDecoder::new(KQUANTS, &[("BITS", 4.0)], None),
        Format::Q6K => WgslDecoder::new(KQUANTS, &[("BITS", 6.0)], None),
        Format::Fp8E4M3 => WgslDecoder::new(wgsl!("decode_fp8.wgsl"), &[("E5M2", 0.0)], Some(wgsl!("decode_fp8_16.wgsl"))),
        Format::Fp8E5M2 => WgslDecoder::new(wgsl!("decode_fp8.wgsl"), &[("E5M2", 1.0)], Some(wgsl!("decode_fp8_16.wgsl"))),
        // ONNX Runtime's GatherBlockQuantized: the grouped decoder with an integer zero point.
        Format::Int4Zp32 => WgslDecoder::new(GROUPED, &[("BITS", 4.0), ("GROUP", 32.0), ("ZP", 1.0)], None),
        Format::Int4Zp64 => WgslDecoder::new(GROUPED, &[("BITS", 4.0), ("GROUP", 64.0), ("ZP", 1.0)], None),
        Format::Int4Zp128 => WgslDecoder::new(GROUPED, &[("BITS", 4.0), ("GROUP", 128.0), ("ZP", 1.0)], None),
        Format::Int8Zp32 => WgslDecoder::new(GROUPED, &[("BITS", 8.0), ("GROUP", 32.0), ("ZP", 1.0)], None),
        Format::Int8Zp64 => WgslDecoder::new(GROUPED, &[("BITS", 8.0), ("GROUP", 64.0), ("ZP", 1.0)], None),
        Format::Int8Zp128 => WgslDecoder::new(GROUPED, &[("BITS", 8.0), ("GROUP", 128.0), ("ZP", 1.0)], None),
        _ => return None,
    })
}

/// `format`'s decoder, or [`Unsupported::GpuDecoder`] where the GPU path has none.
pub fn require(format: Format) -> Result<WgslDecoder, Error> {
    decoder(format).ok_or(Error::Unsupported(Unsupported::GpuDecoder { format }))
}

/// Whether the GPU reads this format's rows 16 bytes at a time where they allow it: FP16 rows of
/// whole vec4s, and INT8's, FP8's and q8_0's rows that start on 16-byte boundaries (aligned so,
/// [`PackedTable::with_row_alignment`](crate::PackedTable::with_row_alignment), or q8_0's of whole
/// vec4s) at dims that are multiples of 16.
pub fn has_wide_reads(format: Format) -> bool {
    decoder(format).is_some_and(|d| d.wide.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Block, Codec};

    #[test]
    fn every_format_has_a_decoder() {
        for format in Format::ALL {
            assert!(decoder(format).is_some(), "{format}: no GPU decoder");
        }
    }

    /// Every `BITS` and `GROUP` above is the codec's own (`Format::code_bits`, `Format::group`).
    #[test]
    fn bits_and_groups_are_the_codecs() {
        for format in Format::ALL {
            for &(name, value) in decoder(format).map_or(&[][..], |d| d.constants) {
                match name {
                    "BITS" => assert_eq!(value, format.code_bits() as f64, "{format}"),
                    "GROUP" => assert_eq!(value, format.group() as f64, "{format}"),
                    _ => {}
                }
            }
        }
    }

    /// The ggml constants above are the codecs' own (`OFFSET` is 2^(BITS − 1), `MIN` the _1 kinds).
    #[test]
    fn block_constants_are_the_codecs() {
        fn check<const BITS: usize, const MIN: bool>() {
            let Some(d) = decoder(<Block<BITS, MIN> as Codec>::FORMAT) else { panic!("no decoder") };
            assert_eq!(d.constants, &[("BITS", BITS as f64), ("MIN", MIN as u8 as f64), ("OFFSET", (1u32 << (BITS - 1)) as f64)]);
        }
        check::<8, false>();
        check::<4, false>();
        check::<4, true>();
        check::<5, false>();
        check::<5, true>();
    }
}
