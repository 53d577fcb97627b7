// Shared by the gather drivers (gather_rows*.wgsl), which differ only in what a step reads and
// stores: the bindings they read, which id an invocation handles, and the body of their entry
// point (gather), which calls the driver's
//   alias Out (the element type of its `out`), const UNIT_VALUES (values an element holds: a
//   row is ⌈dim / UNIT_VALUES⌉ elements), const STEP_UNITS (elements a step writes),
//   fn write_step(o, base, s, rp) (step s of a row: elements o .. o + STEP_UNITS from the row at
//   shard word `base`),
// and row_params(base, code_words) of the decoder (or of the driver, if it decodes rows itself).
// Bindings: 0 params (uniform GatherParams), 1 ids (u32, or (output row, id) pairs when listed),
// 2 shard (the packed rows of one shard, row_words words each: gather_shard.wgsl or
// gather_shard4.wgsl declares it); each driver declares 3 out (array<Out>, n_ids rows of
// ⌈dim / UNIT_VALUES⌉, dense; each row written whole by the dispatch of the shard that holds it,
// or as zeros by shard 0's for a bad id under POLICY_ZERO).

override WG_X: u32 = 32u;
override WG_Y: u32 = 8u;

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
// ROW_ZERO for a zero row.
fn output_and_row(lid: vec3<u32>, wid: vec3<u32>, nwg: vec3<u32>) -> vec2<u32> {
    let j = id_index(wid, nwg, lid, WG_Y);
    if (j >= params.n_ids) {
        return vec2<u32>(0u, ROW_SKIP);
    }
    let e = entry(j);
    return vec2<u32>(e.x, resolve_row(e.y, params.total_rows, params.shard_first, params.shard_rows, params.policy));
}

// The builtins a gather driver's entry point takes.
struct Invocation {
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
}

// The body of every gather driver's entry point: the WG_X invocations of an id walk its row with
// stride WG_X, a step each, so neighbouring invocations write neighbouring memory.
fn gather(at: Invocation) {
    let lid = at.lid;
    let ir = output_and_row(lid, at.wid, at.nwg);
    let row = ir.y;
    if (row == ROW_SKIP) {
        return;
    }
    let units = (params.dim + UNIT_VALUES - 1u) / UNIT_VALUES;
    let o = ir.x * units;
    if (row == ROW_ZERO) {
        for (var k = lid.x; k < units; k += WG_X) {
            out[o + k] = Out();
        }
        return;
    }
    let base = row * params.row_words;
    let rp = row_params(base, params.code_words);
    for (var s = lid.x; s < units / STEP_UNITS; s += WG_X) {
        write_step(o + STEP_UNITS * s, base, s, rp);
    }
}
