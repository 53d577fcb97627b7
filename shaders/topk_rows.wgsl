// topk_rows: the one-pass scan's reading of corpus rows, a 4-byte word at a time (any code width).
// Helpers for hamming_topk_scan.wgsl (which declares `qtile`, `Dists`, `Rows4` and `dists_or_none`);
// topk_rows4.wgsl is the 16-byte variant.
// Bindings: 2 shard (one shard of corpus codes, u32 words).

@group(0) @binding(2) var<storage, read> shard: array<u32>;

// Rows r0, r0 + 256, r0 + 512 and r0 + 768 of the shard (a group of an invocation's rows): their
// distances to the tile's queries, NONE past the shard. The four rows are read side by side, so
// each word of the tile's queries is loaded once for all four.
fn group_rows(r0: u32, wide: bool) -> Rows4 {
    let rw = params.corpus_row_words;
    let last = params.shard_rows - 1u; // shard_rows ≥ 1: the scan returns before blocks past the shard
    let p0 = min(r0, last) * rw;
    let p1 = min(r0 + 256u, last) * rw;
    let p2 = min(r0 + 512u, last) * rw;
    let p3 = min(r0 + 768u, last) * rw;
    var a0 = vec4<u32>(0u);
    var a1 = vec4<u32>(0u);
    var a2 = vec4<u32>(0u);
    var a3 = vec4<u32>(0u);
    var b0 = vec4<u32>(0u);
    var b1 = vec4<u32>(0u);
    var b2 = vec4<u32>(0u);
    var b3 = vec4<u32>(0u);
    if (wide) {
        for (var w = 0u; w < params.code_words; w++) {
            let ta = qtile[2u * w];
            let tb = qtile[2u * w + 1u];
            let c0 = vec4<u32>(shard[p0 + w]);
            let c1 = vec4<u32>(shard[p1 + w]);
            let c2 = vec4<u32>(shard[p2 + w]);
            let c3 = vec4<u32>(shard[p3 + w]);
            a0 += countOneBits(c0 ^ ta);
            b0 += countOneBits(c0 ^ tb);
            a1 += countOneBits(c1 ^ ta);
            b1 += countOneBits(c1 ^ tb);
            a2 += countOneBits(c2 ^ ta);
            b2 += countOneBits(c2 ^ tb);
            a3 += countOneBits(c3 ^ ta);
            b3 += countOneBits(c3 ^ tb);
        }
    } else {
        for (var w = 0u; w < params.code_words; w++) {
            let t = qtile[w];
            a0 += countOneBits(vec4<u32>(shard[p0 + w]) ^ t);
            a1 += countOneBits(vec4<u32>(shard[p1 + w]) ^ t);
            a2 += countOneBits(vec4<u32>(shard[p2 + w]) ^ t);
            a3 += countOneBits(vec4<u32>(shard[p3 + w]) ^ t);
        }
    }
    return Rows4(dists_or_none(r0, a0, b0), dists_or_none(r0 + 256u, a1, b1), dists_or_none(r0 + 512u, a2, b2), dists_or_none(r0 + 768u, a3, b3));
}
