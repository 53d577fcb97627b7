// topk_rows: the one-pass scan's reading of a corpus row, a 4-byte word at a time (any code width).
// Helpers for hamming_topk_scan.wgsl (which declares `qtile` and `Dists`); topk_rows4.wgsl is the
// 16-byte variant.
// Bindings: 2 shard (one shard of corpus codes, u32 words).

@group(0) @binding(2) var<storage, read> shard: array<u32>;

// Row r of the shard's distances to the tile's queries.
fn row_dists(r: u32, wide: bool) -> Dists {
    var out = Dists(vec4<u32>(NONE), vec4<u32>(NONE));
    if (r < params.shard_rows) {
        let rb = r * params.corpus_row_words;
        var a = vec4<u32>(0u);
        var b = vec4<u32>(0u);
        if (wide) {
            for (var w = 0u; w < params.code_words; w++) {
                let x = vec4<u32>(shard[rb + w]);
                a += countOneBits(x ^ qtile[2u * w]);
                b += countOneBits(x ^ qtile[2u * w + 1u]);
            }
        } else {
            for (var w = 0u; w < params.code_words; w++) {
                a += countOneBits(vec4<u32>(shard[rb + w]) ^ qtile[w]);
            }
        }
        out = Dists(a, b);
    }
    return out;
}
