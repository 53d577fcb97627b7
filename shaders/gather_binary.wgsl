// gather_binary: out[i, c] = bit ? +s : -s for a binary table shard, s = 1 or the row's scale.
// Bindings: 0 params (uniform GatherParams), 1 ids (u32), 2 shard (per row: code_words words of
// sign bits in numpy.packbits order — element 32k+j is bit 7 − (j mod 8) of byte j / 8 of word k —
// then, when SCALED, one f32 scale; row_words = code_words + SCALED), 3 out (f32, n_ids × dim).

override WG_X: u32 = 32u;
override WG_Y: u32 = 8u;
override SCALED: bool = false;

@group(0) @binding(0) var<uniform> params: GatherParams;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> shard: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG_X, WG_Y)
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let i = id_index(wid, nwg, lid, WG_Y);
    if (i >= params.n_ids) {
        return;
    }
    let row = resolve_row(ids[i], params.total_rows, params.shard_first, params.shard_rows, params.policy);
    if (row == ROW_SKIP) {
        return;
    }
    let o = i * params.dim;
    if (row == ROW_ZERO) {
        for (var c = lid.x; c < params.dim; c += WG_X) {
            out[o + c] = 0.0;
        }
        return;
    }
    let base = row * params.row_words;
    var s = 1.0;
    if (SCALED) {
        s = bitcast<f32>(shard[base + params.code_words]);
    }
    for (var c = lid.x; c < params.dim; c += WG_X) {
        let j = c & 31u;
        let bit = extractBits(shard[base + c / 32u], (j & 24u) + 7u - (j & 7u), 1u);
        out[o + c] = select(-s, s, bit == 1u);
    }
}
