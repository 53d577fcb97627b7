// bag_shard: the bag's shard (binding 5) bound as u32 words, and word(), through
// which the decode_<format>.wgsl decoders read it.
// Bindings: 5 shard (array<u32>).

@group(0) @binding(5) var<storage, read> shard: array<u32>;

// Word p of the bound shard.
fn word(p: u32) -> u32 {
    return shard[p];
}
