// topk_rows: the one-pass scan's reading of corpus rows, a 4-byte word at a time (any code width).
// Helpers for hamming_topk_scan.wgsl (which declares `qtile`, `Rows4`, `Sums`, `group_starts` and
// `group_of`); topk_rows4.wgsl is the 16-byte variant.
// Bindings: 2 shard (one shard of corpus codes, u32 words).

@group(0) @binding(2) var<storage, read> shard: array<u32>;

// Rows r0, r0 + 256, r0 + 512 and r0 + 768 of the shard (a group of an invocation's rows): their
// distances to the tile's queries, NONE past the shard. The four rows are read side by side, so
// each word of the tile's queries is loaded once for all four.
fn group_rows(r0: u32, wide: bool) -> Rows4 {
    let p = group_starts(r0, params.corpus_row_words);
    var s = Sums();
    if (wide) {
        for (var w = 0u; w < params.code_words; w++) {
            let ta = qtile[2u * w];
            let tb = qtile[2u * w + 1u];
            let c0 = vec4<u32>(shard[p.x + w]);
            let c1 = vec4<u32>(shard[p.y + w]);
            let c2 = vec4<u32>(shard[p.z + w]);
            let c3 = vec4<u32>(shard[p.w + w]);
            s.a0 += countOneBits(c0 ^ ta);
            s.b0 += countOneBits(c0 ^ tb);
            s.a1 += countOneBits(c1 ^ ta);
            s.b1 += countOneBits(c1 ^ tb);
            s.a2 += countOneBits(c2 ^ ta);
            s.b2 += countOneBits(c2 ^ tb);
            s.a3 += countOneBits(c3 ^ ta);
            s.b3 += countOneBits(c3 ^ tb);
        }
    } else {
        for (var w = 0u; w < params.code_words; w++) {
            let t = qtile[w];
            s.a0 += countOneBits(vec4<u32>(shard[p.x + w]) ^ t);
            s.a1 += countOneBits(vec4<u32>(shard[p.y + w]) ^ t);
            s.a2 += countOneBits(vec4<u32>(shard[p.z + w]) ^ t);
            s.a3 += countOneBits(vec4<u32>(shard[p.w + w]) ^ t);
        }
    }
    return group_of(r0, &s);
}
