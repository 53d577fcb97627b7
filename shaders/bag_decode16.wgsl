// bag_decode16: decode16 as four decode4 reads, for the bag kernels whose decoder has no 16-byte
// read. They never set WIDE, but bag.wgsl's WIDE path names decode16.

fn decode16(base: u32, c: u32, rp: RowParams) -> Quads {
    return Quads(decode4(base, c, rp), decode4(base, c + 4u, rp), decode4(base, c + 8u, rp), decode4(base, c + 12u, rp));
}
