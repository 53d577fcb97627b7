//! Packed row formats: pure Rust, no GPU.
//!
//! Every format packs one table row into whole little-endian `u32` words: first the codes, padded
//! up to a word boundary, then the row's parameters (scale, bias) if the format has any. The same
//! words are uploaded to the GPU unchanged, so a row's byte layout is identical on the host, in a
//! table file and in a storage buffer. When the code bytes of a row are a multiple of four, the row
//! bytes are exactly FBGEMM's fused row-wise layout (codes, then scale and bias).
//!
//! Each format implements [`Codec`]: a one-value-at-a-time [`Codec::decode_row_reference`] that
//! states the format's arithmetic, and the decoder the CPU path runs ([`Codec::decode_row`]),
//! eight values an operation on the CPU's instruction set, equal to the reference bit for bit on
//! every level (tested) and the oracle every GPU kernel is tested against. Dequantised values are
//! `code * scale + bias` where the product is exact in f32 (INT4's fp16 scale has 11 significant
//! bits, INT8's scale is rounded to 16), so the single rounding is the addition and CPU and GPU
//! agree bit for bit whether or not a compiler fuses the multiply-add — WGSL allows either, and
//! drivers differ.

mod binary;
mod f16;
mod f32;
mod fp8;
mod ggml;
mod grouped;
mod int4;
mod int8;
mod kquant;
mod table;
mod unpack;
mod zero_point;

pub(crate) use binary::bit_shift;
pub use binary::{Binary, BinaryScaled};
pub use f16::F16;
pub use f32::F32;
pub use fp8::{Fp8, Fp8E4M3, Fp8E5M2};
pub use ggml::{Block, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, QK};
pub use grouped::{Grouped, Int4G128, Int4G32, Int4G64, Int8G128, Int8G32, Int8G64};
pub use int4::Int4;
pub use int8::Int8;
pub use kquant::{KBlock, Q4K, Q6K, QK_K};
pub use table::{PackedTable, SharedBytes, NO_ROW_ALIGNMENT};
pub use zero_point::{Int4Zp128, Int4Zp32, Int4Zp64, Int8Zp128, Int8Zp32, Int8Zp64, ZeroPoint};

use std::marker::PhantomData;

use crate::simd::{Kernel, Lanes};
use crate::Error;

/// [`Codec::decode`] as a kernel calls it. Natively it is inlined into the kernel, which is
/// compiled once per instruction set. The browser build has one instruction set, and there each
/// kernel calls the format's one shared decoder ([`Codec::decode_row`]) instead: a decoder
/// inlined into the gather and into each kind of bag made every format's code several times
/// over, 40 KB more of every page's gzipped `.wasm`, for a call per row saved.
#[inline(always)]
pub(crate) fn decode_in_kernel<C: Codec, L: Lanes>(lanes: L, words: &[u32], out: &mut [f32]) {
    #[cfg(web)]
    {
        let _ = lanes;
        C::decode_row(words, out)
    }
    #[cfg(native)]
    C::decode(lanes, words, out)
}

/// [`Codec::decode`] of one row as a [`Kernel`], run on the CPU's instruction set.
struct DecodeRow<'a, C>(PhantomData<C>, &'a [u32], &'a mut [f32]);

impl<C: Codec> Kernel for DecodeRow<'_, C> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lanes>(self, lanes: L) {
        C::decode(lanes, self.1, self.2)
    }
}

/// Why a row could not be encoded. [`PackedTable::quantize`] adds the row index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EncodeError {
    /// `value` at column `col` is NaN or infinite.
    NonFinite {
        /// The column.
        col: usize,
        /// The value.
        value: f32,
    },
    /// `value` at column `col` is finite but beyond what the format can store (FP16: |x| > 65504).
    OutOfRange {
        /// The column.
        col: usize,
        /// The value.
        value: f32,
    },
}

/// One packed row format: its layout and its CPU codec (the oracle). A new format is a file
/// implementing this trait and a line in `formats!` (both in this module); its GPU decoder is
/// edo's (`shaders/decode_<name>.wgsl`, listed in `edo::gpu::decoders`).
///
/// # Layout
///
/// A row's values fall into groups of [`Codec::GROUP`] values that share parameters (a scale, a
/// bias); `GROUP = 0` means one group, the whole row (FBGEMM's row-wise formats). A row of `dim`
/// values takes [`Codec::code_words`]`(dim)` words of codes, each group's codes starting on a word;
/// a row's last group, cut short by its width, stores only the words its values reach (the
/// k-quants: the sub-blocks they reach; ggml's 5-bit blocks: their nibbles, then their fifth
/// bits), followed by [`Codec::param_words`]`(dim)` words holding every group's
/// [`Codec::PARAM_BITS`] bits of parameters in group order (two 16-bit parameter sets to a word,
/// low half first).
///
/// # Files
///
/// [`Codec::write_external`] and [`Codec::read_external`] convert a row to and from the unpadded
/// layout of the format's ecosystem ([`Format::unpadded_row_bytes`] bytes): codes then parameters
/// (FBGEMM, packbits) unless a format says otherwise (ggml's blocks).
pub trait Codec {
    /// The runtime tag of this format.
    const FORMAT: Format;
    /// The short name the CLI, files and reports use.
    const NAME: &'static str;
    /// Other names [`Format::from_name`] accepts (lower case).
    const ALIASES: &'static [&'static str] = &[];
    /// Bits per code (32, 16, 8, 6, 5, 4 or 1).
    const CODE_BITS: usize;
    /// Values per group sharing parameters; 0 for the whole row.
    const GROUP: usize = 0;
    /// Bits of parameters per group (a multiple of 16).
    const PARAM_BITS: usize;
    /// ggml's type id for the same values in the same external layout (`GGML_TYPE_*`), if any.
    const GGML_TYPE: Option<u32> = None;
    /// Whether [`Codec::encode_row_min_error`] searches (differs from [`Codec::encode_row`]).
    const MIN_ERROR_SEARCH: bool = false;

    /// Groups in a row of `dim` values.
    fn groups(dim: usize) -> usize {
        if Self::GROUP == 0 {
            1
        } else {
            dim.div_ceil(Self::GROUP)
        }
    }

    /// Code words of a row of `dim` values: `dim · bits / 32` rounded up — a group's codes are
    /// whole words, so only a row's last group, cut short, may end inside a word. Formats that
    /// lay out a short last group otherwise override it: ggml's 5-bit blocks (a word of fifth
    /// bits after the nibbles) and the k-quants' sub-blocks. Saturates rather than wraps for a dim no
    /// table has (a file's header may claim one).
    fn code_words(dim: usize) -> usize {
        const { assert!((Self::GROUP * Self::CODE_BITS).is_multiple_of(32), "a group's codes must be whole words") };
        dim.saturating_mul(Self::CODE_BITS).div_ceil(32)
    }

    /// Parameter words of a row of `dim` values (saturating, as [`Codec::code_words`]).
    fn param_words(dim: usize) -> usize {
        Self::groups(dim).saturating_mul(Self::PARAM_BITS).div_ceil(32)
    }

    /// Encodes `row` into `out`, which has exactly `code_words(row.len()) + param_words(row.len())`
    /// words.
    fn encode_row(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError>;

    /// Decodes a packed row (`code_words(out.len()) + param_words(out.len())` words) into `out`,
    /// eight values at a time on the best instruction set the CPU has (`crate::cpu::Simd`):
    /// what the CPU path computes, equal bit for bit to [`Codec::decode_row_reference`].
    fn decode_row(words: &[u32], out: &mut [f32])
    where
        Self: Sized,
    {
        crate::simd::run(DecodeRow::<Self>(PhantomData, words, out))
    }

    /// The same decode one value at a time, as the format's documentation states it: the scalar
    /// oracle the CPU path's decoders are tested against on every instruction set.
    fn decode_row_reference(words: &[u32], out: &mut [f32]);

    /// [`Codec::decode_row`] on one instruction set: the body the CPU path's kernels inline.
    /// Crate-internal (its instruction-set tokens cannot be named outside edo).
    #[doc(hidden)]
    fn decode<L: Lanes>(lanes: L, words: &[u32], out: &mut [f32]);

    /// Encodes `row` as [`Codec::encode_row`] does, but choosing each group's parameters to
    /// minimise the squared error rather than from its minimum and maximum, where the format has
    /// such a choice (the group-wise formats); the others encode as `encode_row`. The squared
    /// error of every group is at most `encode_row`'s; the per-value bound of
    /// [`Codec::error_bounds`] need not hold (a clipped outlier may lose more).
    fn encode_row_min_error(row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        Self::encode_row(row, out)
    }

    /// The documented bound on `|x − x̂|` for each value of `row` (finite) after a round trip
    /// through this format.
    fn error_bounds(row: &[f32]) -> Vec<f32>;

    /// Pools a packed row into `acc` (`dim` values): `acc += w · x` or, with `max`,
    /// `acc = max(acc, x)`, where `x` is exactly what [`Codec::decode`] gives on `lanes`' instruction
    /// set, decoded into `scratch` (at least `dim` values) first. Formats whose values decode one
    /// at a time as fast override it so the row never goes through memory. Crate-internal, as
    /// [`Codec::decode`].
    #[doc(hidden)]
    #[inline(always)]
    fn pool_row<L: Lanes>(lanes: L, words: &[u32], w: f32, max: bool, acc: &mut [f32], scratch: &mut [f32])
    where
        Self: Sized,
    {
        let row = &mut scratch[..acc.len()];
        decode_in_kernel::<Self, L>(lanes, words, row);
        pool_values(acc, row.iter().copied(), w, max);
    }

    /// Whether [`Codec::octet`] decodes any eight consecutive values of a row on their own, so
    /// the CPU path's bags keep their sums in registers across a bag's rows instead of decoding
    /// every row into memory first (FP32, FP16, INT8, INT4, binary with and without its scale,
    /// and the group-wise and zero-point forms of 64 and 128 values so far).
    #[doc(hidden)]
    const OCTETS: bool = false;

    /// Values `8k .. 8k + 8` of a packed row (`words`, a whole row of `dim` values, at least
    /// `8k + 8`), exactly the bits [`Codec::decode`] gives them on `lanes`' instruction set. Only
    /// called where [`Codec::OCTETS`]. (`dim` places a group's parameters after the codes.)
    #[doc(hidden)]
    #[inline(always)]
    fn octet<L: Lanes>(lanes: L, words: &[u32], k: usize, dim: usize) -> L::F
    where
        Self: Sized,
    {
        let _ = (words, k, dim);
        lanes.splat(f32::NAN)
    }

    /// Writes a packed row of `dim` values in the external layout (`out` has
    /// [`Format::unpadded_row_bytes`] bytes): the code bytes without word padding, then the
    /// parameter bytes.
    fn write_external(words: &[u32], dim: usize, out: &mut [u8]) {
        let code_bytes = code_bytes::<Self>(dim);
        let bytes: &[u8] = bytemuck::cast_slice(words);
        let (codes, params) = out.split_at_mut(code_bytes);
        codes.copy_from_slice(&bytes[..code_bytes]);
        params.copy_from_slice(&bytes[4 * Self::code_words(dim)..][..params.len()]);
    }

    /// Reads a row of `dim` values from the external layout (`src` has
    /// [`Format::unpadded_row_bytes`] bytes) into `out` (zeroed, [`Format::row_words`] words).
    fn read_external(src: &[u8], dim: usize, out: &mut [u32]) {
        let code_bytes = code_bytes::<Self>(dim);
        let code_words = Self::code_words(dim);
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        bytes[..code_bytes].copy_from_slice(&src[..code_bytes]);
        bytes[4 * code_words..][..src.len() - code_bytes].copy_from_slice(&src[code_bytes..]);
    }
}

/// Bytes of codes in a row of `dim` values without word padding: `dim · bits / 8` rounded up, or
/// for ggml's formats whole blocks (a GGUF row is whole blocks).
fn code_bytes<C: Codec + ?Sized>(dim: usize) -> usize {
    match (C::GROUP, C::GGML_TYPE) {
        (g, Some(_)) if g > 0 => C::groups(dim).saturating_mul(g * C::CODE_BITS / 8),
        _ => dim.saturating_mul(C::CODE_BITS).div_ceil(8),
    }
}

/// Code words of a row of `dim` values laid out in blocks of `block` values, each whole block
/// `whole` words and a short last block of `n` values `short(n)` words (ggml's blocks, the
/// k-quants' super-blocks). Saturates, as [`Codec::code_words`].
pub(crate) fn block_code_words(dim: usize, block: usize, whole: usize, short: impl Fn(usize) -> usize) -> usize {
    (dim / block).saturating_mul(whole).saturating_add(match dim % block {
        0 => 0,
        n => short(n),
    })
}

/// The least and greatest value of a (finite) row.
pub(crate) fn min_max(row: &[f32]) -> (f32, f32) {
    row.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// `acc += w · x` or, with `max`, `acc = max(acc, x)`, over the decoded values `x` of one row.
#[inline(always)]
pub(crate) fn pool_values(acc: &mut [f32], values: impl Iterator<Item = f32>, w: f32, max: bool) {
    if max {
        for (a, x) in acc.iter_mut().zip(values) {
            *a = a.max(x);
        }
    } else if w == 1.0 {
        // Unweighted bags, the usual case: 1 · x is x exactly, so the product is left out.
        for (a, x) in acc.iter_mut().zip(values) {
            *a += x;
        }
    } else {
        for (a, x) in acc.iter_mut().zip(values) {
            *a += w * x;
        }
    }
}

/// Declares the formats from one list — a line per format: `Variant => CodecType`, its doc above
/// it, in the order tables and reports list them — and generates from it the enum [`Format`],
/// [`Format::ALL`] and `dispatch!` (a runtime format to its [`Codec`] type), so a new format is
/// one line here plus its codec's file (and, for the GPU, its WGSL decoder). (`$d` is a `$`, passed in so that
/// the generated `dispatch!` can have metavariables of its own.)
macro_rules! formats {
    ($d:tt $($(#[$doc:meta])* $variant:ident => $codec:ident,)*) => {
        /// The packed formats edo stores tables in. More will come: match with a `_` arm.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Format {
            $($(#[$doc])* $variant,)*
        }

        impl Format {
            /// Every format, in the order tables and reports list them.
            pub const ALL: [Format; [$(Format::$variant),*].len()] = [$(Format::$variant),*];
        }

        /// Calls a generic expression with the [`Codec`] type of a runtime [`Format`].
        macro_rules! dispatch {
            ($d format:expr, $d c:ident => $d body:expr) => {
                match $d format {
                    $($crate::format::Format::$variant => {
                        type $d c = $crate::format::$codec;
                        $d body
                    })*
                }
            };
        }
    };
}

formats! { $
    /// Plain `f32`, 4 bytes per value: the reference the others are measured against.
    F32 => F32,
    /// IEEE half precision, two values per word, round to nearest even.
    F16 => F16,
    /// 8-bit codes with an `f32` scale and bias per row (FBGEMM fused 8-bit row-wise).
    Int8 => Int8,
    /// 4-bit codes with an `f16` scale and bias per row (FBGEMM fused 4-bit row-wise).
    Int4 => Int4,
    /// One sign bit per value, `numpy.packbits` order; decodes to ±1.
    Binary => Binary,
    /// One sign bit per value plus an `f32` per-row scale (mean |x|); decodes to ±scale.
    BinaryScaled => BinaryScaled,
    /// ggml `Q8_0`: 8-bit codes with an fp16 scale per block of 32 values (llama.cpp, GGUF).
    Q8_0 => Q8_0,
    /// ggml `Q4_0`: 4-bit codes with an fp16 scale per block of 32 values.
    Q4_0 => Q4_0,
    /// ggml `Q4_1`: 4-bit codes with an fp16 scale and minimum per block of 32 values.
    Q4_1 => Q4_1,
    /// ggml `Q5_0`: 5-bit codes with an fp16 scale per block of 32 values.
    Q5_0 => Q5_0,
    /// ggml `Q5_1`: 5-bit codes with an fp16 scale and minimum per block of 32 values.
    Q5_1 => Q5_1,
    /// 4-bit codes with an fp16 scale and bias per 32 values.
    Int4G32 => Int4G32,
    /// 4-bit codes with an fp16 scale and bias per 64 values (0.5625 bytes per value).
    Int4G64 => Int4G64,
    /// 4-bit codes with an fp16 scale and bias per 128 values.
    Int4G128 => Int4G128,
    /// 8-bit codes with an fp16 scale and bias per 32 values.
    Int8G32 => Int8G32,
    /// 8-bit codes with an fp16 scale and bias per 64 values.
    Int8G64 => Int8G64,
    /// 8-bit codes with an fp16 scale and bias per 128 values.
    Int8G128 => Int8G128,
    /// ggml `Q4_K`: 4-bit codes in super-blocks of 256 values, an fp16 scale and minimum per
    /// super-block and a 6-bit scale and minimum per 32 values (4.5 bits per value).
    Q4K => Q4K,
    /// ggml `Q6_K`: 6-bit codes in super-blocks of 256 values, an fp16 scale per super-block and
    /// a signed 8-bit scale per 16 values (6.5625 bits per value).
    Q6K => Q6K,
    /// OCP FP8 E4M3 (ml_dtypes `float8_e4m3fn`, largest 448) with an f32 scale per row.
    Fp8E4M3 => Fp8E4M3,
    /// OCP FP8 E5M2 (ml_dtypes `float8_e5m2`, largest 57344) with an f32 scale per row.
    Fp8E5M2 => Fp8E5M2,
    /// 4-bit codes with an fp16 scale and an integer zero point per 32 values (ONNX Runtime's
    /// `GatherBlockQuantized`).
    Int4Zp32 => Int4Zp32,
    /// 4-bit codes with an fp16 scale and an integer zero point per 64 values.
    Int4Zp64 => Int4Zp64,
    /// 4-bit codes with an fp16 scale and an integer zero point per 128 values.
    Int4Zp128 => Int4Zp128,
    /// 8-bit codes with an fp16 scale and an integer zero point per 32 values.
    Int8Zp32 => Int8Zp32,
    /// 8-bit codes with an fp16 scale and an integer zero point per 64 values.
    Int8Zp64 => Int8Zp64,
    /// 8-bit codes with an fp16 scale and an integer zero point per 128 values.
    Int8Zp128 => Int8Zp128,
}

impl Format {
    /// Runs `visitor` with this format's [`Codec`] type.
    pub fn visit<V: CodecVisitor>(self, visitor: V) -> V::Output {
        dispatch!(self, C => visitor.visit::<C>())
    }

    /// The short name used by the CLI and reports.
    pub fn name(self) -> &'static str {
        dispatch!(self, C => C::NAME)
    }

    /// Parses [`Format::name`] (case-insensitive; `f32`, `f16`, `bin` and other aliases too).
    pub fn from_name(name: &str) -> Option<Format> {
        let name = name.to_ascii_lowercase();
        Format::ALL.into_iter().find(|&f| f.name() == name || dispatch!(f, C => C::ALIASES).contains(&name.as_str()))
    }

    /// Bits per code.
    pub fn code_bits(self) -> usize {
        dispatch!(self, C => C::CODE_BITS)
    }

    /// Values per group sharing parameters; 0 when the whole row shares them.
    pub fn group(self) -> usize {
        dispatch!(self, C => C::GROUP)
    }

    /// ggml's type id (`GGML_TYPE_*`) of the same values in the same external layout, if any.
    pub fn ggml_type(self) -> Option<u32> {
        dispatch!(self, C => C::GGML_TYPE)
    }

    /// Whether [`PackedTable::quantize_min_error`] searches for this format's parameters (the
    /// group-wise `int4_g*` and `int8_g*`); for the others it quantises as
    /// [`PackedTable::quantize`].
    pub fn has_min_error_search(self) -> bool {
        dispatch!(self, C => C::MIN_ERROR_SEARCH)
    }

    /// Parameter words per row of `dim` values.
    pub fn param_words(self, dim: usize) -> usize {
        dispatch!(self, C => C::param_words(dim))
    }

    /// Code words per row of `dim` values.
    pub fn code_words(self, dim: usize) -> usize {
        dispatch!(self, C => C::code_words(dim))
    }

    /// Words per packed row: codes plus parameters (saturating at `usize::MAX` for a dim no
    /// table has, so that a check against real sizes fails instead of wrapping).
    pub fn row_words(self, dim: usize) -> usize {
        self.code_words(dim).saturating_add(self.param_words(dim))
    }

    /// Bytes per packed row as stored (word-padded).
    pub fn row_bytes(self, dim: usize) -> usize {
        4 * self.row_words(dim)
    }

    /// Bytes per row without word padding: the size of the format's external layout (`dim ·
    /// bits / 8` rounded up to a byte, plus the parameters; whole blocks for ggml's formats).
    pub fn unpadded_row_bytes(self, dim: usize) -> usize {
        dispatch!(self, C => code_bytes::<C>(dim).saturating_add(C::groups(dim).saturating_mul(C::PARAM_BITS).div_ceil(8)))
    }

    /// Bytes of codes in a row, without the word padding: `dim · bits / 8` rounded up (whole
    /// blocks for ggml's formats).
    pub fn code_bytes(self, dim: usize) -> usize {
        dispatch!(self, C => code_bytes::<C>(dim))
    }

    /// Writes packed row `words` of `dim` values in the format's external layout (`out` holds
    /// [`Format::unpadded_row_bytes`] bytes).
    pub fn write_external(self, words: &[u32], dim: usize, out: &mut [u8]) {
        dispatch!(self, C => C::write_external(words, dim, out))
    }

    /// Reads a row of `dim` values from the external layout into zeroed `out`.
    pub fn read_external(self, src: &[u8], dim: usize, out: &mut [u32]) {
        dispatch!(self, C => C::read_external(src, dim, out))
    }

    /// The documented bound on `|x − x̂|` for each value of `row` after a round trip through
    /// this format (see each format's module docs). `row` must be finite.
    pub fn error_bounds(self, row: &[f32]) -> Vec<f32> {
        dispatch!(self, C => C::error_bounds(row))
    }

    fn encode_row(self, row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        dispatch!(self, C => C::encode_row(row, out))
    }

    fn encode_row_min_error(self, row: &[f32], out: &mut [u32]) -> Result<(), EncodeError> {
        dispatch!(self, C => C::encode_row_min_error(row, out))
    }

    /// Decodes one packed row ([`Format::row_words`] words) into `out` (`dim` values).
    pub fn decode_row(self, words: &[u32], out: &mut [f32]) {
        dispatch!(self, C => C::decode_row(words, out))
    }

    /// [`Format::decode_row`] on the instruction set `level` (or the best below it this CPU
    /// has): to compare levels, or to measure what one gains.
    pub fn decode_row_at(self, level: crate::cpu::Simd, words: &[u32], out: &mut [f32]) {
        dispatch!(self, C => crate::simd::run_at(level, DecodeRow::<C>(PhantomData, words, out)))
    }

    /// [`Format::decode_row`] one value at a time ([`Codec::decode_row_reference`]): the scalar
    /// oracle the vectorised decoders are tested against.
    pub fn decode_row_reference(self, words: &[u32], out: &mut [f32]) {
        dispatch!(self, C => C::decode_row_reference(words, out))
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

pub(crate) use dispatch;

/// A computation generic over a format's [`Codec`], for crates above this one: [`Format::visit`]
/// runs it with the codec type of a runtime format (what `dispatch!` does inside this crate).
pub trait CodecVisitor {
    /// What the computation returns.
    type Output;
    /// Runs it for codec `C`.
    fn visit<C: Codec>(self) -> Self::Output;
}

/// Checks a row alignment for [`PackedTable::with_row_alignment`]: a power of two from 4 to 256
/// bytes, else [`Error::Unsupported`].
pub fn check_row_alignment(bytes: usize) -> Result<(), Error> {
    if !(NO_ROW_ALIGNMENT..=256).contains(&bytes) || !bytes.is_power_of_two() {
        return Err(Error::Unsupported(crate::Unsupported::RowAlignment { bytes }));
    }
    Ok(())
}

/// `row_words` words padded to a multiple of `row_alignment` bytes (a power of two from 4).
pub fn aligned_row_words(row_words: usize, row_alignment: usize) -> usize {
    row_words.next_multiple_of(row_alignment / 4)
}

/// Checks that `len` values are `rows × dim` with `dim ≥ 1`.
pub fn check_shape(len: usize, rows: usize, dim: usize) -> Result<(), Error> {
    if dim == 0 {
        return Err(Error::ZeroDim);
    }
    let expected = rows.checked_mul(dim).ok_or(Error::LimitExceeded { what: "rows × dim", requested: u64::MAX, max: usize::MAX as u64 })?;
    if len != expected {
        return Err(Error::ShapeMismatch { what: "table values (rows × dim)", expected, actual: len });
    }
    Ok(())
}

/// Minimum and maximum of a row, or the first non-finite value.
pub(crate) fn finite_min_max(row: &[f32]) -> Result<(f32, f32), EncodeError> {
    // Sixteen independent lanes of compare-and-select, which the compiler turns into vector
    // min/max (`f32::min` is NaN-aware and stays scalar); NaN and infinities are caught by the
    // separate finiteness flag, so the selects may ignore them.
    const LANES: usize = 16;
    let mut lo = [f32::INFINITY; LANES];
    let mut hi = [f32::NEG_INFINITY; LANES];
    let mut finite = [true; LANES];
    let mut step = |j: usize, x: f32| {
        lo[j] = if x < lo[j] { x } else { lo[j] };
        hi[j] = if x > hi[j] { x } else { hi[j] };
        finite[j] &= x.abs() < f32::INFINITY;
    };
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (j, &x) in chunk.iter().enumerate() {
            step(j, x);
        }
    }
    for (j, &x) in chunks.remainder().iter().enumerate() {
        step(j, x);
    }
    if !finite.iter().all(|&f| f) || row.is_empty() {
        let col = row.iter().position(|x| !x.is_finite()).unwrap_or(0);
        return Err(EncodeError::NonFinite { col, value: row.get(col).copied().unwrap_or(f32::NAN) });
    }
    let lo = lo.iter().fold(f32::INFINITY, |a, &b| if b < a { b } else { a });
    let hi = hi.iter().fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a });
    Ok((lo, hi))
}

/// `x.round_ties_even()` for `|x| < 2²²`, in two additions: adding 1.5 · 2²³ moves `x` into the
/// binade whose spacing is 1, where IEEE round-to-nearest-even does the rounding. The quantisers'
/// codes need this; `round_ties_even` itself is a libm call on x86-64's baseline (no SSE4.1), which
/// cannot be vectorised.
#[inline(always)]
pub(crate) fn round_ties_even_small(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (x + MAGIC) - MAGIC
}

/// The first non-finite value of a row.
pub(crate) fn check_finite(row: &[f32]) -> Result<(), EncodeError> {
    // One branch-free pass the compiler vectorises (a search that stops at the first hit does
    // not vectorise): a value's magnitude bits plus the smallest normal's carry into bit 31 only
    // from an infinity or a NaN. The first such value is looked for only when there is one.
    let any_non_finite = row.iter().fold(0u32, |acc, x| acc | ((x.to_bits() & 0x7fff_ffff) + 0x0080_0000)) >> 31 != 0;
    if !any_non_finite {
        return Ok(());
    }
    match row.iter().position(|x| !x.is_finite()) {
        Some(col) => Err(EncodeError::NonFinite { col, value: row[col] }),
        None => Ok(()),
    }
}

/// Little-endian u32 words of `bytes` (a multiple of 4 long): packed rows as files store them.
pub fn words_le(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The branch-free test agrees with `is_finite` on every class of value, in every place of a
    /// row, and names the first non-finite one.
    #[test]
    fn check_finite_finds_the_first_infinity_or_nan() {
        let finite = [0.0, -0.0, 1.0, -2.5, f32::MAX, f32::MIN, f32::MIN_POSITIVE, f32::from_bits(1), f32::from_bits(0x807f_ffff)];
        let bad = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::from_bits(0x7f80_0001), f32::from_bits(0x7fff_ffff), f32::from_bits(0xffff_ffff)];
        let row: Vec<f32> = (0..37).map(|i| finite[i % finite.len()]).collect();
        assert_eq!(check_finite(&row), Ok(()));
        for &b in &bad {
            for col in [0, 5, 31, 36] {
                // The value at `col`, and an infinity after it: `col` is named.
                let mut with = row.clone();
                with[col] = b;
                if col < 36 {
                    with[36] = f32::INFINITY;
                }
                match check_finite(&with) {
                    Err(EncodeError::NonFinite { col: c, value }) => assert_eq!((c, value.to_bits()), (col, b.to_bits()), "{b:?} at {col}"),
                    other => panic!("{b:?} at {col}: {other:?}"),
                }
            }
        }
    }

    /// `formats!` makes the enum, `ALL` and `dispatch!` from one list, so no variant can be missing
    /// from `ALL` (nor from `dispatch!`'s match); this checks that each is listed once, with a name
    /// of its own, and that every name and alias finds its format.
    #[test]
    fn every_format_is_in_all_once_and_found_by_its_names() {
        let position = |f: Format| -> usize { Format::ALL.iter().position(|&g| g == f).expect("in ALL") };
        for f in Format::ALL {
            assert_eq!(Format::from_name(f.name()), Some(f), "{f}");
            assert_eq!(Format::from_name(&f.name().to_uppercase()), Some(f), "{f}, upper case");
            for alias in dispatch!(f, C => C::ALIASES) {
                assert_eq!(Format::from_name(alias), Some(f), "{f}: alias {alias}");
            }
            assert_eq!(position(f), Format::ALL.iter().position(|&g| g.name() == f.name()).unwrap(), "{f}: one name each");
        }
        let mut names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Format::ALL.len(), "every format once, each with a name of its own");
    }

    /// Tables edo quantises or generates start on a cache line and hold exactly their words.
    #[test]
    fn tables_built_in_memory_start_on_a_cache_line() {
        let aligned = |t: &PackedTable| (t.words().as_ptr() as usize).is_multiple_of(64);
        for format in Format::ALL {
            for rows in [0, 1, 3, 1000] {
                let t = PackedTable::quantize(format, &vec![0.5; rows * 7], rows, 7).unwrap();
                assert!(aligned(&t), "{format}, {rows} rows");
                assert_eq!(t.words().len(), rows * format.row_words(7));
                let mut again = t.clone();
                assert!(aligned(&again), "{format}, {rows} rows, cloned");
                if rows > 0 {
                    again.update_rows(&[0], &[0.25; 7]).unwrap();
                    assert_eq!(again.words().len(), t.words().len());
                }
            }
        }
        assert!(aligned(&crate::synth::embedding_packed(33, 5, 1).unwrap()));
    }

    /// Large tables built in memory ask for huge pages (`alloc::advise_huge_pages`), and so do
    /// their copies.
    #[cfg(target_os = "linux")]
    #[test]
    fn large_tables_and_their_copies_ask_for_huge_pages() {
        let t = PackedTable::quantize(Format::F32, &vec![0.5; 4 << 20], 1 << 15, 128).unwrap();
        let middle = |t: &PackedTable| t.words().as_ptr() as usize + (8 << 20);
        for (what, table) in [("built", &t), ("cloned", &t.clone())] {
            match crate::alloc::tests::huge_pages_advised(middle(table)) {
                Some(advised) => assert!(advised, "{what}"),
                None => eprintln!("SKIPPED: this kernel or sandbox does not list huge-page advice"),
            }
        }
    }

    /// Every format's `pool_row` is `decode_row` and then `pool_values`, bit for bit.
    #[test]
    fn pool_row_equals_decode_then_pool() {
        let mut rng = crate::synth::Rng::new(12);
        for format in Format::ALL {
            for dim in [1, 3, 7, 64, 100] {
                let data: Vec<f32> = (0..dim).map(|_| rng.next_f32() * 4.0 - 2.0).collect();
                let table = PackedTable::quantize(format, &data, 1, dim).unwrap();
                let acc0: Vec<f32> = (0..dim).map(|_| rng.next_f32() - 0.5).collect();
                for (w, max) in [(1.0, false), (0.3, false), (-2.5, false), (1.0, true)] {
                    let mut decoded = vec![0f32; dim];
                    table.decode_row_into(0, &mut decoded);
                    let mut want = acc0.clone();
                    pool_values(&mut want, decoded.into_iter(), w, max);
                    let mut got = acc0.clone();
                    dispatch!(format, C => C::pool_row(crate::simd::Scalar, table.row(0), w, max, &mut got, &mut vec![f32::NAN; dim]));
                    assert_eq!(
                        got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        "{format} dim {dim} w {w} max {max}"
                    );
                }
            }
        }
    }

    /// Every format's rows go to their external layout and back word for word, at dims that end
    /// in a short group, block or super-block; a short ggml block's external bytes are a whole
    /// block whose missing values are zero codes.
    #[test]
    fn external_layout_round_trips_at_every_dim() {
        let mut rng = crate::synth::Rng::new(13);
        for format in Format::ALL {
            for dim in [1, 7, 13, 40, 100, 257, 300] {
                let data: Vec<f32> = (0..3 * dim).map(|_| rng.next_f32() * 4.0 - 2.0).collect();
                let table = PackedTable::quantize(format, &data, 3, dim).unwrap();
                let mut external = vec![0u8; format.unpadded_row_bytes(dim)];
                for r in 0..3 {
                    format.write_external(table.row(r), dim, &mut external);
                    let mut back = vec![0u32; format.row_words(dim)];
                    format.read_external(&external, dim, &mut back);
                    assert_eq!(back, table.row(r), "{format} dim {dim} row {r}");
                }
            }
        }
        // q5_0's short block of 13 values in GGUF's 22 bytes (d, fifth bits, 16 bytes of value j
        // and j + 16): the 19 values past them are code 0, nibbles and fifth bits.
        let data: Vec<f32> = (0..13).map(|i| i as f32 - 6.5).collect();
        let table = PackedTable::quantize(Format::Q5_0, &data, 1, 13).unwrap();
        let mut external = vec![0u8; 22];
        Format::Q5_0.write_external(table.row(0), 13, &mut external);
        let high = u32::from_le_bytes(external[2..6].try_into().unwrap());
        assert_eq!(high >> 13, 0, "no fifth bits past the values");
        assert_ne!(high, 0, "the values' fifth bits are there");
        let qs = &external[6..];
        assert!(qs[13..].iter().all(|&b| b == 0) && qs.iter().all(|&b| b >> 4 == 0), "{qs:?}");
        assert!(qs[..13].iter().any(|&b| b != 0));
    }

    #[test]
    fn round_ties_even_small_matches_std() {
        // Every half and quarter step over the code ranges (ties go to even), plus random values
        // across the whole valid range, both signs.
        let mut rng = crate::synth::Rng::new(11);
        let steps = (-1200..1200).map(|i| i as f32 * 0.25);
        let random = (0..100_000).map(|_| (rng.next_f32() * 2.0 - 1.0) * 4_194_303.0);
        for x in steps.chain(random).chain([0.0, -0.0, 0.5, 1.5, 2.5, 254.5, 255.5, 4_194_303.5, -4_194_303.5]) {
            assert_eq!(round_ties_even_small(x), x.round_ties_even(), "{x}");
        }
    }
}
