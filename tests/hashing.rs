//! Hashing: MurmurHash3 bit-exact with the `mmh3` package (reference vectors made by
//! scripts/fixtures/mmh3_vectors.py), the hashing trick with hot ids, and quotient-remainder lookups on the
//! CPU path. No GPU needed.

use edo::hash::{hash_id, hash_str, hashed_bags, hashed_bags_into, hashed_lookup, HashSpec, HashedBags};
use edo::qr::{self, qr_split, QrCombine};
use edo::{Bounds, Error, Format, Layout, PackedTable, Pooling};

#[test]
fn murmur3_matches_the_mmh3_package_bit_for_bit() {
    let text = include_str!("data/mmh3_vectors.tsv");
    let mut checked = 0;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let (seed, want): (u32, u32) = (f[2].parse().unwrap(), f[3].parse().unwrap());
        let got = match f[0] {
            "u64" => hash_id(f[1].parse().unwrap(), seed),
            "str" => hash_str(&serde_json::from_str::<String>(f[1]).unwrap(), seed),
            other => panic!("unknown kind {other}"),
        };
        assert_eq!(got, want, "{line}");
        checked += 1;
    }
    assert!(checked > 400, "the reference file has {checked} vectors");
    // hash_id is the byte-wise hash of the id's little-endian bytes.
    for id in [0u64, 7, u64::MAX, 0x0123_4567_89ab_cdef] {
        assert_eq!(hash_id(id, 99), edo::hash::murmur3_x86_32(&id.to_le_bytes(), 99));
    }
}

/// A one-column table whose row r holds r: a lookup then returns the sum of the rows it read,
/// exactly (integers below 2²⁴ are exact in f32).
fn row_number_table(rows: usize) -> PackedTable {
    let data: Vec<f32> = (0..rows).map(|r| r as f32).collect();
    PackedTable::quantize(Format::F32, &data, rows, 1).unwrap()
}

#[test]
fn hashed_lookup_sums_k_buckets_and_hot_ids_own_their_rows() {
    let ids: Vec<u64> = vec![0, 1, 12345678901234, u64::MAX, 77, 5];
    for k in 1..=8u32 {
        let spec = HashSpec::new(1000, k).with_hot(vec![77, 12345678901234]);
        let table = row_number_table(spec.rows());
        let got = hashed_lookup(&table, &spec, &ids).unwrap();
        for (i, &id) in ids.iter().enumerate() {
            let want = match id {
                12345678901234 => 1001.0, // hot id #1 → row buckets + 1
                77 => 1000.0,
                _ => (0..k).map(|s| (hash_id(id, s) % 1000) as f32).sum(),
            };
            assert_eq!(got[i], want, "k {k} id {id}");
        }
    }
}

#[test]
fn hash_specs_are_checked() {
    let table = row_number_table(10);
    assert!(matches!(hashed_lookup(&table, &HashSpec::new(10, 9), &[1]), Err(Error::LimitExceeded { .. })));
    assert!(matches!(hashed_lookup(&table, &HashSpec::new(10, 0), &[1]), Err(Error::LimitExceeded { .. })));
    assert!(matches!(hashed_lookup(&table, &HashSpec::new(0, 1), &[1]), Err(Error::Unsupported { .. })));
    assert!(matches!(hashed_lookup(&table, &HashSpec::new(9, 1), &[1]), Err(Error::ShapeMismatch { expected: 9, actual: 10, .. })));
    let dup = HashSpec::new(8, 1).with_hot(vec![3, 3]);
    assert_eq!(hashed_lookup(&table, &dup, &[1]), Err(Error::DuplicateHotId { id: 3 }));
}

#[test]
fn hashed_bags_pool_ids_like_rows() {
    let spec = HashSpec::new(50, 2);
    let table = PackedTable::quantize(Format::Int8, &edo::synth::embedding_table(50, 8, 1), 50, 8).unwrap();
    let ids = [10u64, 20, 30, 40, 50];
    let per_id = hashed_lookup(&table, &spec, &ids).unwrap();
    let bags = hashed_bags(&[&table], std::slice::from_ref(&spec), 2, &HashedBags::new(&ids, &[0, 2]), Pooling::Sum, Layout::Concat).unwrap();
    for c in 0..8 {
        let want0 = per_id[c] + per_id[8 + c];
        let want1 = per_id[16 + c] + per_id[24 + c] + per_id[32 + c];
        assert!((bags[c] - want0).abs() < 1e-5 && (bags[8 + c] - want1).abs() < 1e-5);
    }
    // The k rows of an id are summed, so mean and max over k > 1 would mix two meanings.
    let err = hashed_bags(&[&table], &[spec], 2, &HashedBags::new(&ids, &[0, 2]), Pooling::Mean, Layout::Concat);
    assert!(matches!(err, Err(Error::Unsupported { .. })));
    let one = HashSpec::new(50, 1);
    assert!(hashed_bags(&[&table], &[one], 2, &HashedBags::new(&ids, &[0, 2]), Pooling::Max, Layout::Concat).is_ok());
}

#[test]
fn quotient_remainder_follows_dlrm() {
    assert_eq!(qr_split(1_000_003, 1000), (1000, 3));
    assert_eq!(qr_split(u64::MAX, 7), (u64::MAX / 7, (u64::MAX % 7) as u32));
    let (n, m) = (10_000u64, 100u32);
    let q_rows = n.div_ceil(m as u64) as usize;
    let qt = row_number_table(q_rows);
    let rt = PackedTable::quantize(Format::F32, &(0..m).map(|r| r as f32 + 0.5).collect::<Vec<_>>(), m as usize, 1).unwrap();
    let ids = [0u64, 99, 100, 9_999, 4_321];
    let mult = qr::gather(&qt, &rt, &ids, QrCombine::Mult, Bounds::Error).unwrap();
    let add = qr::gather(&qt, &rt, &ids, QrCombine::Add, Bounds::Error).unwrap();
    let concat = qr::gather(&qt, &rt, &ids, QrCombine::Concat, Bounds::Error).unwrap();
    for (i, &id) in ids.iter().enumerate() {
        let (q, r) = ((id / 100) as f32, (id % 100) as f32 + 0.5);
        assert_eq!((mult[i], add[i]), (q * r, q + r), "id {id}");
        assert_eq!((concat[2 * i], concat[2 * i + 1]), (q, r));
    }
    assert_eq!(qr::gather(&qt, &rt, &[5, 10_000], QrCombine::Mult, Bounds::Error), Err(Error::IdOutOfRange64 { index: 1, id: 10_000, max: 10_000 }));
    let z = qr::gather(&qt, &rt, &[10_050], QrCombine::Add, Bounds::Zero).unwrap();
    assert_eq!(z, vec![50.5], "a zero quotient row plus the remainder row");
    let c = qr::gather(&qt, &rt, &[u64::MAX], QrCombine::Concat, Bounds::Clamp).unwrap();
    assert_eq!(c[0], (q_rows - 1) as f32);
}

#[test]
fn many_hashed_ids_over_several_tables_read_exactly_their_rows() {
    // Enough bags that the CPU path's workers split them, bags shorter and longer than the runs
    // of 8 ids its walk hashes at a time, one hash or several, in both layouts (a worker's walk
    // goes over one table's bags or, for concatenated rows, over every table's bags of its
    // samples); tables whose row r holds r make each bag's sum the sum of the rows its ids read,
    // which per-id `rows_of` says.
    let specs = [
        HashSpec::new(997, 1).with_hot(vec![5, 9, 1 << 40]),
        HashSpec { buckets: 4093, seeds: vec![7, 11, 13], hot: (100..140).collect() },
        HashSpec::new(1, 2).with_hot(vec![3]),
        HashSpec::new(65_521, 2),
        HashSpec::new(5003, 8).with_hot(vec![42, 7]),
    ];
    let tables: Vec<PackedTable> = specs.iter().map(|s| row_number_table(s.rows())).collect();
    let refs: Vec<&PackedTable> = tables.iter().collect();
    let batch = 6000;
    let mut rng = edo::synth::Rng::new(3);
    let (mut ids, mut offsets) = (Vec::new(), Vec::new());
    for _ in 0..specs.len() * batch {
        offsets.push(ids.len() as u32);
        for _ in 0..rng.below(21) {
            ids.push(match rng.below(3) {
                0 => rng.below(150) as u64,
                1 => 1 << 40,
                _ => rng.next_u64(),
            });
        }
    }
    offsets.push(ids.len() as u32);
    let bags = HashedBags::new(&ids, &offsets).include_last_offset(true);
    let per_table = hashed_bags(&refs, &specs, batch, &bags, Pooling::Sum, Layout::PerTable).unwrap();
    let concat = hashed_bags(&refs, &specs, batch, &bags, Pooling::Sum, Layout::Concat).unwrap();
    let mut into = vec![f32::NAN; concat.len()];
    hashed_bags_into(&refs, &specs, batch, &bags, Pooling::Sum, Layout::Concat, &mut into).unwrap();
    assert_eq!(into, concat, "into a caller's buffer");
    let mut long = vec![f32::NAN; concat.len() + 1];
    assert!(matches!(hashed_bags_into(&refs, &specs, batch, &bags, Pooling::Sum, Layout::Concat, &mut long), Err(Error::ShapeMismatch { .. })));
    assert!(long.iter().all(|x| x.is_nan()), "a refused call writes nothing");
    let mut rows = Vec::new();
    for (t, spec) in specs.iter().enumerate() {
        let map = spec.validate().unwrap();
        for b in 0..batch {
            let bag = &ids[offsets[t * batch + b] as usize..offsets[t * batch + b + 1] as usize];
            let mut want = 0f64;
            for &id in bag {
                spec.rows_of(&map, id, &mut rows);
                want += rows.iter().map(|&r| r as f64).sum::<f64>();
            }
            assert_eq!(per_table[t * batch + b] as f64, want, "table {t}, bag {b}, per table");
            assert_eq!(concat[b * specs.len() + t] as f64, want, "table {t}, bag {b}, concatenated");
        }
    }
}
