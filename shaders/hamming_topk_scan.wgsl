// hamming_topk_scan: the one pass over the codes. A workgroup takes a tile of queries (staged in
// workgroup memory) and a block of 256 · STRIPES consecutive rows of one shard; each invocation
// reads STRIPES rows (consecutive invocations, consecutive rows), each code word once for the
// whole tile (one vec4 XOR and popcount per four queries), and the block's k nearest per query
// are kept (topk_common.wgsl) in the query's list at the block's place. Grid: x·y over the
// shard's blocks, z over query tiles.
// Bindings: as topk_common.wgsl: 0 params, 1 the query codes, 2 one shard of corpus codes (as
// u32 words, or vec4s where rows are whole vec4s: topk_rows*.wgsl), 3 ws.

const MAX_TILE: u32 = 8u;

// The tile, word-major: word w of queries 0–3 is qtile[2w] and of queries 4–7 qtile[2w + 1]
// (tiles of more than four queries, code words ≤ 112), or word w of queries 0–3 is qtile[w]
// (tiles of four or fewer, code words ≤ 224). Queries past the tile read zeros.
var<workgroup> qtile: array<vec4<u32>, 224>;

// One row's distances to the tile's queries: queries 0–3 in `a`, 4–7 in `b` (NONE past the
// shard); `group_rows(r0, wide)` (topk_rows.wgsl or topk_rows4.wgsl) gives four rows' of them.
struct Dists {
    a: vec4<u32>,
    b: vec4<u32>,
}

// Row r's distances `a` and `b`, or NONE where r is past the shard.
fn dists_or_none(r: u32, a: vec4<u32>, b: vec4<u32>) -> Dists {
    let past = r >= params.shard_rows;
    return Dists(select(a, vec4<u32>(NONE), past), select(b, vec4<u32>(NONE), past));
}

// A group's distances as group_rows (topk_rows*.wgsl) sums them: row r0 + 256·j's to queries 0–3
// in aj, to 4–7 in bj. Named values, not an array (as Rows4).
struct Sums {
    a0: vec4<u32>,
    a1: vec4<u32>,
    a2: vec4<u32>,
    a3: vec4<u32>,
    b0: vec4<u32>,
    b1: vec4<u32>,
    b2: vec4<u32>,
    b3: vec4<u32>,
}

// Where rows r0, r0 + 256, r0 + 512 and r0 + 768 of the shard start, in units of `per_row` a row.
// Rows past the shard read its last row (shard_rows ≥ 1: main returns before blocks past the
// shard), and group_of drops their distances.
fn group_starts(r0: u32, per_row: u32) -> vec4<u32> {
    let rows = vec4<u32>(r0) + vec4<u32>(0u, 256u, 512u, 768u);
    return min(rows, vec4<u32>(params.shard_rows - 1u)) * per_row;
}

// The group of rows from r0 with sums `s`, NONE for rows past the shard.
fn group_of(r0: u32, s: ptr<function, Sums>) -> Rows4 {
    return Rows4(
        dists_or_none(r0, (*s).a0, (*s).b0),
        dists_or_none(r0 + 256u, (*s).a1, (*s).b1),
        dists_or_none(r0 + 512u, (*s).a2, (*s).b2),
        dists_or_none(r0 + 768u, (*s).a3, (*s).b3),
    );
}

// Word w of query qi of the tile starting at query q0 (nt queries), zero past the tile.
fn query_word(q0: u32, nt: u32, qi: u32, w: u32) -> u32 {
    var x = 0u;
    if (qi < nt) {
        x = queries[(q0 + qi) * params.query_row_words + w];
    }
    return x;
}

fn dist_of(x: Dists, qi: u32) -> u32 {
    return select(x.b[qi & 3u], x.a[qi & 3u], qi < 4u);
}

// Four rows' distances to the tile's queries: this invocation's rows of one group (stripes 4g
// to 4g + 3). Named values, not an array: a private array indexed at run time would live in a
// GPU's local memory.
struct Rows4 {
    s0: Dists,
    s1: Dists,
    s2: Dists,
    s3: Dists,
}

// This invocation's rows of group g of its block (rows from r, 256 apart).
fn load_group(r: u32, g: u32, wide: bool) -> Rows4 {
    return group_rows(r + 1024u * g, wide);
}

// Query qi's distances to a group's rows.
fn group_dists(x: Rows4, qi: u32) -> vec4<u32> {
    return vec4<u32>(dist_of(x.s0, qi), dist_of(x.s1, qi), dist_of(x.s2, qi), dist_of(x.s3, qi));
}

// The block's rows of this invocation, in groups (g1 from 8 stripes, g2 and g3 with 16).
struct Held {
    g0: Rows4,
    g1: Rows4,
    g2: Rows4,
    g3: Rows4,
}

// Query qi's distances to this invocation's rows of group g. (The rows by pointer, not copied
// whole: a backend that compiles for speed of compilation, as SwiftShader's may, copies a struct
// argument. WGSL passes pointers to whole variables only, so the groups are copied, one a call.)
fn held_dists(h: ptr<function, Held>, g: u32, qi: u32) -> vec4<u32> {
    switch (g) {
        case 0u: {
            return group_dists((*h).g0, qi);
        }
        case 1u: {
            return group_dists((*h).g1, qi);
        }
        case 2u: {
            return group_dists((*h).g2, qi);
        }
        default: {
            return group_dists((*h).g3, qi);
        }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let block = block_of(wid, nwg);
    let q0 = wid.z * params.tile;
    let nt = min(params.tile, params.n_queries - q0);
    let cw = params.code_words;
    // Blocks of 4096 rows take tiles of four: with STRIPES a constant, a compiler drops the
    // distances of queries 4–7 (Dists.b) from the sixteen rows an invocation holds, which keeps
    // 64 distances, as eight rows of a tile of eight do.
    let wide = STRIPES <= 8u && params.tile > 4u;
    let lanes = select(MAX_TILE / 2u, MAX_TILE, wide);
    // Each invocation writes whole vec4s: writes of one vector's components by different
    // invocations would race (a backend may store a component as the whole vector).
    for (var e = lid.x; e < lanes / 4u * cw; e += 256u) {
        let first = select(0u, e % 2u * 4u, wide);
        let w = select(e, e / 2u, wide);
        qtile[e] = vec4<u32>(query_word(q0, nt, first, w), query_word(q0, nt, first + 1u, w), query_word(q0, nt, first + 2u, w), query_word(q0, nt, first + 3u, w));
    }
    workgroupBarrier();
    // Grid padding past the shard's blocks (a whole workgroup) writes nothing: that place in the
    // lists is another shard's.
    if (block * block_len() >= params.shard_rows) {
        return;
    }
    let r = block * block_len() + lid.x;
    let none = Dists(vec4<u32>(NONE), vec4<u32>(NONE));
    var held = Held(load_group(r, 0u, wide), Rows4(none, none, none, none), Rows4(none, none, none, none), Rows4(none, none, none, none));
    if (STRIPES > 4u) {
        held.g1 = load_group(r, 1u, wide);
    }
    if (STRIPES > 8u) {
        held.g2 = load_group(r, 2u, wide);
        held.g3 = load_group(r, 3u, wide);
    }
    // The tile's queries in batches whose histograms fit together.
    let bs = batch_size();
    for (var b0 = 0u; b0 < nt; b0 += bs) {
        let nb = min(bs, nt - b0);
        hist_clear(lid.x, nb);
        for (var qb = 0u; qb < nb; qb++) {
            for (var g = 0u; g < groups(); g++) {
                hist_add(qb, held_dists(&held, g, b0 + qb));
            }
        }
        pick_thresholds(lid.x, nb);
        marks_clear(lid.x, nb);
        for (var qb = 0u; qb < nb; qb++) {
            for (var g = 0u; g < groups(); g++) {
                mark(lid.x, qb, g, flags_of(qb, held_dists(&held, g, b0 + qb)));
            }
        }
        marks_done(lid.x, nb);
        for (var qb = 0u; qb < nb; qb++) {
            let qi = b0 + qb;
            let out = params.off_out + ((q0 + qi) * params.out_stride + (params.block_base + block) * params.k) * 2u;
            pad_list(lid.x, qb, out);
            for (var g = 0u; g < groups(); g++) {
                let row = vec4<u32>(params.shard_first + r + 1024u * g) + vec4<u32>(0u, 256u, 512u, 768u);
                keep_group(lid.x, qb, g, held_dists(&held, g, qi), row, out);
            }
        }
    }
}
