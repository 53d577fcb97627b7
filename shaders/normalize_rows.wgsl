// normalize_rows: divides each row of `rows` (n_rows × dim f32, in place) by its L2 norm + 1e-32,
// as model2vec normalises sentence vectors; a zero row stays zero. One invocation per row: rows
// are few (texts of a batch) and short (a model's dim). The norm is summed in column order, as
// the CPU path sums it.
// Bindings: 0 params (uniform), 1 and 2 unused (the gather layout's inputs), 3 rows (f32, in place).

struct NormParams {
    n_rows: u32,
    dim: u32,
    _pad0: u32,
    _pad1: u32,
}

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> params: NormParams;
@group(0) @binding(3) var<storage, read_write> rows: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.y * nwg.x * WG + gid.x;
    if (r >= params.n_rows) {
        return;
    }
    let base = r * params.dim;
    var s = 0.0;
    for (var c = 0u; c < params.dim; c++) {
        let x = rows[base + c];
        s = s + x * x;
    }
    let norm = sqrt(s) + 1e-32;
    for (var c = 0u; c < params.dim; c++) {
        rows[base + c] = rows[base + c] / norm;
    }
}
