// topk_rows4: the one-pass scan's reading of corpus rows, four code words (16 bytes) a load, for
// rows that are whole vec4s and codes that are too: code words a multiple of 4 (binary codes of
// 97–128, 225–256, … bits), and nothing else in a row or rows aligned to 16 bytes (binary+scale,
// whose scale word follows the codes, once PackedTable::with_row_alignment pads it). Shards hold
// whole rows, so every row starts on a 16-byte boundary of its shard. Helpers for
// hamming_topk_scan.wgsl (which declares `qtile`, `Rows4`, `Sums`, `group_starts` and
// `group_of`), as topk_rows.wgsl.
// Bindings: 2 shard4 (one shard of corpus codes, as vec4<u32>).

@group(0) @binding(2) var<storage, read> shard4: array<vec4<u32>>;

// Rows r0, r0 + 256, r0 + 512 and r0 + 768 of the shard (a group of an invocation's rows): their
// distances to the tile's queries, NONE past the shard. The four rows are read side by side, so
// each word of the tile's queries is loaded once for all four.
fn group_rows(r0: u32, wide: bool) -> Rows4 {
    let p = group_starts(r0, params.corpus_row_words / 4u);
    var s = Sums();
    if (wide) {
        for (var v = 0u; v < params.code_words / 4u; v++) {
            let q = 8u * v; // qtile holds two vec4s a word
            let t0 = qtile[q];
            let t1 = qtile[q + 1u];
            let t2 = qtile[q + 2u];
            let t3 = qtile[q + 3u];
            let t4 = qtile[q + 4u];
            let t5 = qtile[q + 5u];
            let t6 = qtile[q + 6u];
            let t7 = qtile[q + 7u];
            let c0 = shard4[p.x + v];
            let c1 = shard4[p.y + v];
            let c2 = shard4[p.z + v];
            let c3 = shard4[p.w + v];
            s.a0 += popcounts4(c0, t0, t2, t4, t6);
            s.b0 += popcounts4(c0, t1, t3, t5, t7);
            s.a1 += popcounts4(c1, t0, t2, t4, t6);
            s.b1 += popcounts4(c1, t1, t3, t5, t7);
            s.a2 += popcounts4(c2, t0, t2, t4, t6);
            s.b2 += popcounts4(c2, t1, t3, t5, t7);
            s.a3 += popcounts4(c3, t0, t2, t4, t6);
            s.b3 += popcounts4(c3, t1, t3, t5, t7);
        }
    } else {
        for (var v = 0u; v < params.code_words / 4u; v++) {
            let q = 4u * v;
            let t0 = qtile[q];
            let t1 = qtile[q + 1u];
            let t2 = qtile[q + 2u];
            let t3 = qtile[q + 3u];
            s.a0 += popcounts4(shard4[p.x + v], t0, t1, t2, t3);
            s.a1 += popcounts4(shard4[p.y + v], t0, t1, t2, t3);
            s.a2 += popcounts4(shard4[p.z + v], t0, t1, t2, t3);
            s.a3 += popcounts4(shard4[p.w + v], t0, t1, t2, t3);
        }
    }
    return group_of(r0, &s);
}

// The distances of four code words `c` of a row to four queries, whose words are t0 (c.x's) to t3
// (c.w's).
fn popcounts4(c: vec4<u32>, t0: vec4<u32>, t1: vec4<u32>, t2: vec4<u32>, t3: vec4<u32>) -> vec4<u32> {
    return countOneBits(vec4<u32>(c.x) ^ t0) + countOneBits(vec4<u32>(c.y) ^ t1) + countOneBits(vec4<u32>(c.z) ^ t2) + countOneBits(vec4<u32>(c.w) ^ t3);
}
