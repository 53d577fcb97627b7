// Shared by the four gather drivers (gather_rows, gather_rows4 and their f16 forms), which differ
// only in what they store: the bindings they read, and which id an invocation handles.
// Bindings: 0 params (uniform GatherParams), 1 ids (u32, or (output row, id) pairs when listed),
// 2 shard (the packed rows of one shard, row_words words each: gather_shard.wgsl or
// gather_shard4.wgsl declares it); each driver declares 3 out.

@group(0) @binding(0) var<uniform> params: GatherParams;
@group(0) @binding(1) var<storage, read> ids: array<u32>;

// Entry j of this dispatch's ids: (output row, id) — the pair itself when listed, else (j, ids[j]).
fn entry(j: u32) -> vec2<u32> {
    if (params.listed == 1u) {
        return vec2<u32>(ids[2u * j], ids[2u * j + 1u]);
    }
    return vec2<u32>(j, ids[j]);
}

// The output row of this invocation's id, and the id's row in the bound shard: ROW_SKIP when the
// invocation writes nothing (past this dispatch's ids, or another dispatch writes the row),
// ROW_ZERO for a zero row. WG_Y is the driver's.
fn output_and_row(lid: vec3<u32>, wid: vec3<u32>, nwg: vec3<u32>) -> vec2<u32> {
    let j = id_index(wid, nwg, lid, WG_Y);
    if (j >= params.n_ids) {
        return vec2<u32>(0u, ROW_SKIP);
    }
    let e = entry(j);
    return vec2<u32>(e.x, resolve_row(e.y, params.total_rows, params.shard_first, params.shard_rows, params.policy));
}
