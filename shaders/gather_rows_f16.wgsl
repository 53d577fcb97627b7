// gather_rows_f16: gather_rows writing f16 rows — two values per u32 word (the first in the low
// half), ⌈dim / 2⌉ words a row, the last word's high half 0 for an odd dim — rounded to nearest
// even (f16_common.wgsl), so half the bytes of an f32 gather are written. The decode_<format>.wgsl
// before it supplies row_params(base, code_words) and decode1(base, c, row_params).
// Bindings: as gather_rows, but 3 out (u32, n_ids × ⌈dim / 2⌉ words of f16 pairs).

override WG_X: u32 = 32u;
override WG_Y: u32 = 8u;

@group(0) @binding(3) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(WG_X, WG_Y)
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let ir = output_and_row(lid, wid, nwg);
    let i = ir.x;
    let row = ir.y;
    if (row == ROW_SKIP) {
        return;
    }
    let words = (params.dim + 1u) / 2u;
    let o = i * words;
    if (row == ROW_ZERO) {
        for (var k = lid.x; k < words; k += WG_X) {
            out[o + k] = 0u;
        }
        return;
    }
    let base = row * params.row_words;
    let rp = row_params(base, params.code_words);
    for (var k = lid.x; k < words; k += WG_X) {
        let c = 2u * k;
        var hi = 0.0;
        if (c + 1u < params.dim) {
            hi = decode1(base, c + 1u, rp);
        }
        out[o + k] = pack_f16(decode1(base, c, rp), hi);
    }
}
