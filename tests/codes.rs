//! Centred and ITQ binary codes (`search::CodeTransform`): what they keep of the neighbours, the
//! rotation's properties, their round trip through `.edo` files, and bad input.

use edo::file::TableFile;
use edo::search::{self, CodeTransform, ItqOptions};
use edo::synth::Rng;
use edo::{Error, Format, PackedTable};

/// Rows whose values are not centred on zero and whose columns differ in spread and are
/// correlated: a shared offset, a few strong directions mixed into every column, and noise.
fn skewed_rows(rows: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let directions: Vec<Vec<f32>> = (0..6).map(|_| (0..dim).map(|_| rng.normal()).collect()).collect();
    let offset: Vec<f32> = (0..dim).map(|c| 0.8 + 0.4 * (c % 3) as f32).collect();
    let mut out = Vec::with_capacity(rows * dim);
    for _ in 0..rows {
        let weights: Vec<f32> = (0..directions.len()).map(|i| rng.normal() * (3.0 - 0.4 * i as f32)).collect();
        for c in 0..dim {
            let mixed: f32 = directions.iter().zip(&weights).map(|(d, w)| d[c] * w).sum();
            out.push(offset[c] + 0.3 * mixed + 0.2 * rng.normal());
        }
    }
    out
}

fn normalised(mut v: Vec<f32>, dim: usize) -> Vec<f32> {
    v.chunks_exact_mut(dim).for_each(edo::synth::normalize);
    v
}

fn recall_at_10(codes: &PackedTable, query_codes: &PackedTable, truth: &search::Scored) -> f64 {
    let found = search::hamming_topk(codes, query_codes, 10).unwrap();
    search::recall(&found.ids, found.k, &truth.ids, truth.k, 10)
}

#[test]
fn centred_and_itq_codes_keep_more_neighbours_than_signs() {
    let (rows, dim, nq) = (4000, 48, 100);
    let all = normalised(skewed_rows(rows + nq, dim, 3), dim);
    let (corpus, queries) = all.split_at(rows * dim);
    let truth = search::dot_topk(&PackedTable::quantize(Format::F32, corpus, rows, dim).unwrap(), queries, 10).unwrap();
    let signs = recall_at_10(&PackedTable::quantize(Format::Binary, corpus, rows, dim).unwrap(), &search::binarize(queries, dim).unwrap(), &truth);
    let centred = CodeTransform::centered(corpus, dim).unwrap();
    let itq = CodeTransform::itq(corpus, dim, &ItqOptions::default()).unwrap();
    let r_centred = recall_at_10(&centred.encode(corpus).unwrap(), &centred.encode(queries).unwrap(), &truth);
    let r_itq = recall_at_10(&itq.encode(corpus).unwrap(), &itq.encode(queries).unwrap(), &truth);
    eprintln!("recall@10: signs {signs:.3}, centred {r_centred:.3}, itq {r_itq:.3}");
    assert!(r_centred > signs + 0.05, "centring: {r_centred} vs signs {signs}");
    assert!(r_itq > r_centred, "itq: {r_itq} vs centred {r_centred}");

    // Rescoring with the original rows (INT8) through the transform: better still, and equal to
    // rescoring the candidates found by hand.
    let int8 = PackedTable::quantize(Format::Int8, corpus, rows, dim).unwrap();
    let codes = itq.encode(corpus).unwrap();
    let rescored = search::search_rescored_with(&codes, Some(&itq), queries, &int8, 10, 4).unwrap();
    let candidates = search::hamming_topk(&codes, &itq.encode(queries).unwrap(), 40).unwrap();
    assert_eq!(rescored, search::rescore(queries, &candidates, &int8, 10).unwrap());
    assert!(search::recall(&rescored.ids, rescored.k, &truth.ids, truth.k, 10) > r_itq);
    // Rescoring with the codes themselves (asymmetric scores) scores the transformed queries,
    // which live where the codes' ±1 values do.
    let asym = search::search_rescored_with(&codes, Some(&itq), queries, &codes, 10, 4).unwrap();
    assert_eq!(asym, search::rescore(&itq.apply(queries).unwrap(), &candidates, &codes, 10).unwrap());
    assert!(search::recall(&asym.ids, asym.k, &truth.ids, truth.k, 10) > r_itq - 0.02);
    // Without the transform the same call searches with plain signs: another answer.
    assert_ne!(search::search_rescored_with(&codes, None, queries, &int8, 10, 4).unwrap().ids, rescored.ids);
}

#[test]
fn the_itq_rotation_is_orthogonal_deterministic_and_applied_as_stored() {
    let (rows, dim) = (700, 20);
    let data = skewed_rows(rows, dim, 9);
    let options = ItqOptions { iterations: 20, ..Default::default() };
    let a = CodeTransform::itq(&data, dim, &options).unwrap();
    assert_eq!(a, CodeTransform::itq(&data, dim, &options).unwrap(), "same rows and seed, same rotation");
    assert_ne!(a, CodeTransform::itq(&data, dim, &ItqOptions { seed: 7, ..options.clone() }).unwrap());
    assert_eq!(a.kind(), "itq");
    let r = a.rotation().unwrap();
    for i in 0..dim {
        for j in 0..dim {
            let dot: f32 = (0..dim).map(|c| r[i * dim + c] * r[j * dim + c]).sum();
            assert!((dot - if i == j { 1.0 } else { 0.0 }).abs() < 1e-5, "R·Rᵀ[{i}][{j}] = {dot}");
        }
    }
    // The mean is every row's, not only the training sample's.
    let few = CodeTransform::itq(&data, dim, &ItqOptions { max_train_rows: Some(50), ..options }).unwrap();
    for c in 0..dim {
        let mean = (0..rows).map(|r| data[r * dim + c] as f64).sum::<f64>() / rows as f64;
        assert!((few.mean()[c] as f64 - mean).abs() < 1e-5);
        assert_eq!(few.mean()[c], a.mean()[c]);
    }
    // apply is (x − mean)·R, row by row.
    let y = a.apply(&data[..3 * dim]).unwrap();
    for row in 0..3 {
        for c in 0..dim {
            let want: f32 = (0..dim).map(|j| (data[row * dim + j] - a.mean()[j]) * r[j * dim + c]).sum();
            assert!((y[row * dim + c] - want).abs() < 1e-4, "{} vs {want}", y[row * dim + c]);
        }
    }
    // A stored transform comes back as it was given.
    assert_eq!(CodeTransform::from_parts(a.mean().to_vec(), Some(r.to_vec())).unwrap(), a);
}

#[test]
fn rows_that_span_fewer_directions_than_values_still_train() {
    // A constant column and a column equal to another: the centred rows span dim − 2 directions.
    let (rows, dim) = (400, 12);
    let mut data = skewed_rows(rows, dim, 4);
    for r in 0..rows {
        data[r * dim + 3] = 0.5;
        data[r * dim + 7] = data[r * dim + 2];
    }
    let t = CodeTransform::itq(&data, dim, &ItqOptions { iterations: 10, ..Default::default() }).unwrap();
    let codes = t.encode(&data).unwrap();
    assert_eq!((codes.rows(), codes.dim(), codes.format()), (rows, dim, Format::Binary));
}

#[test]
fn codes_with_a_transform_round_trip_through_edo_files() {
    let (rows, dim, nq) = (1500, 40, 13);
    let all = skewed_rows(rows + nq, dim, 11);
    let (corpus, queries) = all.split_at(rows * dim);
    let int8 = PackedTable::quantize(Format::Int8, corpus, rows, dim).unwrap();
    for t in [CodeTransform::centered(corpus, dim).unwrap(), CodeTransform::itq(corpus, dim, &ItqOptions { iterations: 15, ..Default::default() }).unwrap()] {
        let codes = t.encode(corpus).unwrap();
        let bytes = TableFile::new(codes.clone()).with_code_transform(t.clone()).unwrap().to_bytes();
        let text = String::from_utf8_lossy(&bytes[..2000]).into_owned();
        assert!(text.contains("\"edo.version\":\"3\""), "{text}");
        let back = TableFile::from_bytes(bytes.clone()).unwrap();
        assert_eq!(back.code_transform(), Some(&t));
        assert_eq!(back.table().words(), codes.words());
        back.verify().unwrap();
        let want = search::search_rescored_with(&codes, Some(&t), queries, &int8, 7, 3).unwrap();
        assert_eq!(search::search_rescored_with(back.table(), back.code_transform(), queries, &int8, 7, 3).unwrap(), want);

        // Tampering with the transform's bytes is caught by its checksum.
        let mut bad = bytes.clone();
        let mean_bytes: Vec<u8> = t.mean().iter().flat_map(|x| x.to_le_bytes()).collect();
        let pos = bad.windows(mean_bytes.len()).position(|w| w == mean_bytes.as_slice()).expect("the mean is stored as little-endian f32");
        bad[pos] ^= 1;
        let e = TableFile::from_bytes(bad).unwrap_err();
        assert!(matches!(e, Error::BadFile { .. }) && e.to_string().contains("checksum"), "{e}");
    }
    // A plain file stays version 1 and has no transform.
    let plain = TableFile::new(PackedTable::quantize(Format::Binary, corpus, rows, dim).unwrap()).to_bytes();
    assert!(String::from_utf8_lossy(&plain[..1000]).contains("\"edo.version\":\"1\""));
    assert_eq!(TableFile::from_bytes(plain).unwrap().code_transform(), None);
}

/// Replaces the first `from` in the file's header with `to` (same length keeps the data where
/// it is).
fn edit(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = bytes.to_vec();
    let pos = out.windows(from.len()).position(|w| w == from.as_bytes()).unwrap_or_else(|| panic!("{from} not in the header"));
    out[pos..pos + to.len()].copy_from_slice(to.as_bytes());
    out
}

#[test]
fn bad_transforms_and_files_are_refused_with_typed_errors() {
    let dim = 8;
    let data = skewed_rows(50, dim, 5);
    // NaN in the training rows, named by row and column.
    let mut nan = data.clone();
    nan[3 * dim + 5] = f32::NAN;
    assert!(matches!(CodeTransform::itq(&nan, dim, &ItqOptions::default()), Err(Error::NonFinite { row: 3, col: 5, .. })));
    assert!(matches!(CodeTransform::centered(&nan, dim), Err(Error::NonFinite { row: 3, col: 5, .. })));
    // Too few rows to train a rotation; none to centre on.
    let e = CodeTransform::itq(&data[..dim * dim], dim, &ItqOptions::default()).unwrap_err();
    assert!(matches!(e, Error::TooFewRows { rows: 8, needed: 9, .. }), "{e}");
    assert!(matches!(CodeTransform::centered(&[], dim), Err(Error::TooFewRows { .. })));
    assert!(matches!(CodeTransform::itq(&vec![0.5; 1025], 1025, &ItqOptions::default()), Err(Error::LimitExceeded { max: 1024, .. })));
    assert!(matches!(CodeTransform::centered(&data[..dim + 1], dim), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(CodeTransform::centered(&data, 0), Err(Error::ZeroDim)));
    // A rotation of the wrong shape, or not orthogonal.
    let t = CodeTransform::itq(&data, dim, &ItqOptions { iterations: 5, ..Default::default() }).unwrap();
    let r = t.rotation().unwrap().to_vec();
    assert!(matches!(CodeTransform::from_parts(t.mean().to_vec(), Some(r[..dim * (dim - 1)].to_vec())), Err(Error::ShapeMismatch { .. })));
    let mut scaled = r.clone();
    scaled.iter_mut().for_each(|x| *x *= 1.1);
    assert!(matches!(CodeTransform::from_parts(t.mean().to_vec(), Some(scaled)), Err(Error::NotOrthogonal { .. })));
    // Any orthogonal matrix is a rotation here: a permutation with a sign flipped.
    let mut perm = vec![0f32; dim * dim];
    (0..dim).for_each(|i| perm[i * dim + (i + 3) % dim] = if i == 2 { -1.0 } else { 1.0 });
    assert!(CodeTransform::from_parts(t.mean().to_vec(), Some(perm)).is_ok());
    let mut inf = r.clone();
    inf[10] = f32::INFINITY;
    assert!(matches!(CodeTransform::from_parts(t.mean().to_vec(), Some(inf)), Err(Error::NonFinite { row: 1, col: 2, .. })));
    assert!(matches!(CodeTransform::from_parts(Vec::new(), None), Err(Error::ZeroDim)));
    // Queries of the wrong width, NaN queries, a transform of another dim, k = 0.
    let codes = t.encode(&data).unwrap();
    let int8 = PackedTable::quantize(Format::Int8, &data, 50, dim).unwrap();
    assert!(matches!(t.encode(&data[..dim + 3]), Err(Error::ShapeMismatch { .. })));
    search::search_rescored_with(&codes, Some(&t), &nan[..2 * dim], &int8, 3, 2).unwrap();
    assert!(matches!(search::search_rescored_with(&codes, Some(&t), &nan[3 * dim..4 * dim], &int8, 3, 2), Err(Error::NonFinite { .. })));
    let other = CodeTransform::centered(&skewed_rows(10, dim + 1, 1), dim + 1).unwrap();
    assert!(matches!(search::search_rescored_with(&codes, Some(&other), &data[..dim], &int8, 3, 2), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(search::search_rescored_with(&codes, Some(&t), &data[..dim], &int8, 0, 2), Err(Error::Unsupported { .. })));
    // Only binary codes carry a transform, of their own dim.
    assert!(matches!(TableFile::new(int8.clone()).with_code_transform(t.clone()), Err(Error::Unsupported(edo::Unsupported::CodeTransformOfNonBinary))));
    assert!(matches!(TableFile::new(codes.clone()).with_code_transform(other), Err(Error::ShapeMismatch { .. })));
    let scaled_codes = PackedTable::quantize(Format::BinaryScaled, &data, 50, dim).unwrap();
    assert!(matches!(TableFile::new(scaled_codes).with_code_transform(t.clone()), Err(Error::Unsupported(_))));

    // Files: a transform in a version 1 file, a version 3 file without one, a newer version.
    let bytes = TableFile::new(codes.clone()).with_code_transform(t.clone()).unwrap().to_bytes();
    let v1 = edit(&bytes, "\"edo.version\":\"3\"", "\"edo.version\":\"1\"");
    assert!(matches!(TableFile::from_bytes(v1), Err(Error::BadFile { .. })));
    let no_mean = edit(&bytes, "\"codes.mean\"", "\"codes.xxxx\"");
    assert!(matches!(TableFile::from_bytes(no_mean), Err(Error::BadFile { .. })));
    let v5 = edit(&bytes, "\"edo.version\":\"3\"", "\"edo.version\":\"5\"");
    assert!(matches!(TableFile::from_bytes(v5), Err(Error::UnsupportedVersion { .. })));
    let plain = TableFile::new(codes).to_bytes();
    let v3 = edit(&plain, "\"edo.version\":\"1\"", "\"edo.version\":\"3\"");
    assert!(matches!(TableFile::from_bytes(v3), Err(Error::BadFile { .. })));
}
