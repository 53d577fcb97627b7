// hash_ids: raw 64-bit ids → the rows they read in hashed tables (the hashing trick).
// Assembled after hash_common.wgsl. For id j of table t (ids of table t are [id_start, id_end)):
// if the id is one of the table's hot ids (binary search of its sorted hot segment), it reads
// its own row, and the other k − 1 slots get SKIP; else slot s reads bucket
// murmur3(id, seed_s) mod buckets. Slots go to out[out_base + (j − id_start)·k + s]; a bag kernel
// then sums each id's k slots (SKIP is out of range for every table and reads as nothing).
//
// Bindings: 0 params (uniform: n_ids, n_tables), 1 tables (HashMeta per table), 2 ids (u32 pairs:
// low word, high word), 3 hot (vec4<u32> per hot id: low, high, row, 0; sorted by id within each
// table's segment), 4 out (u32 row indices).

struct HashParams {
    n_ids: u32,
    n_tables: u32,
    _pad0: u32,
    _pad1: u32,
}

struct HashMeta {
    id_start: u32,
    id_end: u32,
    out_base: u32,
    k: u32,
    buckets: u32,
    hot_start: u32,
    hot_len: u32,
    _pad: u32,
    seeds: array<vec4<u32>, 2>,
}

const SKIP: u32 = 0xffffffffu;

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> params: HashParams;
@group(0) @binding(1) var<storage, read> tables: array<HashMeta>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read> hot: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> out: array<u32>;

// a < b for 64-bit ids as (low, high).
fn id_less(a_lo: u32, a_hi: u32, b_lo: u32, b_hi: u32) -> bool {
    return a_hi < b_hi || (a_hi == b_hi && a_lo < b_lo);
}

// The hot row of an id in hot[start, start + len), or SKIP.
fn hot_row(lo: u32, hi: u32, start: u32, len: u32) -> u32 {
    var first = start;
    var count = len;
    while (count > 0u) {
        let half = count / 2u;
        let e = hot[first + half];
        if (id_less(e.x, e.y, lo, hi)) {
            first = first + half + 1u;
            count = count - half - 1u;
        } else {
            count = half;
        }
    }
    if (first < start + len) {
        let e = hot[first];
        if (e.x == lo && e.y == hi) {
            return e.z;
        }
    }
    return SKIP;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = gid.y * nwg.x * WG + gid.x;
    if (j >= params.n_ids) {
        return;
    }
    // The table whose id range holds j: binary search of the ascending id_end (O(log T) loads).
    var t = 0u;
    var count = params.n_tables;
    while (count > 0u) {
        let half = count / 2u;
        if (tables[t + half].id_end <= j) {
            t = t + half + 1u;
            count = count - half - 1u;
        } else {
            count = half;
        }
    }
    t = min(t, params.n_tables - 1u);
    let m = tables[t];
    let lo = ids[2u * j];
    let hi = ids[2u * j + 1u];
    let o = m.out_base + (j - m.id_start) * m.k;
    let h = hot_row(lo, hi, m.hot_start, m.hot_len);
    if (h != SKIP) {
        out[o] = h;
        for (var s = 1u; s < m.k; s++) {
            out[o + s] = SKIP;
        }
        return;
    }
    for (var s = 0u; s < m.k; s++) {
        out[o + s] = murmur3_id(lo, hi, m.seeds[s / 4u][s % 4u]) % m.buckets;
    }
}
