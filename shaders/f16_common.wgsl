// f32 → f16 bits, rounding to nearest even, for kernels that write f16 rows (two per u32, the
// first in the low half). WGSL's pack2x16float leaves the rounding to the implementation; this is
// IEEE 754's, step for step the `half` crate's software conversion, so the GPU's f16 output
// equals the CPU path's bit for bit: overflow to ±inf, subnormals, NaN kept quiet.

fn f16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let sign = (b >> 16u) & 0x8000u;
    let exp = b & 0x7f800000u;
    let man = b & 0x007fffffu;
    if (exp == 0x7f800000u) {
        // ±inf, or NaN (kept a NaN, quiet).
        return sign | 0x7c00u | select(0u, 0x0200u, man != 0u) | (man >> 13u);
    }
    let half_exp = i32(exp >> 23u) - 127 + 15;
    if (half_exp >= 0x1f) {
        return sign | 0x7c00u;
    }
    if (half_exp <= 0) {
        // A subnormal f16 (or zero): the mantissa with its leading one, shifted into place.
        if (14 - half_exp > 24) {
            return sign;
        }
        let m = man | 0x00800000u;
        var half_man = m >> u32(14 - half_exp);
        let round_bit = 1u << u32(13 - half_exp);
        if ((m & round_bit) != 0u && (m & (3u * round_bit - 1u)) != 0u) {
            half_man += 1u;
        }
        return sign | half_man;
    }
    let bits = sign | (u32(half_exp) << 10u) | (man >> 13u);
    // Round half to even on the 13 bits dropped (a carry into the exponent is right, up to inf).
    if ((man & 0x1000u) != 0u && (man & 0x2fffu) != 0u) {
        return bits + 1u;
    }
    return bits;
}

// Two values as one word of f16 rows: `lo` in bits 0..16, `hi` in 16..32.
fn pack_f16(lo: f32, hi: f32) -> u32 {
    return f16_bits(lo) | (f16_bits(hi) << 16u);
}
