// scatter_rows: packed rows uploaded for a row cache → their slots in one shard of the cache.
// Word i of the upload belongs to row i / row_words, which goes to slot slots[row]; the host
// groups uploads by shard, so every slot lies in this shard (the range check guards anyway).
// Bindings: 0 params (uniform), 1 slots (u32 per row), 2 rows (packed words), 3 the shard.

struct ScatterParams {
    n_rows: u32,
    row_words: u32,
    shard_first: u32,   // first slot the shard holds
    shard_rows: u32,
}

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> params: ScatterParams;
@group(0) @binding(1) var<storage, read> slots: array<u32>;
@group(0) @binding(2) var<storage, read> rows: array<u32>;
@group(0) @binding(3) var<storage, read_write> shard: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.y * nwg.x * WG + gid.x;
    // n_rows · row_words words fit one binding, so the product cannot overflow.
    if (i >= params.n_rows * params.row_words) {
        return;
    }
    let r = i / params.row_words;
    let slot = slots[r];
    if (slot < params.shard_first || slot - params.shard_first >= params.shard_rows) {
        return;
    }
    shard[(slot - params.shard_first) * params.row_words + (i - r * params.row_words)] = rows[i];
}
