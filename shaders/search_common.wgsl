// Shared by the search kernels (hamming_*.wgsl, rescore.wgsl, sort_pairs.wgsl): the parameter
// block and the layout of the workspace. No entry point; each driver declares the workspace `ws`
// (atomic where it appends or counts, plain elsewhere).
//
// Workspace (u32 words), for Q queries, B = bits + 1 histogram bins, C chunks of CHUNK rows:
//   hist  [off_hist + q·B + d]        rows of query q at Hamming distance d
//   sel   [off_sel + q·4 + 0..4]       threshold t (the k-th distance), rows below t, rows wanted
//                                      at t, append counter
//   ties  [off_ties + q·C + c]         rows of chunk c at distance t; then their exclusive prefix
//   out   [off_out + (q·seg + j)·2]    (key, row) pairs: key = distance, or a score mapped so
//                                      that ascending keys are descending scores; j < seg
// Rows are chunks of 1024 consecutive corpus rows: a workgroup of 256 invocations, four
// consecutive rows each. Grids: x·y over the chunks of one shard (x ≤ 65535), z over queries.

struct SearchParams {
    n_queries: u32,
    code_words: u32,        // code words per row (corpus and queries)
    corpus_row_words: u32,  // words per corpus row (codes, + 1 scale word for binary+scale)
    query_row_words: u32,   // words per query row
    bins: u32,              // bits + 1
    k: u32,                 // results per query (≤ corpus rows), or candidates when rescoring
    seg: u32,               // pairs per query segment: a power of two ≥ k
    chunks: u32,            // chunks over the whole corpus
    shard_first: u32,       // first corpus (or rescoring table) row of the bound shard
    shard_rows: u32,        // rows of the bound shard
    chunk_base: u32,        // first chunk of the bound shard
    dim: u32,               // values per row of the rescoring table (and per float query)
    off_hist: u32,
    off_sel: u32,
    off_ties: u32,
    off_out: u32,
    table_row_words: u32,   // rescoring table: words per row
    table_code_words: u32,  // rescoring table: code words per row
    _pad0: u32,
    _pad1: u32,
}

const CHUNK: u32 = 1024u;
const NONE: u32 = 0xffffffffu;

fn chunk_of(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// Scratch of exclusive_prefix (only kernels that call it use it).
var<workgroup> prefix: array<u32, 256>;

// Each of a workgroup's 256 invocations gives `v`; each gets back the sum of the values given by
// the invocations before it. Holds two barriers: call it from uniform control flow.
fn exclusive_prefix(lid: u32, v: u32) -> u32 {
    prefix[lid] = v;
    workgroupBarrier();
    if (lid == 0u) {
        var acc = 0u;
        for (var i = 0u; i < 256u; i++) {
            let x = prefix[i];
            prefix[i] = acc;
            acc += x;
        }
    }
    workgroupBarrier();
    return prefix[lid];
}
