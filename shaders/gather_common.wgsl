// Shared by every gather shader: the parameter block, the bounds policy and the grid helpers.
// No bindings and no entry point. A gather module is assembled as
//   gather_common.wgsl + gather_driver.wgsl + gather_shard.wgsl + decode_<format>.wgsl + one
//   driver (gather_rows.wgsl, gather_rows4.wgsl, ...);
// the decoder reads the shard through word(), which gather_shard.wgsl (or gather_shard4.wgsl,
// which binds it as 16-byte words) defines.
//
// Thread layout: a workgroup of WG_X × WG_Y invocations handles WG_Y ids; the WG_X invocations of
// one id walk its row with stride WG_X, one output value (gather_rows) or four (gather_rows4) each,
// so neighbouring invocations write neighbouring memory. Workgroups form a 2-D grid (x ≤ 65535).
// A table split into shards is gathered by one dispatch per shard; each writes only the output
// rows whose id lands in its shard, so every output row is written by exactly one dispatch.
// Ids from the host come to a sharded table sorted out by shard (`listed`): each dispatch then
// runs over its own ids, not over all of them.

struct GatherParams {
    n_ids: u32,        // ids bound for this dispatch
    dim: u32,          // values per row
    row_words: u32,    // u32 words from a row to the next: codes + params, and an aligned row's padding
    code_words: u32,   // u32 words of codes per row
    total_rows: u32,   // rows of the whole table (bounds are checked against this)
    shard_first: u32,  // first table row held by the bound shard
    shard_rows: u32,   // rows held by the bound shard
    policy: u32,       // POLICY_ZERO, POLICY_CLAMP or POLICY_SKIP (Error is checked on the host first)
    listed: u32,       // 1: `ids` holds (output row, id) pairs, this shard's ids (sorted out on the host)
    _pad1: u32,
    _pad2: u32,
    _pad3: u32,
}

// Sixteen values of a row, or a bag's accumulators for sixteen columns, as four quads: what
// decode16 returns.
struct Quads {
    a: vec4<f32>,
    b: vec4<f32>,
    c: vec4<f32>,
    d: vec4<f32>,
}

const POLICY_ZERO: u32 = 0u;
const POLICY_CLAMP: u32 = 1u;
// As POLICY_ZERO, but the id ROW_SKIP writes nothing: another gather of the same job (the other
// part of a mixed-precision table) writes that output row.
const POLICY_SKIP: u32 = 2u;
// The sentinels of rows, here for every kernel that decodes rows (the host's are
// bounds::SKIP_ID and ZERO_ID, checked equal by a test):
const ROW_SKIP: u32 = 0xffffffffu; // another dispatch writes this row (another shard, another pass)
const ROW_ZERO: u32 = 0xfffffffeu; // out-of-range id under POLICY_ZERO: write a zero row

// The row of `id` inside the bound shard, ROW_SKIP or ROW_ZERO.
// WebGPU clamps out-of-bounds reads instead of trapping, so an unchecked id would silently read a
// wrong row: every id goes through here before the table is touched. Zero rows for bad ids are
// written by the dispatch of shard 0 only.
fn resolve_row(id: u32, total_rows: u32, shard_first: u32, shard_rows: u32, policy: u32) -> u32 {
    var row = id;
    if (row >= total_rows) {
        if (policy == POLICY_CLAMP) {
            row = total_rows - 1u;
        } else if (policy == POLICY_SKIP && id == ROW_SKIP) {
            return ROW_SKIP;
        } else {
            return select(ROW_SKIP, ROW_ZERO, shard_first == 0u);
        }
    }
    if (row < shard_first || row - shard_first >= shard_rows) {
        return ROW_SKIP;
    }
    return row - shard_first;
}

// Index of the id a workgroup row handles, over a 2-D grid of workgroups.
fn id_index(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>, rows_per_group: u32) -> u32 {
    return (wid.y * nwg.x + wid.x) * rows_per_group + lid.y;
}

