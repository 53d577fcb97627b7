// bag_shard4: the bag's shard (binding 5) bound as 16-byte words, for the kernels
// that read rows of whole vec4s: quad() reads one, word() one u32 of one (for the decoders' other
// reads: a module declares each binding number once, so the same decoder text reads through
// whichever binding the kernel's helpers declare).
// Bindings: 5 shard (array<vec4<u32>>).

@group(0) @binding(5) var<storage, read> shard4: array<vec4<u32>>;

// 16-byte word v of the bound shard (u32 words 4v .. 4v + 4).
fn quad(v: u32) -> vec4<u32> {
    return shard4[v];
}

// u32 word p of the bound shard.
fn word(p: u32) -> u32 {
    return shard4[p / 4u][p % 4u];
}
