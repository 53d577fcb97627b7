// qr: quotient-remainder embedding (DLRM): id → quotient row id / m of one table and remainder row
// id mod m of another, combined by product, sum or concatenation. Assembled after
// gather_common.wgsl (resolve_row, id_index), gather_shard.wgsl (the shard, word()) and
// decode_<format>.wgsl.
// Two stages, each a dispatch per shard of its table: stage 0 writes the quotient rows, stage 1
// combines the remainder rows into them (out *= r, out += r, or the second half for concat), so
// any number of shards works and each value is one f32 operation, as on the CPU.
//
// Bindings: 0 params (uniform QrParams), 1 ids (u32 pairs: low, high word of each 64-bit id),
// 2 shard (packed rows of the stage's table, rows [shard_first, shard_first + shard_rows)),
// 3 out (f32, n_ids × out_stride).

struct QrParams {
    n_ids: u32,
    m: u32,            // rows of the remainder table
    stage: u32,        // 0: quotient, 1: remainder
    combine: u32,      // 0 mult, 1 add, 2 concat
    policy: u32,       // for quotients past the table (Error is checked on the host)
    dim: u32,
    out_stride: u32,   // dim, or 2·dim for concat
    rows: u32,         // rows of the stage's table
    row_words: u32,
    code_words: u32,
    shard_first: u32,
    shard_rows: u32,
}

override WG_X: u32 = 32u;
override WG_Y: u32 = 8u;

@group(0) @binding(0) var<uniform> params: QrParams;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// (id / m, id mod m) of the 64-bit id hi·2³² + lo, with the quotient saturated to 0xffffffff
// when it does not fit 32 bits. Long division, one bit at a time: WGSL has no 64-bit integers.
fn qr_split(lo: u32, hi: u32, m: u32) -> vec2<u32> {
    let q_hi = hi / m;
    var rem = hi % m;
    var q_lo = 0u;
    for (var b = 31i; b >= 0i; b--) {
        // rem < m ≤ 2³² − 1; doubling it may carry out of 32 bits, in which case it is ≥ m.
        let carry = rem >> 31u;
        rem = (rem << 1u) | ((lo >> u32(b)) & 1u);
        if (carry == 1u || rem >= m) {
            rem = rem - m;
            q_lo = q_lo | (1u << u32(b));
        }
    }
    return vec2<u32>(select(0xffffffffu, q_lo, q_hi == 0u), rem);
}

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
    let qr = qr_split(ids[2u * i], ids[2u * i + 1u], params.m);
    let wanted = select(qr.x, qr.y, params.stage == 1u);
    let row = resolve_row(wanted, params.rows, params.shard_first, params.shard_rows, params.policy);
    if (row == ROW_SKIP) {
        return;
    }
    let o = i * params.out_stride + select(0u, params.dim, params.stage == 1u && params.combine == 2u);
    var base = 0u;
    var rp: RowParams;
    if (row != ROW_ZERO) {
        base = row * params.row_words;
        rp = row_params(base, params.code_words);
    }
    for (var c = lid.x; c < params.dim; c += WG_X) {
        var v = 0.0;
        if (row != ROW_ZERO) {
            v = decode1(base, c, rp);
        }
        if (params.stage == 0u || params.combine == 2u) {
            out[o + c] = v;
        } else if (params.combine == 1u) {
            out[o + c] = out[o + c] + v;
        } else {
            out[o + c] = out[o + c] * v;
        }
    }
}
