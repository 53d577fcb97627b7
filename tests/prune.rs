//! Pruned tables on the CPU path: absent rows read as zeros, memory shrinks. No GPU needed.

use edo::prune::{PrunedTable, ABSENT};
use edo::synth::embedding_table;
use edo::Lookup;
use edo::{Bags, Bounds, Error, Format, PackedTable, Pooling};

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
