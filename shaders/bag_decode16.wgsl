// bag_decode16: decode16 as four decode4 reads, for the kernels whose decoder has no 16-byte read:
// the bags that never set WIDE (bag.wgsl's WIDE path names decode16), and a 16-byte kernel asked
// for a format without 16-byte reads (ShaderId::source), which then reads words.

fn decode16(base: u32, c: u32, rp: RowParams) -> Quads {
    return Quads(decode4(base, c, rp), decode4(base, c + 4u, rp), decode4(base, c + 8u, rp), decode4(base, c + 12u, rp));
}
