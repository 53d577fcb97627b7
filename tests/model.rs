//! Static embedding models against the reference: model2vec 0.10 and tokenizers 0.22.1 made the
//! fixtures in `tests/data/models` (`scripts/make_model_fixtures.py`): four small models saved by
//! model2vec itself — WordPiece, BPE with byte fallback (f16 table), Unigram with a vocabulary
//! quantized to 40 rows plus per-token weights, and an int8 table — and the token ids and vectors
//! model2vec gives for a list of hard texts.

use edo::model::StaticModel;
use edo::{Error, Format};

fn dir(name: &str) -> String {
    format!("{}/tests/data/models/{name}", env!("CARGO_MANIFEST_DIR"))
}

struct Expected {
    texts: Vec<String>,
    models: serde_json::Value,
}

fn expected() -> Expected {
    let e: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir("expected.json")).unwrap()).unwrap();
    assert_eq!((e["model2vec"].as_str(), e["tokenizers"].as_str()), (Some("0.10.0"), Some("0.22.1")), "the pinned references");
    Expected { texts: e["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect(), models: e["models"].clone() }
}

const MODELS: [&str; 4] = ["wordpiece", "bpe_f16", "unigram_vq", "wordpiece_int8"];

#[test]
fn tokens_equal_model2vecs_for_every_tokenizer_kind() {
    let e = expected();
    let texts: Vec<&str> = e.texts.iter().map(String::as_str).collect();
    for name in MODELS {
        let model = StaticModel::from_dir(dir(name)).unwrap();
        let got = model.tokenize(&texts).unwrap();
        for (i, text) in texts.iter().enumerate() {
            let want: Vec<u32> = e.models[name]["tokens"][i].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
            assert_eq!(got[i], want, "{name}: text {i} {text:?}");
        }
    }
}

#[test]
fn vectors_equal_model2vecs_within_1e_5() {
    let e = expected();
    let texts: Vec<&str> = e.texts.iter().map(String::as_str).collect();
    for name in MODELS {
        let model = StaticModel::from_dir(dir(name)).unwrap();
        let m = &e.models[name];
        assert_eq!(model.dim(), m["dim"].as_u64().unwrap() as usize, "{name}");
        assert_eq!(model.normalize(), m["normalize"].as_bool().unwrap(), "{name}");
        let got = model.encode(&texts).unwrap();
        let want: Vec<f32> = m["vectors"].as_array().unwrap().iter().flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32)).collect();
        assert_eq!(got.len(), want.len(), "{name}");
        // model2vec pools an f16 table in float32 and returns the means rounded to f16: within half
        // an f16 ulp of edo's f32 means. Every other table: 1e-5.
        let f16 = std::fs::read_to_string(format!("{}/config.json", dir(name))).unwrap().contains("\"float16\"");
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            let tolerance = if f16 { b.abs() * 2f32.powi(-11) + 1e-5 } else { 1e-5 };
            assert!((a - b).abs() <= tolerance, "{name}: value {i}: edo {a}, model2vec {b}");
        }
        // The empty text is a zero vector.
        assert!(got[..model.dim()].iter().all(|&x| x == 0.0), "{name}");
    }
}

#[test]
fn int8_tables_keep_the_vectors() {
    let e = expected();
    let texts: Vec<&str> = e.texts.iter().map(String::as_str).collect();
    for name in MODELS {
        let model = StaticModel::from_dir(dir(name)).unwrap();
        let exact = model.encode(&texts).unwrap();
        let int8 = model.quantize(Format::Int8).unwrap();
        assert!(int8.table().bytes() < model.table().bytes() / 2, "{name}");
        let got = int8.encode(&texts).unwrap();
        let dim = model.dim();
        let cosines: Vec<f64> = exact
            .chunks_exact(dim)
            .zip(got.chunks_exact(dim))
            .filter(|(a, _)| a.iter().any(|&x| x != 0.0))
            .map(|(a, b)| {
                let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
                let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
                let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
                dot / (na * nb)
            })
            .collect();
        let mean = cosines.iter().sum::<f64>() / cosines.len() as f64;
        assert!(mean >= 0.9999, "{name}: mean cosine {mean}");
    }
}

#[test]
fn bad_models_are_typed_errors() {
    let config = std::fs::read(format!("{}/config.json", dir("wordpiece"))).unwrap();
    let tokenizer = std::fs::read(format!("{}/tokenizer.json", dir("wordpiece"))).unwrap();
    let table = std::fs::read(format!("{}/model.safetensors", dir("wordpiece"))).unwrap();
    assert!(StaticModel::from_bytes(&config, &tokenizer, &table).is_ok());
    // A truncated table, a tokenizer that is not JSON, a table of another vocabulary.
    assert!(matches!(StaticModel::from_bytes(&config, &tokenizer, &table[..table.len() / 2]), Err(Error::BadFile { .. })));
    assert!(matches!(StaticModel::from_bytes(&config, b"{not json", &table), Err(Error::BadFile { .. })));
    let other = std::fs::read(format!("{}/model.safetensors", dir("bpe_f16"))).unwrap();
    assert!(matches!(StaticModel::from_bytes(&config, &tokenizer, &other), Err(Error::ShapeMismatch { .. })));
    // An unsupported tokenizer model names itself.
    let mut json: serde_json::Value = serde_json::from_slice(&tokenizer).unwrap();
    json["model"]["type"] = "SomethingElse".into();
    assert!(matches!(StaticModel::from_bytes(&config, &serde_json::to_vec(&json).unwrap(), &table), Err(Error::Unsupported { .. })));
    // Without a max_length nothing cuts a text: one past the byte limit is refused.
    let uncut = StaticModel::from_bytes(br#"{"max_length": null, "normalize": true}"#, &tokenizer, &table).unwrap();
    let huge = "word ".repeat(edo::model::MAX_TEXT_BYTES / 5 + 1);
    assert!(matches!(uncut.encode(&["fine", &huge]), Err(Error::LimitExceeded { what: "bytes of one text", .. })));
    // With one, the cut comes first and the text is fine.
    assert_eq!(StaticModel::from_bytes(&config, &tokenizer, &table).unwrap().encode(&[&huge]).unwrap().len(), 16);
    // A missing folder names the file.
    assert!(matches!(StaticModel::from_dir("/nonexistent/model"), Err(Error::Io { .. })));
}

/// WordLlama's real model (its PyPI wheel's 32000 × 256 f16 table and Llama-2 tokenizer) against
/// WordLlama's own vectors: `scripts/wordllama_reference.sh` writes them to target/wordllama
/// (never committed). Without them the test says SKIPPED.
#[test]
fn wordllama_vectors_equal_the_reference_package() {
    let dir = format!("{}/target/wordllama", env!("CARGO_MANIFEST_DIR"));
    let Ok(expected) = std::fs::read_to_string(format!("{dir}/expected.json")) else {
        eprintln!("SKIPPED: no WordLlama reference (run scripts/wordllama_reference.sh; it needs PyPI)");
        return;
    };
    let e: serde_json::Value = serde_json::from_str(&expected).unwrap();
    assert_eq!(e["wordllama"], "0.4.0.post1");
    let texts: Vec<&str> = e["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let tokenizer = std::fs::read(format!("{dir}/tokenizer.json")).unwrap();
    let weights = std::fs::read(format!("{dir}/weights.safetensors")).unwrap();
    let rows = |v: &serde_json::Value| -> Vec<f32> {
        v.as_array().unwrap().iter().flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32)).collect()
    };
    let close = |got: &[f32], want: &[f32], what: &str| {
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!((a - b).abs() <= 1e-5, "{what}: value {i}: edo {a}, WordLlama {b}");
        }
    };

    let model = StaticModel::from_wordllama(&tokenizer, &weights, None).unwrap();
    assert_eq!((model.table().rows(), model.dim()), (32000, 256));
    let tokens = model.tokenize(&texts).unwrap();
    for (i, t) in tokens.iter().enumerate() {
        let want: Vec<u32> = e["tokens"][i].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        assert_eq!(t, &want, "tokens of text {i} {:?}", texts[i]);
    }
    let dense = model.encode(&texts).unwrap();
    close(&dense, &rows(&e["dense"]), "dense");
    close(&model.clone().with_normalize(true).encode(&texts[1..]).unwrap(), &rows(&e["normalized"]), "normalized");
    let dim64 = StaticModel::from_wordllama(&tokenizer, &weights, Some(64)).unwrap();
    close(&dim64.encode(&texts).unwrap(), &rows(&e["dim64"]), "Matryoshka 64");
    // Binary codes: packbits of x > 0, WordLlama's bits, byte for byte (but for values within
    // rounding of zero, where the two sums may fall on either side).
    let codes = edo::search::binarize(&dense, 256).unwrap();
    for (t, row) in e["binary"].as_array().unwrap().iter().enumerate() {
        let want: Vec<u8> = row.as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8).collect();
        let got: &[u8] = bytemuck::cast_slice(codes.row(t));
        for (bit, x) in dense[t * 256..(t + 1) * 256].iter().enumerate() {
            let (g, w) = (got[bit / 8] >> (7 - bit % 8) & 1, want[bit / 8] >> (7 - bit % 8) & 1);
            assert!(g == w || x.abs() < 1e-6, "text {t} bit {bit}: edo {g}, WordLlama {w} (x = {x})");
        }
    }
    // The table in INT8 keeps WordLlama's vectors.
    let int8 = model.quantize(Format::Int8).unwrap().encode(&texts[1..]).unwrap();
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum::<f64>();
    let cos: Vec<f64> = dense[256..].chunks_exact(256).zip(int8.chunks_exact(256)).map(|(a, b)| dot(a, b) / (dot(a, a) * dot(b, b)).sqrt()).collect();
    let mean = cos.iter().sum::<f64>() / cos.len() as f64;
    assert!(mean >= 0.9999, "INT8 mean cosine {mean}");
    eprintln!("WordLlama: {} texts equal within 1e-5; INT8 mean cosine {mean:.6}", texts.len());
}
