// topk_rows4: the one-pass scan's reading of a corpus row, four code words (16 bytes) a load, for
// rows that are whole vec4s and codes that are too: code words a multiple of 4 (binary codes of
// 97–128, 225–256, … bits), and nothing else in a row or rows aligned to 16 bytes (binary+scale,
// whose scale word follows the codes, once PackedTable::with_row_alignment pads it). Shards hold
// whole rows, so every row starts on a 16-byte boundary of its shard. Helpers for
// hamming_topk_scan.wgsl (which declares `qtile` and `Dists`), as topk_rows.wgsl.
// Bindings: 2 shard4 (one shard of corpus codes, as vec4<u32>).

@group(0) @binding(2) var<storage, read> shard4: array<vec4<u32>>;

// Row r of the shard's distances to the tile's queries.
fn row_dists(r: u32, wide: bool) -> Dists {
    var out = Dists(vec4<u32>(NONE), vec4<u32>(NONE));
    if (r < params.shard_rows) {
        let rb = r * (params.corpus_row_words / 4u);
        var a = vec4<u32>(0u);
        var b = vec4<u32>(0u);
        if (wide) {
            for (var v = 0u; v < params.code_words / 4u; v++) {
                let x = shard4[rb + v];
                let q = 8u * v; // qtile holds two vec4s a word
                a += countOneBits(vec4<u32>(x.x) ^ qtile[q])
                    + countOneBits(vec4<u32>(x.y) ^ qtile[q + 2u])
                    + countOneBits(vec4<u32>(x.z) ^ qtile[q + 4u])
                    + countOneBits(vec4<u32>(x.w) ^ qtile[q + 6u]);
                b += countOneBits(vec4<u32>(x.x) ^ qtile[q + 1u])
                    + countOneBits(vec4<u32>(x.y) ^ qtile[q + 3u])
                    + countOneBits(vec4<u32>(x.z) ^ qtile[q + 5u])
                    + countOneBits(vec4<u32>(x.w) ^ qtile[q + 7u]);
            }
        } else {
            for (var v = 0u; v < params.code_words / 4u; v++) {
                let x = shard4[rb + v];
                let q = 4u * v;
                a += countOneBits(vec4<u32>(x.x) ^ qtile[q])
                    + countOneBits(vec4<u32>(x.y) ^ qtile[q + 1u])
                    + countOneBits(vec4<u32>(x.z) ^ qtile[q + 2u])
                    + countOneBits(vec4<u32>(x.w) ^ qtile[q + 3u]);
            }
        }
        out = Dists(a, b);
    }
    return out;
}
