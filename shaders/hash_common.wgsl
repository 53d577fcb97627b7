// MurmurHash3 x86_32 of a raw 64-bit id, given as its low and high u32 words: the hash of the
// id's 8 little-endian bytes (smhasher's MurmurHash3_x86_32; mmh3.hash(id.to_bytes(8, "little"),
// seed, signed=False)). Helpers only: no bindings, no entry point. u32 arithmetic wraps in WGSL,
// as the reference's does.

fn murmur_mix_k(k: u32) -> u32 {
    var x = k * 0xcc9e2d51u;
    x = (x << 15u) | (x >> 17u);
    return x * 0x1b873593u;
}

fn murmur_block(h: u32, k: u32) -> u32 {
    var x = h ^ murmur_mix_k(k);
    x = (x << 13u) | (x >> 19u);
    return x * 5u + 0xe6546b64u;
}

fn murmur3_id(lo: u32, hi: u32, seed: u32) -> u32 {
    var h = murmur_block(murmur_block(seed, lo), hi);
    h = h ^ 8u;
    h = h ^ (h >> 16u);
    h = h * 0x85ebca6bu;
    h = h ^ (h >> 13u);
    h = h * 0xc2b2ae35u;
    return h ^ (h >> 16u);
}
