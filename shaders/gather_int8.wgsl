// gather_int8: out[i, :] = code * scale + bias for an INT8 row-wise table shard.
// Bindings: 0 params (uniform GatherParams), 1 ids (u32), 2 shard (per row: code_words words of
// four u8 codes, element 4k+j in byte j of word k, then f32 scale, f32 bias; row_words =
// code_words + 2), 3 out (f32, n_ids × dim).
// edo's scales have 16 significant bits, so code * scale is exact and the add is the one rounding:
// the result is the CPU oracle's bit for bit whether or not the driver fuses the multiply-add.

override WG_X: u32 = 32u;
override WG_Y: u32 = 8u;

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
    let scale = bitcast<f32>(shard[base + params.code_words]);
    let bias = bitcast<f32>(shard[base + params.code_words + 1u]);
    for (var c = lid.x; c < params.dim; c += WG_X) {
        let q = f32(extractBits(shard[base + c / 4u], 8u * (c & 3u), 8u));
        out[o + c] = q * scale + bias;
    }
}
