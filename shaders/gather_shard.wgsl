// gather_shard: a gathering kernel's shard (binding 2) bound as u32 words, and word(), through
// which the decode_<format>.wgsl decoders read it.
// Bindings: 2 shard (array<u32>).

@group(0) @binding(2) var<storage, read> shard: array<u32>;

// Word p of the bound shard.
fn word(p: u32) -> u32 {
    return shard[p];
}
