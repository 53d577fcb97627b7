// hamming_topk_merge: the k nearest of each group of 256 · STRIPES entries of a query's list (the
// blocks' kept pairs, in row order), kept again (topk_common.wgsl): lists shrink by
// 256 · STRIPES / k a level until one group is left, whose k are the query's. Grid: x·y over the
// groups, z over queries.
// Bindings: as topk_common.wgsl: 0 params, 3 ws (1 and 2 are bound but unused).

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let block = block_of(wid, nwg);
    let q = wid.z;
    if (block * block_len() >= params.in_len) {
        return;
    }
    // Named groups, not an array: a private array indexed at run time would live in a GPU's
    // local memory (g1 from 8 stripes, g2 and g3 with 16).
    let none = Entries(vec4<u32>(NONE), vec4<u32>(NONE));
    var held = HeldEntries(load_entries(block, 0u, q, lid.x), none, none, none);
    if (STRIPES > 4u) {
        held.g1 = load_entries(block, 1u, q, lid.x);
    }
    if (STRIPES > 8u) {
        held.g2 = load_entries(block, 2u, q, lid.x);
        held.g3 = load_entries(block, 3u, q, lid.x);
    }
    hist_clear(lid.x, 1u);
    for (var g = 0u; g < groups(); g++) {
        hist_add(0u, entries_of(&held, g).d);
    }
    pick_thresholds(lid.x, 1u);
    marks_clear(lid.x, 1u);
    for (var g = 0u; g < groups(); g++) {
        mark(lid.x, 0u, g, flags_of(0u, entries_of(&held, g).d));
    }
    marks_done(lid.x, 1u);
    let out = params.off_out + (q * params.out_stride + block * params.k) * 2u;
    pad_list(lid.x, 0u, out);
    for (var g = 0u; g < groups(); g++) {
        let e = entries_of(&held, g);
        keep_group(lid.x, 0u, g, e.d, e.row, out);
    }
}

// One group of an invocation's entries: four distances and their rows (NONE past the list).
struct Entries {
    d: vec4<u32>,
    row: vec4<u32>,
}

// Group g (positions (4g + j) · 256 + lid of the block) of query q's input list.
fn load_entries(block: u32, g: u32, q: u32, lid: u32) -> Entries {
    var e = Entries(vec4<u32>(NONE), vec4<u32>(NONE));
    for (var j = 0u; j < 4u; j++) {
        let p = block * block_len() + (4u * g + j) * 256u + lid;
        if (p < params.in_len) {
            let a = params.off_in + (q * params.in_len + p) * 2u;
            e.d[j] = ws[a];
            e.row[j] = ws[a + 1u];
        }
    }
    return e;
}

// An invocation's entries of the block, in groups (g1 from 8 stripes, g2 and g3 with 16).
struct HeldEntries {
    g0: Entries,
    g1: Entries,
    g2: Entries,
    g3: Entries,
}

// Group g of the held entries (by pointer: a struct argument may be copied whole).
fn entries_of(h: ptr<function, HeldEntries>, g: u32) -> Entries {
    switch (g) {
        case 0u: {
            return (*h).g0;
        }
        case 1u: {
            return (*h).g1;
        }
        case 2u: {
            return (*h).g2;
        }
        default: {
            return (*h).g3;
        }
    }
}
