// pack_f16: dense f32 rows (n_rows × dim) → f16 rows (n_rows × ⌈dim / 2⌉ words, two values a
// word, the first in the low half, the last word's high half 0 for an odd dim), rounded to nearest
// even (f16_common.wgsl). One invocation per output word. The f16 output of lookups that have no
// f16 driver of their own (bags, pruned, mixed and cached tables).
// Bindings: 0 params (uniform), 1 rows (f32), 2 unused (the gather layout's second input),
// 3 out (u32).

struct PackParams {
    n_rows: u32,
    dim: u32,
    _pad0: u32,
    _pad1: u32,
}

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> params: PackParams;
@group(0) @binding(1) var<storage, read> rows: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let words = (params.dim + 1u) / 2u;
    let g = gid.y * nwg.x * WG + gid.x;
    if (g >= params.n_rows * words) {
        return;
    }
    let r = g / words;
    let c = 2u * (g - r * words);
    let at = r * params.dim + c;
    var hi = 0.0;
    if (c + 1u < params.dim) {
        hi = rows[at + 1u];
    }
    out[g] = pack_f16(rows[at], hi);
}
