// gather_int4: out[i, :] = code * scale + bias for an INT4 row-wise table shard.
// Bindings: 0 params (uniform GatherParams), 1 ids (u32), 2 shard (per row: code_words words of
// eight 4-bit codes, element 8k+j at bits 4j..4j+3 of word k — FBGEMM's low-nibble-first order —
// then one word: fp16 scale in the low half, fp16 bias in the high half; row_words =
// code_words + 1), 3 out (f32, n_ids × dim).
// A 4-bit code times an fp16 scale is exact in f32, so fused or not the result is the oracle's.

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
    let sb = unpack2x16float(shard[base + params.code_words]);
    for (var c = lid.x; c < params.dim; c += WG_X) {
        let q = f32(extractBits(shard[base + c / 8u], 4u * (c & 7u), 4u));
        out[o + c] = q * sb.x + sb.y;
    }
}
