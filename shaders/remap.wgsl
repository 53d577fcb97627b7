// remap: ids of a pruned table → rows of its compact table (FBGEMM's index remapping).
// out[i] = remap[ids[i]] for ids below original_rows: a compact row, or ABSENT (0xffffffff) for
// a pruned row; ids past original_rows follow the bounds policy (Zero: ABSENT; Clamp: the last
// original row, then remapped). A gather or bag kernel then reads ABSENT, which is out of range
// of the compact table, as a zero row under POLICY_ZERO.
// Bindings: 0 params (uniform), 1 ids (u32), 2 remap (u32 per original row), 3 out (u32).

struct RemapParams {
    n_ids: u32,
    original_rows: u32,
    policy: u32,   // 0 zero, 1 clamp (Error is checked on the host)
    _pad: u32,
}

const ABSENT: u32 = 0xffffffffu;

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> params: RemapParams;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> remap: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.y * nwg.x * WG + gid.x;
    if (i >= params.n_ids) {
        return;
    }
    var id = ids[i];
    if (id >= params.original_rows) {
        if (params.policy == 1u && params.original_rows > 0u) {
            id = params.original_rows - 1u;
        } else {
            out[i] = ABSENT;
            return;
        }
    }
    out[i] = remap[id];
}
