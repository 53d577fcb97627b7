// The distance shared by the Hamming kernels (after search_common.wgsl), and their bindings.
// Bindings: 0 params, 1 the query codes, 2 one shard of corpus codes; each driver declares 3, `ws`.

@group(0) @binding(0) var<uniform> params: SearchParams;
@group(0) @binding(1) var<storage, read> queries: array<u32>;
@group(0) @binding(2) var<storage, read> shard: array<u32>;

// Differing bits of query q and row r of the bound shard (padding bits are zero in both).
fn distance(q: u32, r: u32) -> u32 {
    let qb = q * params.query_row_words;
    let rb = r * params.corpus_row_words;
    var d = 0u;
    for (var w = 0u; w < params.code_words; w++) {
        d += countOneBits(queries[qb + w] ^ shard[rb + w]);
    }
    return d;
}
