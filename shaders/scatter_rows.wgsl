// scatter_rows: packed rows → their slots in one shard of a row cache. Each move is a pair
// (slot, source row): word w of move m copies rows[source · row_words + w] to the slot's word w.
// The rows buffer is either the rows uploaded for this lookup (source = m) or the staging buffer
// a prefetch filled for it (source = the row's place there). The host groups moves by shard, so
// every slot lies in this shard (the range check guards anyway).
// Bindings: 0 params (uniform), 1 moves (u32 pairs), 2 rows (packed words), 3 the shard.

struct ScatterParams {
    n_moves: u32,
    row_words: u32,
    shard_first: u32,   // first slot the shard holds
    shard_rows: u32,
}

override WG: u32 = 256u;

@group(0) @binding(0) var<uniform> params: ScatterParams;
@group(0) @binding(1) var<storage, read> moves: array<u32>;
@group(0) @binding(2) var<storage, read> rows: array<u32>;
@group(0) @binding(3) var<storage, read_write> shard: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.y * nwg.x * WG + gid.x;
    // n_moves · row_words words fit one binding, so the product cannot overflow.
    if (i >= params.n_moves * params.row_words) {
        return;
    }
    let m = i / params.row_words;
    let w = i - m * params.row_words;
    let slot = moves[2u * m];
    let source = moves[2u * m + 1u];
    if (slot < params.shard_first || slot - params.shard_first >= params.shard_rows) {
        return;
    }
    shard[(slot - params.shard_first) * params.row_words + w] = rows[source * params.row_words + w];
}
