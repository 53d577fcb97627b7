//! Pruned tables on the CPU path: absent rows read as zeros, memory shrinks. No GPU needed.

use edo::prune::{PrunedTable, ABSENT};
use edo::synth::embedding_table;
use edo::Lookup;
use edo::{Bags, Bounds, Error, Format, PackedTable, Pooling};

mod common;

#[test]
fn pruned_rows_read_as_zeros_and_kept_rows_as_before() {
    let (rows, dim) = (1000, 16);
    let data = embedding_table(rows, dim, 1);
    let keep: Vec<bool> = (0..rows).map(|r| r % 4 == 0).collect();
    for format in Format::ALL {
        let full = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let pruned = PrunedTable::quantize(format, &data, rows, dim, &keep).unwrap();
        assert_eq!(pruned.table().rows(), 250);
        let ids: Vec<u32> = (0..rows as u32).rev().collect();
        let got = pruned.gather(&ids, Bounds::Error).unwrap();
        let want = edo::cpu::gather(&full, &ids, Bounds::Error).unwrap();
        for (i, &id) in ids.iter().enumerate() {
            let row = &got[i * dim..(i + 1) * dim];
            if keep[id as usize] {
                assert_eq!(row, &want[i * dim..(i + 1) * dim], "{format} kept row {id}");
            } else {
                assert!(row.iter().all(|&x| x == 0.0), "{format} pruned row {id}");
            }
        }
        // A quarter of the rows plus a 4-byte remap per original row.
        assert_eq!(pruned.bytes(), full.bytes() / 4 + 4 * rows as u64);
        assert_eq!(pruned.unpruned_bytes(), full.bytes());
    }
}

#[test]
fn bags_over_pruned_tables_and_the_bounds_policy() {
    let (rows, dim) = (10, 2);
    let data: Vec<f32> = (0..rows * dim).map(|i| i as f32).collect();
    let keep = [true, false, true, true, false, true, true, true, true, true];
    let p = PrunedTable::quantize(Format::F32, &data, rows, dim, &keep).unwrap();
    assert_eq!(p.remap()[1], ABSENT);
    let idx = [0u32, 1, 2, 12];
    assert_eq!(p.bag(&Bags::new(&idx, &[0, 2]), Pooling::Sum, Bounds::Error), Err(Error::IdOutOfRange { index: 3, id: 12, rows }));
    let mean = p.bag(&Bags::new(&idx, &[0, 2]), Pooling::Mean, Bounds::Zero).unwrap();
    assert_eq!(mean, vec![0.0, 0.5, 2.0, 2.5], "an absent row counts as a zero row");
    let clamp = p.gather(&[12], Bounds::Clamp).unwrap();
    assert_eq!(clamp, vec![18.0, 19.0], "clamped to the last original row");
    let bad = PrunedTable::from_remap(PackedTable::quantize(Format::F32, &[1.0; 4], 2, 2).unwrap(), vec![0, 2]);
    assert!(matches!(bad, Err(Error::IdOutOfRange { index: 1, id: 2, rows: 2 })));
    let mut nan = data.clone();
    nan[7 * dim] = f32::NAN;
    assert!(matches!(PrunedTable::quantize(Format::Int8, &nan, rows, dim, &keep), Err(Error::NonFinite { row: 7, .. })));
}

#[test]
fn clamping_into_a_table_with_no_rows_is_an_error_not_a_panic() {
    let p = PrunedTable::from_remap(PackedTable::quantize(Format::F32, &[], 0, 2).unwrap(), vec![]).unwrap();
    assert!(matches!(p.gather(&[3], Bounds::Clamp), Err(Error::IdOutOfRange { index: 0, id: 3, rows: 0 })));
    assert_eq!(p.gather(&[3], Bounds::Zero).unwrap(), vec![0.0, 0.0]);
}

/// A table reordered by lookup frequency: every id still reads its own row (gathers bit for bit,
/// bags too), the most looked-up rows come first, and the table round-trips through an `.edo`
/// file with its id map — which every reader of plain tables refuses.
#[test]
fn reordered_tables_keep_their_ids_and_round_trip_through_files() {
    use edo::prune::{frequency_order, lookup_counts};
    let (rows, dim) = (3001, 20);
    let data = embedding_table(rows, dim, 6);
    // Popular rows scattered over the table: Zipf ranks through a fixed shuffle.
    let scatter: Vec<u32> = (0..rows as u32).map(|r| (r * 1237 + 11) % rows as u32).collect();
    let trace: Vec<u32> = edo::synth::zipf_ids(20_000, rows, 1.1, 4).iter().map(|&r| scatter[r as usize]).collect();
    let counts = lookup_counts(&trace, rows).unwrap();
    let order = frequency_order(&counts);
    assert!(order.windows(2).all(|w| (counts[w[0] as usize], std::cmp::Reverse(w[0])) >= (counts[w[1] as usize], std::cmp::Reverse(w[1]))));
    assert_eq!(order[0], scatter[0], "the hottest row first");
    for format in [Format::Int8, Format::F16, Format::Int4, Format::Q8_0, Format::BinaryScaled] {
        // Q8_0 needs whole 32-value blocks.
        let dim = if format == Format::Q8_0 { 32 } else { dim };
        let data: Vec<f32> = if dim == 20 { data.clone() } else { embedding_table(rows, dim, 6) };
        let full = PackedTable::quantize(format, &data, rows, dim).unwrap();
        let reordered = PrunedTable::reorder(&full, &order).unwrap();
        assert!(reordered.is_reordering());
        assert_eq!(reordered.table().row(0), full.row(order[0] as usize));
        let ids: Vec<u32> = (0..rows as u32).rev().chain(trace.iter().copied().take(500)).collect();
        assert_eq!(reordered.gather(&ids, Bounds::Error).unwrap(), edo::cpu::gather(&full, &ids, Bounds::Error).unwrap(), "{format}");
        let offsets: Vec<u32> = (0..=100u32).map(|b| b * 7).collect();
        let bags = Bags::new(&ids[..700], &offsets).include_last_offset(true);
        for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max] {
            assert_eq!(reordered.bag(&bags, pooling, Bounds::Error).unwrap(), full.bag(&bags, pooling, Bounds::Error).unwrap(), "{format} {pooling:?}");
        }
        assert_eq!(reordered.original_order().unwrap(), full);

        // The file: the same rows for the same ids after the round trip.
        let bytes = reordered.to_bytes(Some(4096), &Default::default()).unwrap();
        let back = PrunedTable::from_file_bytes(bytes.clone()).unwrap();
        assert_eq!(back, reordered, "{format}");
        assert!(matches!(edo::file::TableFile::from_bytes(bytes.clone()), Err(Error::Unsupported(edo::Unsupported::ReorderedTableFile))));
        // A plain table file opens as a reordering by the identity.
        let plain = PrunedTable::from_file_bytes(edo::file::TableFile::new(full.clone()).to_bytes()).unwrap();
        assert_eq!(plain.gather(&ids, Bounds::Error).unwrap(), edo::cpu::gather(&full, &ids, Bounds::Error).unwrap());
        // A damaged map is refused (its checksum), never read as a wrong row: its last entry
        // made a repeat of its first (the map is the last tensor), or two entries swapped, which
        // leaves a permutation.
        let n = bytes.len();
        let mut damaged = bytes.clone();
        damaged[n - 4..].copy_from_slice(&reordered.remap()[0].to_le_bytes());
        assert!(matches!(PrunedTable::from_file_bytes(damaged), Err(Error::BadFile { .. })), "{format}");
        let mut swapped = bytes.clone();
        let map = n - 4 * rows;
        swapped[map..map + 4].copy_from_slice(&reordered.remap()[1].to_le_bytes());
        swapped[map + 4..map + 8].copy_from_slice(&reordered.remap()[0].to_le_bytes());
        match PrunedTable::from_file_bytes(swapped) {
            Err(Error::BadFile { reason, .. }) => assert!(reason.contains("id map does not match its checksum"), "{reason}"),
            other => panic!("{format}: a swapped map read as {other:?}"),
        }
        // A damaged row is refused on open (its checksum), never read later as a wrong row.
        let mut damaged = bytes.clone();
        let at = n - 4 * rows - 1;
        damaged[at] ^= 0x40;
        assert!(matches!(PrunedTable::from_file_bytes(damaged), Err(Error::Checksum { .. })), "{format}");
    }

    // Bad input: typed errors.
    let full = PackedTable::quantize(Format::Int8, &data, rows, dim).unwrap();
    assert!(matches!(PrunedTable::reorder(&full, &order[1..]), Err(Error::ShapeMismatch { .. })));
    let mut twice = order.clone();
    twice[5] = twice[4];
    assert!(matches!(PrunedTable::reorder(&full, &twice), Err(Error::NotAPermutation { index: 5, .. })));
    let mut beyond = order.clone();
    beyond[9] = rows as u32;
    assert!(matches!(PrunedTable::reorder(&full, &beyond), Err(Error::NotAPermutation { index: 9, .. })));
    assert!(matches!(lookup_counts(&[1, 2, rows as u32], rows), Err(Error::IdOutOfRange { index: 2, .. })));
    let keep: Vec<bool> = (0..rows).map(|r| r % 2 == 0).collect();
    let pruned = PrunedTable::quantize(Format::Int8, &data, rows, dim, &keep).unwrap();
    assert!(!pruned.is_reordering());
    assert!(matches!(pruned.to_bytes(None, &Default::default()), Err(Error::ShapeMismatch { .. })));
    // A remap that repeats a stored row is no reordering, and is not stored as one.
    let twice = PrunedTable::from_remap(PackedTable::quantize(Format::Int8, &data[..2 * dim], 2, dim).unwrap(), vec![0, 0]).unwrap();
    assert!(!twice.is_reordering());
    assert!(matches!(twice.to_bytes(None, &Default::default()), Err(Error::NotAPermutation { index: 1, .. })));
}

/// The version marks a file with an id map: an old-version file with a map, or a new-version one
/// without, is malformed; the remote reader refuses a reordered file.
#[test]
fn an_id_map_and_its_version_come_together() {
    let (rows, dim) = (100, 8);
    let full = PackedTable::quantize(Format::Int8, &embedding_table(rows, dim, 2), rows, dim).unwrap();
    let order: Vec<u32> = (0..rows as u32).rev().collect();
    let bytes = PrunedTable::reorder(&full, &order).unwrap().to_bytes(None, &Default::default()).unwrap();
    let edit = |from: &str, to: &str| {
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header = std::str::from_utf8(&bytes[8..8 + n]).unwrap().trim_end().to_string();
        assert!(header.contains(from), "{from} not in {header}");
        let mut new = header.replace(from, to).into_bytes();
        new.resize(new.len().next_multiple_of(8), b' ');
        let mut out = (new.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&new);
        out.extend_from_slice(&bytes[8 + n..]);
        out
    };
    for bad in [edit("\"edo.version\":\"2\"", "\"edo.version\":\"1\""), edit("\"id_map\"", "\"id_mop\"")] {
        assert!(matches!(PrunedTable::from_file_bytes(bad), Err(Error::BadFile { .. })));
    }
    // The map's checksum is required.
    let e = PrunedTable::from_file_bytes(edit("\"edo.id_map_crc32\"", "\"x.id_map_crc32\"")).unwrap_err();
    assert!(matches!(e, Error::BadFile { .. }), "{e}");
    // A map that matches its checksums but is not a permutation (a writer's bug: two ids on one
    // row, one row on none) is refused by name.
    let (mut header, data) = common::split(&bytes).unwrap();
    let mut data = data.to_vec();
    let (a, b) = (header["id_map"]["data_offsets"][0].as_u64().unwrap() as usize, header["id_map"]["data_offsets"][1].as_u64().unwrap() as usize);
    data.copy_within(a..a + 4, a + 4);
    header["__metadata__"]["edo.id_map_crc32"] = crc32fast::hash(&data[a..b]).to_string().into();
    common::sign(&mut header).unwrap();
    match PrunedTable::from_file_bytes(common::join(&header, &data)) {
        Err(Error::BadFile { reason, .. }) => assert!(reason.contains("id map") && reason.contains("permutation"), "{reason}"),
        other => panic!("a map that is not a permutation read as {other:?}"),
    }
    assert!(matches!(PrunedTable::from_file_bytes(edit("\"edo.version\":\"2\"", "\"edo.version\":\"5\"")), Err(Error::UnsupportedVersion { .. })));
    struct Mem(Vec<u8>);
    impl edo::file::remote::RangeReader for Mem {
        async fn read(&self, range: std::ops::Range<u64>) -> Result<(Vec<u8>, u64), Error> {
            let len = self.0.len() as u64;
            Ok((self.0[range.start.min(len) as usize..range.end.min(len) as usize].to_vec(), len))
        }
        fn name(&self) -> String {
            "memory".into()
        }
    }
    let e = edo::block_on(edo::file::remote::RemoteTable::open(Mem(bytes))).err().expect("refused");
    assert!(e.to_string().contains("reordered"), "{e}");
}
