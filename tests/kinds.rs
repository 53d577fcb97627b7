//! The host lookup interface beyond plain tables: mixed-precision and quotient-remainder tables
//! gather and bag through `Lookup` like their rows (edo-core's tests cover plain tables' bags).
//! No GPU needed.

use edo::synth::embedding_table;
use edo::{AnyTable, Bags, Bounds, Format, Lookup, MixedTable, PackedTable, Pooling};
#[test]
fn mixed_tables_gather_on_all_cores_and_bag_like_their_rows() {
    let (rows, dim) = (2000, 10);
    let data = embedding_table(rows, dim, 4);
    let hot: Vec<u32> = (0..rows as u32).filter(|r| r % 3 == 0).collect();
    let mixed = MixedTable::quantize(&data, rows, dim, &hot, Format::F16, Format::Int4).unwrap();
    // Enough ids that the gather splits over threads; each row from its own part.
    let ids: Vec<u32> = (0..5000u32).map(|i| (i * 7919) % rows as u32).collect();
    let got = mixed.gather(&ids, Bounds::Error).unwrap();
    let mut row = vec![0f32; dim];
    for (k, &id) in ids.iter().enumerate() {
        match mixed.locate(id as usize) {
            (true, i) => mixed.hot().decode_row_into(i, &mut row),
            (false, i) => mixed.cold().decode_row_into(i, &mut row),
        }
        assert_eq!(&got[k * dim..(k + 1) * dim], &row[..], "id {id}");
    }
    // Bags pool the gathered rows as the CPU bag pools an FP32 table of them.
    let (indices, offsets) = (vec![5u32, 6, 7, 5, 1999, 3], vec![0u32, 3, 3]);
    let bags = Bags::new(&indices, &offsets);
    let gathered = PackedTable::quantize(Format::F32, &mixed.gather(&indices, Bounds::Error).unwrap(), indices.len(), dim).unwrap();
    let iota: Vec<u32> = (0..indices.len() as u32).collect();
    for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max, Pooling::None] {
        let want = edo::cpu::embedding_bag(&gathered, &Bags::new(&iota, &offsets), pooling, Bounds::Error).unwrap();
        assert_eq!(mixed.bag(&bags, pooling, Bounds::Error).unwrap(), want, "{pooling:?}");
    }
    // Checked before any row is read.
    assert!(matches!(mixed.bag(&Bags::new(&[1, 2000], &[0]), Pooling::Sum, Bounds::Error), Err(edo::Error::IdOutOfRange { index: 1, id: 2000, .. })));
    assert!(matches!(mixed.bag(&Bags::new(&[1, 2], &[0, 3]), Pooling::Sum, Bounds::Zero), Err(edo::Error::BadOffsets { .. })));
    // The closed enum dispatches to the same code.
    let any: AnyTable = mixed.clone().into();
    assert_eq!(any.bag(&bags, Pooling::Mean, Bounds::Error).unwrap(), mixed.bag(&bags, Pooling::Mean, Bounds::Error).unwrap());
    assert_eq!(any.bytes(), mixed.bytes());
}

#[test]
fn quotient_remainder_bags_pool_the_combined_rows() {
    use edo::qr::{self, QrCombine};
    let dim = 6;
    let quotient = PackedTable::quantize(Format::F32, &embedding_table(10, dim, 1), 10, dim).unwrap();
    let remainder = PackedTable::quantize(Format::F32, &embedding_table(7, dim, 2), 7, dim).unwrap();
    let ids: Vec<u64> = vec![0, 69, 13, 70, 5, 41];
    let offsets = [0u32, 2, 2, 5];
    for combine in [QrCombine::Mult, QrCombine::Add, QrCombine::Concat] {
        let rows = qr::gather(&quotient, &remainder, &ids, combine, Bounds::Zero).unwrap();
        let width = rows.len() / ids.len();
        // Bag after bag by hand: [0, 69], [], [13, 70, 5], [41]; id 70 is past the 70 ids covered.
        let sum = |r: std::ops::Range<usize>| -> Vec<f32> { (0..width).map(|c| r.clone().map(|k| rows[k * width + c]).fold(0.0, |a, x| a + x)).collect() };
        let want: Vec<f32> = [sum(0..2), vec![0.0; width], sum(2..5), sum(5..6)].concat();
        assert_eq!(qr::bag(&quotient, &remainder, &Bags::new(&ids, &offsets), combine, Pooling::Sum, Bounds::Zero).unwrap(), want, "{combine:?}");
        if combine == QrCombine::Mult {
            assert!(rows[3 * width..4 * width].iter().all(|&x| x == 0.0), "id 70's quotient row reads as zeros under Zero");
        }
    }
    assert!(matches!(
        qr::bag(&quotient, &remainder, &Bags::new(&ids, &offsets), QrCombine::Mult, Pooling::Sum, Bounds::Error),
        Err(edo::Error::IdOutOfRange64 { index: 3, id: 70, .. })
    ));
}

/// Every kind answers 64-bit ids (`Request::gather_keys`, `bag_keys`): quotient-remainder tables
/// over their whole range, as `qr::gather` and `qr::bag` do for u32 and 64-bit ids alike; tables
/// of u32 ids as they answer the same ids, a key past them following the bounds policy.
#[test]
fn every_kind_answers_64_bit_ids() {
    use edo::qr::{self, QrCombine};
    use edo::{Element, HostRows, PrunedTable, QrTable, Request};
    let dim = 6;
    let quotient = PackedTable::quantize(Format::F16, &embedding_table(10, dim, 1), 10, dim).unwrap();
    let remainder = PackedTable::quantize(Format::F16, &embedding_table(7, dim, 2), 7, dim).unwrap();
    let (keys, offsets) = (vec![0u64, 69, 13, 70, 5, 41, 1 << 40], [0u32, 2, 2, 5]);
    let small: Vec<u32> = keys[..6].iter().map(|&k| k as u32).collect();
    for combine in [QrCombine::Mult, QrCombine::Add, QrCombine::Concat] {
        let kind = QrTable::new(quotient.clone(), remainder.clone(), combine).unwrap();
        assert_eq!((kind.rows(), kind.dim()), (70, if combine == QrCombine::Concat { 2 * dim } else { dim }));
        for bounds in [Bounds::Zero, Bounds::Clamp] {
            let want = qr::gather(&quotient, &remainder, &keys, combine, bounds).unwrap();
            let HostRows::F32(got) = kind.lookup(&Request::gather_keys(&keys, bounds)).unwrap() else { panic!("f32 rows") };
            assert_eq!(got, want, "{combine:?} {bounds:?}");
            assert_eq!(kind.gather(&small, bounds).unwrap(), qr::gather(&quotient, &remainder, &keys[..6], combine, bounds).unwrap());
            let bags = Bags::new(&keys[..6], &offsets);
            let want = qr::bag(&quotient, &remainder, &bags, combine, Pooling::Mean, bounds).unwrap();
            assert_eq!(kind.lookup(&Request::bag_keys(&bags, Pooling::Mean, bounds)).unwrap().into_f32(), want);
            assert_eq!(kind.bag(&Bags::new(&small, &offsets), Pooling::Mean, bounds).unwrap(), want);
            let f16 = kind.lookup(&Request::gather_keys(&keys, bounds).element(Element::F16)).unwrap();
            assert_eq!(f16, HostRows::F16(edo::cpu::to_f16(&qr::gather(&quotient, &remainder, &keys, combine, bounds).unwrap())));
        }
        assert!(matches!(kind.lookup(&Request::gather_keys(&keys, Bounds::Error)), Err(edo::Error::IdOutOfRange64 { index: 3, id: 70, max: 70 })));
    }
    // Tables of u32 ids: a key they hold reads its row; one past them (past u32 too) follows the
    // bounds policy, and under Error is named with its 64-bit value.
    let data = embedding_table(50, dim, 3);
    let table = PackedTable::quantize(Format::Int8, &data, 50, dim).unwrap();
    let pruned = PrunedTable::quantize(Format::Int8, &data, 50, dim, &(0..50).map(|r| r % 3 != 0).collect::<Vec<_>>()).unwrap();
    let kinds: [&dyn Lookup; 3] = [&table, &pruned, &AnyTable::from(table.clone())];
    let (keys, as_ids) = ([7u64, 49, 50, 1 << 33, 3], [7u32, 49, 50, u32::MAX, 3]);
    for kind in kinds {
        for bounds in [Bounds::Zero, Bounds::Clamp] {
            assert_eq!(kind.lookup(&Request::gather_keys(&keys, bounds)).unwrap(), kind.lookup(&Request::gather(&as_ids, bounds)).unwrap(), "{bounds:?}");
            let (bag_keys, bag_ids) = (Bags::new(&keys, &[0, 2]), Bags::new(&as_ids, &[0, 2]));
            assert_eq!(
                kind.lookup(&Request::bag_keys(&bag_keys, Pooling::Sum, bounds)).unwrap(),
                kind.lookup(&Request::bag(&bag_ids, Pooling::Sum, bounds)).unwrap()
            );
        }
        assert!(matches!(kind.lookup(&Request::gather_keys(&keys, Bounds::Error)), Err(edo::Error::IdOutOfRange64 { index: 2, id: 50, max: 50 })));
    }
}

/// One hashed table as a kind: every request as `hash::hashed_lookup` and `hash::hashed_bags`
/// answer it, u32 ids widened, whatever the bounds policy; `Pooling::None` refused by name.
#[test]
fn a_hashed_table_answers_every_request() {
    use edo::hash::{self, HashSpec};
    use edo::{Element, HashedTable, HostRows, Request};
    let dim = 12;
    let keys: Vec<u64> = vec![7, 1 << 40, 3, 99_999_999_999, 3, 0, 512];
    let small: Vec<u32> = vec![7, 3, 0, 512, 4_000_000_000];
    let offsets = [0u32, 3, 3, 6];
    for k in [1, 2] {
        let spec = HashSpec::new(211, k).with_hot(vec![7, 1 << 40]);
        let table = PackedTable::quantize(Format::Int8, &embedding_table(spec.rows(), dim, 5), spec.rows(), dim).unwrap();
        let kind = HashedTable::new(table.clone(), spec.clone()).unwrap();
        assert_eq!((kind.rows(), kind.dim()), (usize::MAX, dim));
        for bounds in [Bounds::Error, Bounds::Zero, Bounds::Clamp] {
            let want = hash::hashed_lookup(&table, &spec, &keys).unwrap();
            assert_eq!(kind.lookup(&Request::gather_keys(&keys, bounds)).unwrap(), HostRows::F32(want.clone()), "k {k} {bounds:?}");
            let wide: Vec<u64> = small.iter().map(|&i| u64::from(i)).collect();
            assert_eq!(kind.gather(&small, bounds).unwrap(), hash::hashed_lookup(&table, &spec, &wide).unwrap());
            let f16 = kind.lookup(&Request::gather_keys(&keys, bounds).element(Element::F16)).unwrap();
            assert_eq!(f16, HostRows::F16(edo::cpu::to_f16(&want)));
            // Mean and max over several hashes of an id are refused by name, here as there.
            for pooling in [Pooling::Sum, Pooling::Mean, Pooling::Max, Pooling::None] {
                let bags = Bags::new(&keys, &offsets);
                let want = hash::hashed_bags(&[&table], std::slice::from_ref(&spec), 4, &bags, pooling, edo::Layout::Concat);
                let got = kind.lookup(&Request::bag_keys(&bags, pooling, bounds)).map(HostRows::into_f32);
                assert_eq!(got, want, "k {k} {pooling:?}");
                assert_eq!(got.is_ok(), pooling == Pooling::Sum || (k == 1 && pooling != Pooling::None), "k {k} {pooling:?}: {got:?}");
            }
        }
    }
}
