// live_probe: a live table's 64-bit keys → the rows a gather or bag then reads, by probing the
// table's index on the GPU (src/live/index.rs lays it out; the host probes the same words).
// Assembled after hash_common.wgsl. A bucket is (key low, key high, slot, 0), linear probing from
// bucket_hash(key) & mask (index.rs's, word for word); slot EMPTY ends a probe, TOMBSTONE is
// passed over. A key held
// reads row fallback_rows + slot and counts a lookup of its slot in hits; an unknown key is
// counted in hits[slots] and reads by `missing`: 0 a zero row (ZERO_ID, out of range of the
// table), 1 the initial row (row 0), 2 a hashed initial row (murmur3_id(key, 0) mod fallback_rows).
//
// Bindings: 0 params (uniform), 1 keys (u32 pairs: low word, high word), 2 buckets (vec4<u32>),
// 3 out (u32 rows), 4 hits (atomic u32 per slot, then one for the unknown keys).

struct ProbeParams {
    n_keys: u32,
    mask: u32,
    missing: u32,
    fallback_rows: u32,
    slots: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

const EMPTY: u32 = 0xffffffffu;
const TOMBSTONE: u32 = 0xfffffffeu;
const ZERO_ID: u32 = 0xfffffffeu;

override WG: u32 = 256u;

// The key's two words folded and mixed by MurmurHash3's finalizer (index.rs's bucket_hash).
fn bucket_hash(lo: u32, hi: u32) -> u32 {
    var h = (lo ^ (hi * 0x9e3779b1u)) * 0x85ebca6bu;
    h = h ^ (h >> 15u);
    h = h * 0xc2b2ae35u;
    return h ^ (h >> 16u);
}

@group(0) @binding(0) var<uniform> params: ProbeParams;
@group(0) @binding(1) var<storage, read> keys: array<u32>;
@group(0) @binding(2) var<storage, read> buckets: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;
@group(0) @binding(4) var<storage, read_write> hits: array<atomic<u32>>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.y * nwg.x * WG + gid.x;
    if (i >= params.n_keys) {
        return;
    }
    let lo = keys[2u * i];
    let hi = keys[2u * i + 1u];
    var b = bucket_hash(lo, hi) & params.mask;
    // At most 5/8 of the buckets are taken, so a probe meets an empty one; the bound only keeps
    // a damaged index from looping.
    for (var n = 0u; n <= params.mask; n++) {
        let bucket = buckets[b];
        if (bucket.z == EMPTY) {
            break;
        }
        if (bucket.z != TOMBSTONE && bucket.x == lo && bucket.y == hi) {
            if (bucket.z < params.slots) {
                atomicAdd(&hits[bucket.z], 1u);
            }
            out[i] = params.fallback_rows + bucket.z;
            return;
        }
        b = (b + 1u) & params.mask;
    }
    atomicAdd(&hits[params.slots], 1u);
    switch params.missing {
        case 1u: {
            out[i] = 0u;
        }
        case 2u: {
            out[i] = murmur3_id(lo, hi, 0u) % max(params.fallback_rows, 1u);
        }
        default: {
            out[i] = ZERO_ID;
        }
    }
}
