//! The CPU path: the same lookups as the GPU kernels, in plain Rust.
//!
//! It is the oracle the GPU is tested against and the fallback when there is no adapter, so it is
//! written to be fast as well as obviously right: one contiguous block of output rows per core,
//! and the format's decoder, eight values an operation, inlined into loops compiled once per
//! [`Simd`] level (on x86-64 SSE4.1 and AVX2 with F16C, picked at run time; NEON on aarch64;
//! SIMD128 in the browser and under WASI; portable arrays everywhere).

#[doc(hidden)]
pub mod bag;
mod gather;
mod pool;
pub mod search;

pub use crate::simd::Simd;
pub use bag::pool_rows;
pub use bag::{embedding_bag, embedding_bags, embedding_bags_into};
pub use gather::{gather, gather_into};
pub use pool::{normalize_rows, pool_text};

/// f32 values rounded to f16, to nearest even (`half`'s conversion; beyond f16's range ±inf):
/// how edo's f16 outputs round, on the CPU path and in `f16_common.wgsl` alike.
pub fn to_f16(values: &[f32]) -> Vec<half::f16> {
    values.iter().map(|&v| half::f16::from_f32(v)).collect()
}

/// `rows × dim` zeros for a lookup's output, allocated fallibly: an output beyond memory (a
/// page's ids times a large dim, say) is [`crate::Error::HostOutOfMemory`] naming `what`.
pub fn zeroed(rows: usize, dim: usize, what: &'static str) -> Result<Vec<f32>, crate::Error> {
    let bytes = (rows as u128 * dim as u128 * 4).min(u64::MAX as u128) as u64;
    let len = rows.checked_mul(dim).ok_or(crate::Error::HostOutOfMemory { what, bytes })?;
    crate::alloc::zeroed(len, what)
}

/// Rows to look ahead when prefetching: rows are scattered over tables much larger than the
/// caches, so a lookup asks for the row this many ids ahead, and the cache misses of several rows
/// overlap instead of coming one after another. The most a lookup looks ahead: see
/// [`prefetch_distance`].
pub(crate) const PREFETCH_DISTANCE: usize = 16;

/// Cache lines a lookup keeps in flight. A core tracks only so many misses at once (10 to 16
/// line-fill buffers on x86), and a prefetch that finds none free stalls the core until one is:
/// profiles of gathers that prefetched 16 rows of 3 to 9 lines ahead spent most of their time on
/// the prefetch instruction. Lookups of big rows look fewer rows ahead.
const PREFETCH_LINES: usize = 24;

/// How many rows ahead a lookup prefetches rows of `row_words` words: enough to keep about
/// [`PREFETCH_LINES`] lines in flight, between 2 and [`PREFETCH_DISTANCE`].
pub(crate) fn prefetch_distance(row_words: usize) -> usize {
    // A row straddles one more line than its length needs, on average.
    let lines = (4 * row_words).div_ceil(64) + 1;
    (PREFETCH_LINES / lines).clamp(2, PREFETCH_DISTANCE)
}

/// Hints the CPU to fetch the cache lines of `row`, every one it touches: rows are rarely aligned
/// to a line (an INT8 row of 128 values is 136 bytes), so the lines are counted from the row's
/// first line, not its first byte. x86-64 and aarch64 have prefetch instructions; WASM has none,
/// so in WASM (browsers, WASI) each line's first byte in `row` is read instead, which puts the
/// misses in flight together (measured under wasmtime and in Node: docs/edge.md, docs/browser.md).
/// A no-op elsewhere.
#[inline(always)]
#[doc(hidden)]
pub fn prefetch(row: &[u32]) {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "wasm32"))]
    {
        if row.is_empty() {
            return;
        }
        let start = row.as_ptr().cast::<i8>();
        let skew = start as usize % 64;
        let lines = (skew + 4 * row.len()).div_ceil(64);
        for line in 0..lines {
            // The line's start (`wrapping_*`: the first may start before the row).
            let at = start.wrapping_sub(skew).wrapping_add(64 * line);
            // SAFETY: a prefetch is a hint with no memory effect, valid at any address.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at)
            };
            // SAFETY: as above; PRFM (aarch64's `_prefetch` is not stable Rust yet).
            #[cfg(target_arch = "aarch64")]
            unsafe {
                std::arch::asm!("prfm pldl1keep, [{at}]", at = in(reg) at, options(nostack, preserves_flags, readonly))
            };
            // SAFETY: the byte read is in `row` (not empty): the row's first byte for the first
            // line, and for line k ≥ 1 the line's start, below the row's end since k < lines.
            // `read_volatile` keeps the unused read from being removed.
            #[cfg(target_arch = "wasm32")]
            unsafe {
                std::ptr::read_volatile(if line == 0 { start } else { at })
            };
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "wasm32")))]
    let _ = row;
}

#[cfg(test)]
mod tests {
    use super::Simd;
    use crate::format::{dispatch, Codec, Format, PackedTable};
    use crate::simd::{run_at, Kernel, Lanes};

    /// A row's pooling into an accumulator as a kernel, so that it runs compiled for a chosen
    /// level.
    struct Pool<'a>(Format, &'a [u32], f32, bool, &'a mut [f32], &'a mut [f32]);

    impl Kernel for Pool<'_> {
        type Output = ();
        #[inline(always)]
        fn run<L: Lanes>(self, l: L) {
            dispatch!(self.0, C => C::pool_row(l, self.1, self.2, self.3, self.4, self.5))
        }
    }

    /// A row's octets, each decoded on its own ([`Codec::octet`]), stored in order (the row has
    /// `.3` values; whole octets only are stored).
    struct Octets<'a>(Format, &'a [u32], &'a mut [f32], usize);

    impl Kernel for Octets<'_> {
        type Output = bool;
        #[inline(always)]
        fn run<L: Lanes>(self, l: L) -> bool {
            dispatch!(self.0, C => {
                if !C::OCTETS {
                    return false;
                }
                for (k, o) in self.2.as_chunks_mut::<8>().0.iter_mut().enumerate() {
                    l.store(C::octet(l, self.1, k, self.3), o);
                }
                true
            })
        }
    }

    /// Equal bits, or both NaN: a NaN's payload is not part of any format's contract (an
    /// operation with two NaN operands may keep either, and a compiler may swap a product's).
    fn same(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
    }

    /// Every format's decoder, compiled for every level this CPU has, equals the scalar
    /// reference bit for bit — on quantised rows and on rows of random words (every code and
    /// parameter pattern, specials included) — into outputs pre-filled with a sentinel, at widths
    /// that are and are not multiples of the formats' groups; and so does `pool_row`.
    #[test]
    fn decoders_equal_the_reference_on_every_level() {
        let levels = Simd::supported();
        eprintln!("levels: {levels:?}");
        let mut rng = crate::synth::Rng::new(36);
        for format in Format::ALL {
            for dim in [1, 7, 24, 40, 56, 128, 257, 384, 520] {
                let rows = 6;
                let data: Vec<f32> = (0..rows * dim).map(|_| rng.normal() * 3.0).collect();
                let quantized = PackedTable::quantize(format, &data, rows, dim).unwrap();
                let random: Vec<u32> = (0..rows * format.row_words(dim)).map(|_| rng.next_u32()).collect();
                let random = PackedTable::from_words(format, rows, dim, random).unwrap();
                for (kind, table) in [("quantized", &quantized), ("random words", &random)] {
                    for r in 0..rows {
                        let words = table.row(r);
                        let mut want = vec![f32::from_bits(0x7fa5_a5a5); dim];
                        format.decode_row_reference(words, &mut want);
                        assert!(want.iter().all(|x| x.to_bits() != 0x7fa5_a5a5), "{format} {dim}: the reference wrote every value");
                        for &level in &levels {
                            let mut got = vec![f32::from_bits(0x7fa5_a5a5); dim];
                            format.decode_row_at(level, words, &mut got);
                            assert!(
                                same(&got, &want),
                                "{format} dim {dim} {kind} row {r} at {}: {:?} vs {:?}",
                                level.name(),
                                &got[..dim.min(8)],
                                &want[..dim.min(8)]
                            );
                            // The octets the bags decode one at a time (formats that have them).
                            let mut octets = vec![f32::from_bits(0x7fa5_a5a5); dim / 8 * 8];
                            let has_octets = run_at(level, Octets(format, words, &mut octets, dim));
                            let octet_formats = [Format::F32, Format::F16, Format::Int8, Format::Int4, Format::Binary, Format::BinaryScaled];
                            let name = format.name();
                            let grouped = (name.contains("_g") || name.contains("_zp")) && !name.ends_with("32");
                            assert_eq!(has_octets, octet_formats.contains(&format) || grouped, "{format}");
                            if has_octets {
                                assert!(same(&octets, &want[..octets.len()]), "{format} dim {dim} {kind} row {r}: octets at {}", level.name());
                            }
                            for (w, max) in [(1.0, false), (-0.3, false), (1.0, true)] {
                                let acc0: Vec<f32> = (0..dim).map(|i| i as f32 * 0.125 - 1.0).collect();
                                let mut pooled = acc0.clone();
                                crate::format::pool_values(&mut pooled, want.iter().copied(), w, max);
                                let mut got = acc0.clone();
                                run_at(level, Pool(format, words, w, max, &mut got, &mut vec![f32::NAN; dim]));
                                assert!(same(&got, &pooled), "{format} dim {dim} {kind} row {r} pooled w {w} max {max} at {}", level.name());
                            }
                        }
                    }
                }
            }
        }
    }

    /// FP8's decoder takes a shorter path for rows with no special code (e4m3's NaN, e5m2's
    /// infinities and NaNs): rows of every ordinary code, with one special code planted at each
    /// place or none, under scales whose products are normal or subnormal, and scales whose
    /// rescale overflows (300 for e4m3's, 10³⁰ for both), equal the reference on every level.
    #[test]
    fn fp8_rows_with_and_without_special_codes_equal_the_reference_on_every_level() {
        for format in [Format::Fp8E4M3, Format::Fp8E5M2] {
            let special = |c: u8| if format == Format::Fp8E5M2 { c & 0x7C == 0x7C } else { c & 0x7F == 0x7F };
            let ordinary: Vec<u8> = (0..=255u8).filter(|&c| !special(c)).collect();
            let specials: Vec<u8> = (0..=255u8).filter(|&c| special(c)).collect();
            for dim in [ordinary.len(), 40, 13] {
                for scale in [1.0f32, 0.37, 3.1e-36, 1e-42, 2.5e-3, 300.0, 1e30] {
                    for plant in std::iter::once(None).chain((0..dim).step_by(5).map(Some)) {
                        let mut codes: Vec<u8> = (0..dim).map(|i| ordinary[(7 * i) % ordinary.len()]).collect();
                        if let Some(i) = plant {
                            codes[i] = specials[i % specials.len()];
                        }
                        codes.resize(4 * dim.div_ceil(4), 0);
                        let mut words: Vec<u32> = codes.chunks(4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).collect();
                        words.push(scale.to_bits());
                        let mut want = vec![f32::from_bits(0x7fa5_a5a5); dim];
                        format.decode_row_reference(&words, &mut want);
                        for level in Simd::supported() {
                            let mut got = vec![f32::from_bits(0x7fa5_a5a5); dim];
                            format.decode_row_at(level, &words, &mut got);
                            assert!(same(&got, &want), "{format} dim {dim} scale {scale} special at {plant:?} on {}", level.name());
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn outputs_past_usize_are_errors() {
        assert_eq!(super::zeroed(3, 5, "x").unwrap(), vec![0.0; 15]);
        assert!(matches!(super::zeroed(usize::MAX, 2, "x"), Err(crate::Error::HostOutOfMemory { what: "x", .. })));
    }
}
