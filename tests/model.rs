//! Static embedding models against the reference: model2vec 0.10 and tokenizers 0.22.1 made the
//! fixtures in `tests/data/models` (`scripts/fixtures/make_model_fixtures.py`): four small models saved by
//! model2vec itself — WordPiece, BPE with byte fallback (f16 table), Unigram with a vocabulary
//! quantized to 40 rows plus per-token weights, and an int8 table — and the token ids and vectors
//! model2vec gives for a list of hard texts. sentence-transformers 6.2 made `st_*` and
//! `st_expected.json` (`scripts/fixtures/make_st_fixtures.py`): two `StaticEmbedding` models in its two
//! folder layouts, with their tokenizers' own truncation, and the vectors its forward pass gives.

use edo::model::{StaticModel, Truncation};
use edo::{Error, Format};

mod common;

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
const ST_MODELS: [&str; 2] = ["st_wordpiece", "st_unigram"];

fn floats(rows: &serde_json::Value) -> Vec<f32> {
    rows.as_array().unwrap().iter().flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32)).collect()
}

#[test]
fn sentence_transformers_models_give_its_tokens_and_vectors() {
    let e: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir("st_expected.json")).unwrap()).unwrap();
    assert_eq!(
        (e["sentence_transformers"].as_str(), e["torch"].as_str(), e["tokenizers"].as_str()),
        (Some("6.2.0"), Some("2.15.0"), Some("0.23.3")),
        "the pinned references"
    );
    let texts: Vec<&str> = e["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let truncations = [Truncation { max_length: 24, keep_last: false }, Truncation { max_length: 10, keep_last: true }];
    for (name, truncation) in ST_MODELS.into_iter().zip(truncations) {
        let m = &e["models"][name];
        let model = StaticModel::from_dir(dir(name)).unwrap();
        assert_eq!((model.truncation(), model.max_length(), model.normalize()), (Some(truncation), None, m["normalize"].as_bool().unwrap()), "{name}");
        let tokens = model.tokenize(&texts).unwrap();
        for (i, text) in texts.iter().enumerate() {
            let want: Vec<u32> = m["tokens"][i].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
            assert_eq!(tokens[i], want, "{name}: text {i} {text:?}");
        }
        let want = floats(&m["vectors"]);
        for got in [
            model.encode(&texts).unwrap(),
            edo::cpu::embedding_bag(model.table(), &model.bags(&texts).unwrap().as_bags(), edo::Pooling::Sum, edo::Bounds::Error)
                .map(|mut v| {
                    if model.normalize() {
                        edo::model::normalize_rows(&mut v, model.dim());
                    }
                    v
                })
                .unwrap(),
        ] {
            assert_eq!(got.len(), want.len(), "{name}");
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!((a - b).abs() <= 1e-5, "{name}: value {i}: edo {a}, sentence-transformers {b}");
            }
        }
        // The same files encoded as model2vec encodes them (unknown tokens dropped, no tokenizer
        // truncation) give other vectors: the fixtures tell the two apart.
        let base = if name == "st_unigram" { format!("{}/0_StaticEmbedding", dir(name)) } else { dir(name) };
        let read = |f: &str| std::fs::read(format!("{base}/{f}")).unwrap();
        let as_model2vec = StaticModel::from_bytes(b"{}", &read("tokenizer.json"), &read("model.safetensors")).unwrap();
        let other = as_model2vec.encode(&texts).unwrap();
        assert!(other.iter().zip(&want).any(|(a, b)| (a - b).abs() > 1e-3), "{name}");
    }
}

/// What a sentence-transformers folder asks that edo does not run is refused, saying what.
#[test]
fn sentence_transformers_folders_edo_cannot_run_are_refused() {
    let tmp = std::env::temp_dir().join(format!("edo-st-folders-{}", std::process::id()));
    let copy = |case: &str| {
        let to = tmp.join(case);
        std::fs::create_dir_all(to.join("1_Normalize")).unwrap();
        for f in ["config_sentence_transformers.json", "modules.json", "model.safetensors", "tokenizer.json", "1_Normalize/config.json"] {
            std::fs::copy(format!("{}/{f}", dir("st_wordpiece")), to.join(f)).unwrap();
        }
        to
    };
    let edit = |path: &std::path::Path, f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        f(&mut v);
        std::fs::write(path, serde_json::to_vec(&v).unwrap()).unwrap();
    };
    let refused = |dir: &std::path::Path, says: &str| match StaticModel::from_dir(dir) {
        Err(Error::BadFile { reason, .. }) => assert!(reason.contains(says), "{}: {reason}", dir.display()),
        other => panic!("{}: {other:?}", dir.display()),
    };
    assert!(StaticModel::from_dir(copy("as_is")).unwrap().normalize());

    let d = copy("dense");
    edit(&d.join("modules.json"), &|m| {
        m.as_array_mut().unwrap().push(serde_json::json!({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}))
    });
    refused(&d, "sentence_transformers.models.Dense");
    let d = copy("normalize_first");
    edit(&d.join("modules.json"), &|m| m.as_array_mut().unwrap().reverse());
    refused(&d, "Normalize");
    let d = copy("prompt");
    edit(&d.join("config_sentence_transformers.json"), &|c| {
        c["prompts"]["query"] = "query: ".into();
        c["default_prompt_name"] = "query".into();
    });
    refused(&d, "default prompt \"query\"");
    // An empty default prompt is no prompt.
    let d = copy("empty_prompt");
    edit(&d.join("config_sentence_transformers.json"), &|c| c["default_prompt_name"] = "query".into());
    assert!(StaticModel::from_dir(&d).is_ok());
    let d = copy("only_second");
    edit(&d.join("tokenizer.json"), &|t| t["truncation"]["strategy"] = "OnlySecond".into());
    refused(&d, "OnlySecond");
    let d = copy("sideways");
    edit(&d.join("tokenizer.json"), &|t| t["truncation"]["direction"] = "Up".into());
    refused(&d, "direction \"Up\"");
    // Without modules.json: the StaticEmbedding module alone, not normalised.
    let d = copy("no_modules");
    std::fs::remove_file(d.join("modules.json")).unwrap();
    assert!(!StaticModel::from_dir(&d).unwrap().normalize());
    std::fs::remove_dir_all(&tmp).unwrap();
}

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
    let unsupported = StaticModel::from_bytes(&config, &serde_json::to_vec(&json).unwrap(), &table);
    assert!(matches!(&unsupported, Err(Error::UnsupportedTokenizer { model }) if model == "SomethingElse"), "{unsupported:?}");
    // Without a max_length nothing cuts a text: one past the byte limit is refused.
    let uncut = StaticModel::from_bytes(br#"{"max_length": null, "normalize": true}"#, &tokenizer, &table).unwrap();
    let huge = "word ".repeat(edo::model::MAX_TEXT_BYTES / 5 + 1);
    assert!(matches!(uncut.encode(&["fine", &huge]), Err(Error::LimitExceeded { what: "bytes of one text", .. })));
    // With one, the cut comes first and the text is fine.
    assert_eq!(StaticModel::from_bytes(&config, &tokenizer, &table).unwrap().encode(&[&huge]).unwrap().len(), 16);
    // A missing folder names the file.
    assert!(matches!(StaticModel::from_dir("/nonexistent/model"), Err(Error::Io { .. })));
}

/// edo's own WordPiece (ids only) against `tokenizers` itself: random strings of hard characters
/// — accents precomposed and combining, CJK, Hangul, emoji with modifiers, every kind of
/// whitespace, control and format characters, U+FFFD, punctuation of many scripts, words past
/// the 100-character limit, the vocabulary's own pieces, the added tokens — through every
/// combination of the BERT normaliser's four switches.
#[test]
fn edos_wordpiece_gives_the_ids_tokenizers_gives() {
    let config = std::fs::read(format!("{}/config.json", dir("wordpiece"))).unwrap();
    let tokenizer = std::fs::read(format!("{}/tokenizer.json", dir("wordpiece"))).unwrap();
    let table = std::fs::read(format!("{}/model.safetensors", dir("wordpiece"))).unwrap();
    let base: serde_json::Value = serde_json::from_slice(&tokenizer).unwrap();
    let pieces: Vec<String> = base["model"]["vocab"].as_object().unwrap().keys().cloned().collect();
    let mut texts = hard_texts(&pieces, 3000);
    texts.push("a".repeat(100));
    texts.push("a".repeat(101));
    texts.push("é".repeat(101));
    texts.push(String::new());
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut fast_used = 0;
    for switches in 0..16u32 {
        let mut json = base.clone();
        let n = &mut json["normalizer"];
        n["clean_text"] = (switches & 1 != 0).into();
        n["handle_chinese_chars"] = (switches & 2 != 0).into();
        n["lowercase"] = (switches & 4 != 0).into();
        n["strip_accents"] = if switches & 8 != 0 { serde_json::Value::Null } else { (switches & 4 == 0).into() };
        let model = StaticModel::from_bytes(&config, &serde_json::to_vec(&json).unwrap(), &table).unwrap();
        assert!(model.has_fast_tokenizer());
        let got = model.tokenize(&texts).unwrap();
        let want = model.tokenize_reference(&texts).unwrap();
        for (i, text) in texts.iter().enumerate() {
            assert_eq!(got[i], want[i], "normaliser {}: text {i} {text:?}", n_of(&json));
        }
        fast_used += 1;
    }
    assert_eq!(fast_used, 16);
    // Other tokenizers keep `tokenizers`.
    for name in ["bpe_f16", "unigram_vq"] {
        assert!(!StaticModel::from_dir(dir(name)).unwrap().has_fast_tokenizer(), "{name}");
    }
}

/// `n` random strings of hard characters (see below) and of `pieces` (a vocabulary's, `##`
/// dropped), each of up to 12 parts.
fn hard_texts(pieces: &[String], n: usize) -> Vec<String> {
    let atoms: Vec<String> = [
        "a",
        "Z",
        "the",
        "quick",
        "ÉCOLE",
        "école",
        "e\u{301}",
        "Å",
        "İ",
        "ß",
        "ǅ",
        "Σ",
        "ﬁ",
        "日本",
        "中",
        "한국어",
        "🙂",
        "👍🏽",
        "🇫🇷",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\u{a0}",
        "\u{3000}",
        "\u{2028}",
        "\u{85}",
        "\u{b}",
        "\u{c}",
        "\0",
        "\u{7}",
        "\u{7f}",
        "\u{200b}",
        "\u{feff}",
        "\u{ad}",
        "\u{fffd}",
        ".",
        ",",
        "!",
        "?",
        "#",
        "##",
        "@",
        "$",
        "'",
        "\"",
        "«",
        "»",
        "—",
        "…",
        "、",
        "。",
        "¿",
        "؟",
        "مرحبا",
        "नमस्ते",
        "\u{301}",
        "\u{308}",
        "[UNK]",
        "[unk]",
        "[PAD]",
        "x\u{e000}",
        "<s>",
        "</s>",
        "<unk>",
        "<0x41>",
        "\u{2581}",
        "\u{2581}\u{2581}",
        "<mask>",
        " <mask> ",
        "Hello World",
        "hello",
        // What GPT-2's, Llama 3's and Qwen's regexes split on: contractions in both cases, digit
        // runs, line breaks, spaces before words; the long s and the Kelvin sign fold to s and k.
        "'s",
        "'LL",
        "don't",
        "I'M",
        "12345",
        "3.14",
        "\r\n\r\n",
        "\n \n",
        "a_b",
        "\u{17f}",
        "\u{212a}",
        "\u{120}",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let mut random = xorshift(0x9e37_79b9_7f4a_7c15);
    let mut next = move |n: usize| (random() % n as u64) as usize;
    (0..n)
        .map(|_| {
            let mut t = String::new();
            for _ in 0..next(12) {
                match next(4) {
                    0 => t.push_str(&pieces[next(pieces.len())].replace("##", "")),
                    1 => t.push(' '),
                    _ => t.push_str(&atoms[next(atoms.len())]),
                }
            }
            t
        })
        .collect()
}

/// edo's own tokenizer (the browser's only one; natively the fast path) against `tokenizers`
/// itself, on random strings of hard characters and pieces of each vocabulary: the fixtures'
/// BPE, Unigram and WordPiece tokenizers, WordLlama's real one when it is there, and variants of
/// them through every part edo's pipeline runs — normalizers, pre-tokenizers, BPE and Unigram
/// options, a WordLevel model, added tokens matched as written and normalised, stripping spaces.
#[test]
fn edos_own_tokenizer_gives_the_ids_tokenizers_gives() {
    use serde_json::json;
    let read = |name: &str, file: &str| std::fs::read(format!("{}/{file}", dir(name))).unwrap();
    let table = read("wordpiece", "model.safetensors");
    let load = |name: &str| -> serde_json::Value { serde_json::from_slice(&read(name, "tokenizer.json")).unwrap() };
    let (bpe, unigram, wordpiece) = (load("bpe_f16"), load("unigram_vq"), load("wordpiece"));
    // GPT-2's kind, trained by `tokenizers` (scripts/fixtures/make_bytelevel_fixture.py).
    let bytelevel = load("bytelevel_bpe");
    let mut variants: Vec<(String, serde_json::Value)> = vec![
        ("bpe".into(), bpe.clone()),
        ("unigram".into(), unigram.clone()),
        ("wordpiece".into(), wordpiece.clone()),
        ("byte-level bpe".into(), bytelevel.clone()),
    ];
    let mut with = |name: &str, base: &serde_json::Value, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut j = base.clone();
        edit(&mut j);
        variants.push((name.into(), j));
    };
    with("bpe, no byte fallback, unknowns not fused", &bpe, &|j| {
        j["model"]["byte_fallback"] = false.into();
        j["model"]["fuse_unk"] = false.into();
    });
    with("bpe, no byte fallback, unknowns fused", &bpe, &|j| j["model"]["byte_fallback"] = false.into());
    with("bpe, ignore_merges", &bpe, &|j| j["model"]["ignore_merges"] = true.into());
    // No merge joins a token to a `▁` after it (as in Llama's): edo splits the text before each
    // `▁` that follows another character and merges the pieces on their own.
    with("bpe, no merge across a \u{2581}", &bpe, &|j| {
        let merges = j["model"]["merges"].as_array_mut().unwrap();
        let joins_across = |m: &serde_json::Value| m[1].as_str().unwrap().starts_with('\u{2581}') && !m[0].as_str().unwrap().ends_with('\u{2581}');
        merges.retain(|m| !joins_across(m));
    });
    with("bpe, merges as lines", &bpe, &|j| {
        let lines: Vec<serde_json::Value> =
            j["model"]["merges"].as_array().unwrap().iter().map(|m| format!("{} {}", m[0].as_str().unwrap(), m[1].as_str().unwrap()).into()).collect();
        j["model"]["merges"] = lines.into();
    });
    with(
        "bpe, NFKC lowercase strip",
        &bpe,
        &|j| j["normalizer"] = json!({"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": true, "strip_right": true}, {"type": "Prepend", "prepend": "\u{2581}"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"}]}),
    );
    with("bpe, NFD strip accents, left strip", &bpe, &|j| {
        j["normalizer"] =
            json!({"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Strip", "strip_left": true, "strip_right": false}]})
    });
    with("bpe, NFC, whitespace split", &bpe, &|j| {
        j["normalizer"] = json!({"type": "NFC"});
        j["pre_tokenizer"] = json!({"type": "WhitespaceSplit"});
    });
    with("bpe, NFKD, BERT pre-tokenizer", &bpe, &|j| {
        j["normalizer"] = json!({"type": "NFKD"});
        j["pre_tokenizer"] = json!({"type": "BertPreTokenizer"});
    });
    for scheme in ["always", "first", "never"] {
        for split in [true, false] {
            with(&format!("bpe, Metaspace {scheme} split {split}"), &bpe, &|j| {
                j["normalizer"] = serde_json::Value::Null;
                j["pre_tokenizer"] = json!({"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": scheme, "split": split});
            });
            with(
                &format!("unigram, Metaspace {scheme} split {split}"),
                &unigram,
                &|j| j["pre_tokenizer"] = json!({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": scheme, "split": split}]}),
            );
        }
    }
    // Added tokens: matched as written (stripping the spaces around them or not) and in the
    // normalised text, tokens of the vocabulary and new ones.
    let added = |content: &str, id: u64, normalized: bool, lstrip: bool, rstrip: bool| json!({"id": id, "content": content, "single_word": false, "lstrip": lstrip, "rstrip": rstrip, "normalized": normalized, "special": false});
    for (name, base) in [("bpe", &bpe), ("unigram", &unigram), ("wordpiece", &wordpiece)] {
        with(&format!("{name}, added tokens"), base, &|j| {
            let n = j["added_tokens"].as_array().unwrap().len() as u64 + 1000;
            let list = j["added_tokens"].as_array_mut().unwrap();
            list.push(added("<mask>", n, false, true, true));
            list.push(added("Hello World", n + 1, true, false, false));
            list.push(added("hello", n + 2, true, false, false));
            list.push(added("ab", n + 3, false, false, true));
            list.push(added("é", n + 4, false, true, false));
        });
    }
    // Byte-level BPE as GPT-2 (its own regex, with and without a prefix space), Llama 3 and Qwen 2
    // (their regexes in a Split, then ByteLevel without its own) run it.
    let byte_level = |prefix: bool, regex: bool| json!({"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": true, "use_regex": regex});
    let then_bytes = |pattern: &str| json!({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false}, byte_level(false, false)]});
    let llama3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    let qwen2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    with("byte-level bpe, add_prefix_space", &bytelevel, &|j| j["pre_tokenizer"] = byte_level(true, true));
    with("byte-level bpe, Llama 3's split, ignore_merges", &bytelevel, &|j| {
        j["pre_tokenizer"] = then_bytes(llama3);
        j["model"]["ignore_merges"] = true.into();
    });
    with("byte-level bpe, NFC, Qwen 2's split", &bytelevel, &|j| {
        j["normalizer"] = json!({"type": "NFC"});
        j["pre_tokenizer"] = then_bytes(qwen2);
    });
    with("byte-level bpe, a prefix space, no regex", &bytelevel, &|j| j["pre_tokenizer"] = byte_level(true, false));
    // A WordLevel model gives each pre-tokenized piece one id (or the unknown one): where BPE's
    // merges would hide a difference in the split, the number of ids shows it.
    for (name, pre) in [("GPT-2's", byte_level(false, true)), ("Llama 3's", then_bytes(llama3)), ("Qwen 2's", then_bytes(qwen2))] {
        with(&format!("word-level, {name} split"), &bytelevel, &|j| {
            let vocab = j["model"]["vocab"].clone();
            j["model"] = json!({"type": "WordLevel", "vocab": vocab, "unk_token": "<|endoftext|>"});
            j["pre_tokenizer"] = pre.clone();
        });
    }
    // Split's behaviours, on a string and on a regex, inverted or not.
    for behavior in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"] {
        for invert in [false, true] {
            with(&format!("bpe, Split on a string, {behavior}, invert {invert}"), &bpe, &|j| {
                j["pre_tokenizer"] = json!({"type": "Split", "pattern": {"String": "ab"}, "behavior": behavior, "invert": invert})
            });
            with(&format!("wordpiece, Split on a regex, {behavior}, invert {invert}"), &wordpiece, &|j| {
                j["pre_tokenizer"] = json!({"type": "Sequence", "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": r"\s+|[\p{N}.,]|[^\s\p{L}\p{M}]{2,3}"}, "behavior": behavior, "invert": invert},
                    {"type": "BertPreTokenizer"}]})
            });
        }
    }
    // Added tokens matched only as whole words (no word character on either side).
    let single = |content: &str, id: u64, normalized: bool, lstrip: bool| json!({"id": id, "content": content, "single_word": true, "lstrip": lstrip, "rstrip": false, "normalized": normalized, "special": false});
    for (name, base) in [("bpe", &bpe), ("unigram", &unigram), ("wordpiece", &wordpiece), ("byte-level bpe", &bytelevel)] {
        with(&format!("{name}, single-word added tokens"), base, &|j| {
            let n = j["added_tokens"].as_array().unwrap().len() as u64 + 1000;
            let list = j["added_tokens"].as_array_mut().unwrap();
            list.push(single("hello", n, true, false));
            list.push(single("ab", n + 1, false, false));
            list.push(single("<mask>", n + 2, false, true));
            list.push(single("\u{65e5}\u{672c}", n + 3, false, false));
            list.push(single("a_b", n + 4, false, false));
            list.push(single("Hello World", n + 5, true, false));
        });
    }
    with("unigram, byte fallback, lowercase", &unigram, &|j| {
        j["model"]["byte_fallback"] = true.into();
        j["normalizer"] = json!({"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]});
    });
    with("wordpiece, whitespace split", &wordpiece, &|j| j["pre_tokenizer"] = json!({"type": "WhitespaceSplit"}));
    // Another WordPiece model over the same pieces (their ids in reverse order).
    with("wordpiece, ids reversed", &wordpiece, &|j| {
        let vocab = j["model"]["vocab"].as_object_mut().unwrap();
        let n = vocab.len() as u64;
        for id in vocab.values_mut() {
            *id = (n - 1 - id.as_u64().unwrap()).into();
        }
    });
    // Another Unigram model over the same pieces (their scores in reverse order): other paths
    // for the same words, run after the first on the same threads.
    with("unigram, scores reversed", &unigram, &|j| {
        let pieces = j["model"]["vocab"].as_array_mut().unwrap();
        let scores: Vec<serde_json::Value> = pieces.iter().map(|p| p[1].clone()).rev().collect();
        for (p, score) in pieces.iter_mut().zip(scores) {
            p[1] = score;
        }
    });
    // SentencePiece's own normaliser: the real nmt_nfkc charsmap (scripts/fixtures/make_charsmap_fixture.py).
    with("unigram, SentencePiece nmt_nfkc (Precompiled)", &unigram, &|j| {
        j["normalizer"] = json!({"type": "Precompiled", "precompiled_charsmap": charsmap_base64()})
    });
    with("wordlevel", &wordpiece, &|j| {
        let vocab = j["model"]["vocab"].clone();
        j["model"] = json!({"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"});
    });
    let wordllama = format!("{}/target/wordllama/tokenizer.json", env!("CARGO_MANIFEST_DIR"));
    match std::fs::read(&wordllama) {
        Ok(bytes) => variants.push(("WordLlama".into(), serde_json::from_slice(&bytes).unwrap())),
        Err(_) => eprintln!("SKIPPED (this part): no WordLlama tokenizer at {wordllama} (scripts/fixtures/wordllama_reference.sh)"),
    }

    for (name, json) in &variants {
        let bytes = serde_json::to_vec(json).unwrap();
        assert_eq!(StaticModel::own_tokenizer_refusal(&bytes), None, "{name}");
        // WordLlama's loader: no cut, no truncation, no unknown tokens dropped — the raw ids.
        let model = StaticModel::from_wordllama(&bytes, &table, None).unwrap();
        assert!(model.has_own_tokenizer(), "{name}");
        let pieces = pieces_of(json);
        let mut texts = hard_texts(&pieces, if name == "WordLlama" { 3000 } else { 600 });
        texts.extend(["", " ", "  ", "\u{2581}", "<s>", " <mask>", "<mask>  x", "abab", "Hello World  hello"].map(String::from));
        // What NFKC and SentencePiece's charsmap rewrite: full width, circled, ligatures, fractions,
        // half-width kana, squared words, superscripts, a decomposed accent.
        texts.extend(
            ["ｆｕｌｌｗｉｄｔｈ ＡＢＣ１２３", "①②③ ⑴ Ⅻ", "ﬁ ﬂ ﬀ", "½ ¼ x² H₂O", "ｶﾀｶﾅ ﾊﾟ", "㍿ ㌔ ㎏", "cafe\u{301} e\u{301}\u{302}"].map(String::from),
        );
        texts.push("x".repeat(300));
        // Contractions in any case run into the next word (Llama 3's and Qwen's `(?i:…)`).
        texts.extend(["We'LLsee it'Sok", "x'\u{17f}y I'Mme", "they'REthere'dthen", "2024'ss"].map(String::from));
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let got = model.tokenize(&texts).unwrap();
        let want = model.tokenize_reference(&texts).unwrap();
        for (i, text) in texts.iter().enumerate() {
            assert_eq!(got[i], want[i], "{name}: text {i} {text:?}");
        }
    }

    // Two models of one kind in turn on the same threads, the same words in both: each thread's
    // word cache must give each model its own ids.
    for pair in [
        ["unigram", "unigram, scores reversed"],
        ["bpe, no merge across a \u{2581}", "bpe, no byte fallback, unknowns fused"],
        ["wordpiece", "wordpiece, ids reversed"],
    ] {
        let json = |name: &str| &variants.iter().find(|(n, _)| n == name).unwrap().1;
        let [a, b] = pair.map(|name| StaticModel::from_wordllama(&serde_json::to_vec(json(name)).unwrap(), &table, None).unwrap());
        let pieces = pieces_of(json(pair[0]));
        let texts: Vec<String> = hard_texts(&pieces, 300).into_iter().flat_map(|t| [t.clone(), format!("{t} {t}")]).collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (want_a, want_b) = (a.tokenize_reference(&texts).unwrap(), b.tokenize_reference(&texts).unwrap());
        assert_ne!(want_a, want_b, "{pair:?} give the same ids: the check below could not fail");
        for _ in 0..2 {
            assert_eq!(a.tokenize(&texts).unwrap(), want_a, "{}", pair[0]);
            assert_eq!(b.tokenize(&texts).unwrap(), want_b, "{}", pair[1]);
        }
    }

    // What it does not run, named; natively `tokenizers` runs it.
    for (edit, part) in [
        (json!({"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Removed", "invert": false}), "\\w"),
        (json!({"type": "Split", "pattern": {"Regex": "\\p{Lu}\\p{Ll}+"}, "behavior": "Isolated", "invert": false}), "\\p{Lu}"),
        (json!({"type": "Split", "pattern": {"Regex": " ?"}, "behavior": "Isolated", "invert": false}), "empty string"),
    ] {
        let mut j = bpe.clone();
        j["pre_tokenizer"] = edit;
        let bytes = serde_json::to_vec(&j).unwrap();
        let why = StaticModel::own_tokenizer_refusal(&bytes).unwrap();
        assert!(why.contains(part), "{why}");
        let model = StaticModel::from_wordllama(&bytes, &table, None).unwrap();
        assert!(!model.has_own_tokenizer());
        assert_eq!(model.tokenize(&["a b"]).unwrap(), model.tokenize_reference(&["a b"]).unwrap());
    }
    let mut dropout = bpe.clone();
    dropout["model"]["dropout"] = 0.5.into();
    assert!(StaticModel::own_tokenizer_refusal(&serde_json::to_vec(&dropout).unwrap()).unwrap().contains("dropout"));
}

/// GPT-2's and Llama 3's kinds of byte-level BPE give the ids the `tokenizers` Python package
/// gave (scripts/fixtures/make_bytelevel_fixture.py), through edo's own tokenizer.
#[test]
fn byte_level_tokenizers_give_the_python_packages_ids() {
    let fixture = dir("bytelevel_bpe");
    let expected: serde_json::Value = serde_json::from_slice(&std::fs::read(format!("{fixture}/expected.json")).unwrap()).unwrap();
    let texts: Vec<&str> = expected["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let table = std::fs::read(format!("{fixture}/model.safetensors")).unwrap();
    for (file, key) in [("tokenizer.json", "gpt2"), ("tokenizer_llama3.json", "llama3")] {
        let tokenizer = std::fs::read(format!("{fixture}/{file}")).unwrap();
        assert_eq!(StaticModel::own_tokenizer_refusal(&tokenizer), None, "{file}");
        let model = StaticModel::from_wordllama(&tokenizer, &table, None).unwrap();
        let want: Vec<Vec<u32>> = serde_json::from_value(expected[key].clone()).unwrap();
        assert_eq!(model.tokenize(&texts).unwrap(), want, "{file}");
    }
}

/// The pieces of a tokenizer.json's vocabulary (a map, or Unigram's list of pieces and scores).
fn pieces_of(json: &serde_json::Value) -> Vec<String> {
    match &json["model"]["vocab"] {
        serde_json::Value::Object(o) => o.keys().cloned().collect(),
        serde_json::Value::Array(a) => a.iter().map(|p| p[0].as_str().unwrap().to_string()).collect(),
        _ => unreachable!(),
    }
}

/// A seeded xorshift64 generator: the same numbers on every run.
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// The nmt_nfkc charsmap, as a tokenizer.json's `Precompiled` normaliser holds it.
fn charsmap_base64() -> String {
    base64::encode(std::fs::read(dir("nmt_nfkc.charsmap")).unwrap())
}

/// A `Precompiled` normaliser whose charsmap would make `spm_precompiled` index out of bounds
/// while normalising (and panic) is refused when the tokenizer is read. Each of 300 seeded
/// corruptions of the real nmt_nfkc charsmap — a trie unit or a byte of its strings — is either
/// refused with a typed error, natively and by edo's own tokenizer alike, or runs every character
/// up to U+3400 and the full-width forms without a panic.
#[test]
fn precompiled_charsmaps_that_would_index_out_of_bounds_are_refused() {
    let charsmap = std::fs::read(dir("nmt_nfkc.charsmap")).unwrap();
    let unigram: serde_json::Value = serde_json::from_slice(&std::fs::read(format!("{}/tokenizer.json", dir("unigram_vq"))).unwrap()).unwrap();
    let table = std::fs::read(format!("{}/model.safetensors", dir("wordpiece"))).unwrap();
    let with = |map: &[u8]| {
        let mut j = unigram.clone();
        j["normalizer"] = serde_json::json!({"type": "Precompiled", "precompiled_charsmap": base64::encode(map)});
        serde_json::to_vec(&j).unwrap()
    };
    let chars: Vec<char> = (0x20..0x3400u32).chain(0xff00..0xfff0).filter_map(char::from_u32).collect();
    let texts: Vec<String> = chars.chunks(97).map(|c| c.iter().collect()).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    // The real one runs.
    assert!(StaticModel::from_wordllama(&with(&charsmap), &table, None).unwrap().tokenize(&texts).is_ok());
    let trie_units = u32::from_le_bytes(charsmap[..4].try_into().unwrap()) as usize / 4;
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let (mut refused, mut ran) = (0, 0);
    for case in 0..300 {
        let mut map = charsmap.clone();
        if case % 3 == 2 {
            // A byte of the strings (kept UTF-8 or not: not UTF-8 is refused too).
            let at = 4 + trie_units * 4 + (next() as usize) % (map.len() - 4 - trie_units * 4);
            map[at] = next() as u8;
        } else {
            // A unit among the first 4 096 (the root's and the first bytes' nodes), made random.
            let at = 4 + 4 * ((next() as usize) % 4096);
            map[at..at + 4].copy_from_slice(&(next() as u32).to_le_bytes());
        }
        let bytes = with(&map);
        match (StaticModel::own_tokenizer_refusal(&bytes), StaticModel::from_wordllama(&bytes, &table, None)) {
            (Some(why), Err(Error::BadFile { reason, .. })) => {
                assert!(why.contains("precompiled normaliser") && reason.contains("precompiled normaliser"), "case {case}: {why} / {reason}");
                refused += 1;
            }
            (None, Ok(model)) => {
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| model.tokenize(&texts)));
                assert!(matches!(run, Ok(Ok(_))), "case {case}: a charsmap edo accepted failed to run");
                ran += 1;
            }
            (why, model) => panic!("case {case}: edo's own tokenizer says {why:?}, the model {:?}", model.map(|_| ())),
        }
    }
    eprintln!("corrupted charsmaps: {refused} refused, {ran} ran");
    assert!(refused > 30 && ran > 30, "{refused} refused, {ran} ran: the corruptions test both sides");
}

fn n_of(json: &serde_json::Value) -> String {
    json["normalizer"].to_string()
}

/// A model in one `.edo` file gives the vectors of its folder, in the table format it was
/// written in, from bytes (a browser) and from a memory-mapped path.
#[test]
fn model_files_give_the_folders_vectors() {
    let e = expected();
    let texts: Vec<&str> = e.texts.iter().map(String::as_str).collect();
    let tmp = std::env::temp_dir().join(format!("edo-model-files-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for name in MODELS.into_iter().chain(ST_MODELS) {
        let folder = StaticModel::from_dir(dir(name)).unwrap();
        for format in [Format::F32, Format::Int8, Format::Int4, Format::Q4K] {
            let model = folder.quantize(format).unwrap();
            let want = model.encode(&texts).unwrap();
            let bytes = model.to_edo().to_bytes();
            // Deterministic bytes; read back from bytes, the same vectors bit for bit.
            assert_eq!(bytes, model.to_edo().to_bytes(), "{name} {format}");
            let back = StaticModel::from_edo_bytes(bytes.clone()).unwrap();
            assert_eq!(
                (back.table().format(), back.dim(), back.normalize(), back.max_length(), back.truncation()),
                (format, folder.dim(), folder.normalize(), folder.max_length(), folder.truncation())
            );
            assert_eq!(back.tokenize(&texts).unwrap(), folder.tokenize(&texts).unwrap(), "{name} {format}");
            assert_eq!(back.encode(&texts).unwrap(), want, "{name} {format}");
            // The table is what an older reader sees: a plain table file.
            let file = edo::file::TableFile::from_bytes(bytes.clone()).unwrap();
            assert!(file.is_model());
            assert_eq!(file.table().words(), model.table().words());
            let path = tmp.join(format!("{name}-{format}.edo"));
            model.to_edo().write(&path).unwrap();
            assert_eq!(StaticModel::open(&path).unwrap().encode(&texts).unwrap(), want, "{name} {format} from a path");
        }
        // A folder opens through the same call.
        assert_eq!(StaticModel::open(dir(name)).unwrap().encode(&texts).unwrap(), folder.encode(&texts).unwrap());
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// A model reordered by how often a corpus's tokens look its rows up gives every text the same
/// vector, bit for bit, from memory and from its file; its most used row is stored first, its
/// tokenizer's ids unchanged (a mapping sends them to the rows' new places, composed with a
/// quantised vocabulary's own).
#[test]
fn reordered_models_give_the_same_vectors() {
    let e = expected();
    let texts: Vec<&str> = e.texts.iter().map(String::as_str).collect();
    for name in MODELS.into_iter().chain(ST_MODELS) {
        let model = StaticModel::from_dir(dir(name)).unwrap().quantize(Format::Int8).unwrap();
        let counts = model.row_counts(&texts).unwrap();
        assert_eq!(counts.len(), model.table().rows());
        let tokens: usize = model.bags(&texts).unwrap().rows.len();
        assert_eq!(counts.iter().sum::<u64>(), tokens as u64, "{name}: every token counted once");
        let order = edo::prune::frequency_order(&counts);
        let reordered = model.reorder(&order).unwrap();
        assert_eq!(reordered.table().row(0), model.table().row(order[0] as usize), "{name}: the most used row first");
        assert_ne!(order[0], 0, "{name}: a corpus whose most used row is row 0 would not test the mapping");
        assert_eq!(reordered.tokenize(&texts).unwrap(), model.tokenize(&texts).unwrap(), "{name}");
        let want = model.encode(&texts).unwrap();
        assert_eq!(reordered.encode(&texts).unwrap(), want, "{name}");
        let back = StaticModel::from_edo_bytes(reordered.to_edo().to_bytes()).unwrap();
        assert_eq!(back.encode(&texts).unwrap(), want, "{name} from its file");
        // Reordering again (by other counts) composes with the mapping it made.
        let again = back.reorder(&order.iter().rev().copied().collect::<Vec<_>>()).unwrap();
        assert_eq!(again.encode(&texts).unwrap(), want, "{name} reordered twice");
        let mut twice = order.clone();
        twice[1] = twice[0];
        assert!(matches!(model.reorder(&twice), Err(Error::NotAPermutation { index: 1, .. })), "{name}");
        assert!(matches!(model.reorder(&order[1..]), Err(Error::ShapeMismatch { .. })), "{name}");
    }
    // WordLlama's layout with fewer rows than tokens: unigram_vq's 40-row table under its
    // 146-token tokenizer, ids past row 39 clipping to it. Reordered, the clipped ids follow the
    // last row to its new place, in memory and through the file.
    let tokenizer = std::fs::read(format!("{}/tokenizer.json", dir("unigram_vq"))).unwrap();
    let weights = std::fs::read(format!("{}/model.safetensors", dir("unigram_vq"))).unwrap();
    let clipping = StaticModel::from_wordllama(&tokenizer, &weights, None).unwrap();
    let rows = clipping.table().rows();
    assert!(clipping.vocab_size() > rows, "{} tokens, {rows} rows", clipping.vocab_size());
    let ids = clipping.tokenize(&texts).unwrap();
    assert!(ids.iter().flatten().any(|&t| t as usize >= rows), "the texts have tokens past the table");
    let order: Vec<u32> = (0..rows as u32).rev().collect();
    let reordered = clipping.reorder(&order).unwrap();
    assert_eq!(reordered.table().row(0), clipping.table().row(rows - 1), "the clipped-to row moved");
    let want = clipping.encode(&texts).unwrap();
    assert_eq!(reordered.encode(&texts).unwrap(), want);
    assert_eq!(StaticModel::from_edo_bytes(reordered.to_edo().to_bytes()).unwrap().encode(&texts).unwrap(), want);
}

#[test]
fn bad_model_files_are_typed_errors() {
    let model = StaticModel::from_dir(dir("unigram_vq")).unwrap().quantize(Format::Int8).unwrap();
    let bytes = model.to_edo().to_bytes();
    assert!(StaticModel::from_edo_bytes(bytes.clone()).is_ok());
    // Every truncation is an error, never a panic.
    for cut in (0..bytes.len()).step_by(97).chain([bytes.len() - 1]) {
        assert!(StaticModel::from_edo_bytes(bytes[..cut].to_vec()).is_err(), "cut at {cut}");
    }
    // A flipped byte in the rows fails their checksum; in the tokenizer, the model's.
    let header = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let json: serde_json::Value = serde_json::from_slice(&bytes[8..header]).unwrap();
    let start = |name: &str| header + json[name]["data_offsets"][0].as_u64().unwrap() as usize;
    let mut flipped = bytes.clone();
    flipped[start("rows") + 3] ^= 1;
    assert!(matches!(StaticModel::from_edo_bytes(flipped), Err(Error::Checksum { .. })));
    let mut flipped = bytes.clone();
    flipped[start("model.tokenizer") + 10] ^= 1;
    assert!(matches!(StaticModel::from_edo_bytes(flipped), Err(Error::BadFile { reason, .. }) if reason.contains("checksum")));
    // A plain table file is not a model.
    let plain = edo::file::TableFile::new(model.table().clone()).to_bytes();
    assert!(matches!(StaticModel::from_edo_bytes(plain), Err(Error::BadFile { reason, .. }) if reason.contains("quantize-model")));
    // Settings that disagree with the tokenizer, mapping entries past the table, non-finite
    // weights: rewritten files with valid checksums, each refused.
    let rewrite = |edit: &dyn Fn(&mut serde_json::Value, &mut Vec<u8>)| -> Result<StaticModel, Error> {
        let mut json = json.clone();
        let mut data = bytes[header..].to_vec();
        edit(&mut json, &mut data);
        // Recompute the model checksum over the model tensors in name order.
        let mut names: Vec<&String> = json.as_object().unwrap().keys().filter(|k| k.starts_with("model.")).collect();
        names.sort();
        let mut crc = crc32fast::Hasher::new();
        for n in names {
            let (a, b) = (json[n]["data_offsets"][0].as_u64().unwrap() as usize, json[n]["data_offsets"][1].as_u64().unwrap() as usize);
            crc.update(&data[a..b]);
        }
        let mut json = json.clone();
        json["__metadata__"]["edo.model_crc32"] = crc.finalize().to_string().into();
        // And the header's own checksum, over its edo.* keys.
        common::sign(&mut json).unwrap();
        StaticModel::from_edo_bytes(common::join(&json, &data))
    };
    let at = |json: &serde_json::Value, name: &str| json[name]["data_offsets"][0].as_u64().unwrap() as usize;
    assert!(rewrite(&|_, _| {}).is_ok(), "the rewriting itself keeps a valid file");
    let settings = |f: &dyn Fn(&mut serde_json::Value)| {
        rewrite(&|json: &mut serde_json::Value, _: &mut Vec<u8>| {
            let mut s: serde_json::Value = serde_json::from_str(json["__metadata__"]["edo.model"].as_str().unwrap()).unwrap();
            f(&mut s);
            json["__metadata__"]["edo.model"] = s.to_string().into();
        })
    };
    assert!(matches!(settings(&|s| s["vocab_size"] = 7.into()), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(settings(&|s| s["normalize"] = "yes".into()), Err(Error::BadFile { .. })));
    assert!(matches!(settings(&|s| s["max_length"] = (-1).into()), Err(Error::BadFile { .. })));
    assert!(matches!(rewrite(&|j, _| j["__metadata__"]["edo.model"] = "{".into()), Err(Error::BadFile { .. })));
    assert!(
        matches!(rewrite(&|j, d| { let a = at(j, "model.mapping"); d[a..a + 4].copy_from_slice(&1000u32.to_le_bytes()) }), Err(Error::BadFile { reason, .. }) if reason.contains("mapping[0]"))
    );
    assert!(matches!(
        rewrite(&|j, d| {
            let a = at(j, "model.weights");
            d[a + 4..a + 8].copy_from_slice(&f32::NAN.to_le_bytes())
        }),
        Err(Error::NonFiniteWeight { index: 1, .. })
    ));
    assert!(matches!(rewrite(&|j, _| j["model.weights"]["dtype"] = "I32".into()), Err(Error::BadFile { .. })));
    // An 8-byte model tensor is refused by the header itself: the file reads, writes and
    // round-trips as a table file only with tensors the writer can lay out.
    let wide = rewrite(&|j, _| {
        let n = j["model.weights"]["shape"][0].as_u64().unwrap();
        j["model.weights"]["dtype"] = "U64".into();
        j["model.weights"]["shape"] = serde_json::json!([n / 2]);
    });
    assert!(matches!(wide, Err(Error::BadFile { ref reason, .. }) if reason.contains("1- or 4-byte")), "{wide:?}");
    // Model tensors without the settings.
    assert!(matches!(
        rewrite(&|j, _| {
            j["__metadata__"].as_object_mut().unwrap().remove("edo.model");
        }),
        Err(Error::BadFile { .. })
    ));
    assert!(matches!(StaticModel::open("/nonexistent/model.edo"), Err(Error::Io { .. })));
}

/// The `model_file` fuzz target's corpus (fuzz/corpus/model_file, grown by `scripts/checks/fuzz.sh`)
/// read as the target reads it: the seeds (`seed-*`: model files and folders made from the
/// fixtures) load and encode; whatever libFuzzer added may fail, but never panic — as it is, and
/// with its header's checksum made right (so a mutated header reaches the checks past it).
#[test]
fn model_fuzz_corpus_reads_without_panicking() {
    let texts = ["", "naïve café 東京 🙂", "the quick brown fox"];
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/model_file");
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let seed = name.starts_with("seed-");
        let file = StaticModel::from_edo_bytes(data.clone()).map(|m| m.encode(&texts));
        if let Some(resigned) = common::resigned(&data) {
            let _ = StaticModel::from_edo_bytes(resigned).map(|m| m.encode(&texts));
        }
        let folder = (data.len() >= 6)
            .then(|| {
                let config_len = u16::from_le_bytes([data[0], data[1]]) as usize;
                let tokenizer_len = u32::from_le_bytes(data[2..6].try_into().unwrap()) as usize;
                let rest = &data[6..];
                (config_len <= rest.len() && tokenizer_len <= rest.len() - config_len).then(|| {
                    let (config, rest) = rest.split_at(config_len);
                    let (tokenizer, table) = rest.split_at(tokenizer_len);
                    StaticModel::from_bytes(config, tokenizer, table).map(|m| m.encode(&texts))
                })
            })
            .flatten();
        if seed {
            let ok = if name.ends_with(".edo") { matches!(file, Ok(Ok(_))) } else { matches!(folder, Some(Ok(Ok(_)))) };
            assert!(ok, "{name} should load and encode");
            seeds += 1;
        }
    }
    assert_eq!(seeds, 8);
}

/// WordLlama's real model (its PyPI wheel's 32000 × 256 f16 table and Llama-2 tokenizer) against
/// WordLlama's own vectors: `scripts/fixtures/wordllama_reference.sh` writes them to target/wordllama
/// (never committed). Without them the test says SKIPPED.
#[test]
fn wordllama_vectors_equal_the_reference_package() {
    let dir = format!("{}/target/wordllama", env!("CARGO_MANIFEST_DIR"));
    let Ok(expected) = std::fs::read_to_string(format!("{dir}/expected.json")) else {
        eprintln!("SKIPPED: no WordLlama reference (run scripts/fixtures/wordllama_reference.sh; it needs PyPI)");
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
    // In one .edo file (ids past the table still clip; unknown tokens still count), the same.
    let file = StaticModel::from_edo_bytes(model.quantize(Format::Int8).unwrap().to_edo().to_bytes()).unwrap();
    assert_eq!(file.encode(&texts[1..]).unwrap(), int8);
    let file64 = StaticModel::from_edo_bytes(dim64.to_edo().to_bytes()).unwrap();
    assert_eq!(file64.encode(&texts).unwrap(), dim64.encode(&texts).unwrap());
    // Reordered by its texts' tokens (ids past the table still clip, to the last row's new place).
    let reordered = model.reorder(&edo::prune::frequency_order(&model.row_counts(&texts).unwrap())).unwrap();
    assert_eq!(reordered.encode(&texts).unwrap(), dense);
    let clipped = ["a text", "\u{10ffff} beyond"];
    assert_eq!(reordered.encode(&clipped).unwrap(), model.encode(&clipped).unwrap());
    eprintln!("WordLlama: {} texts equal within 1e-5; INT8 mean cosine {mean:.6}", texts.len());
}

#[test]
fn tokenizer_files_that_make_the_tokenizers_crate_panic_are_typed_errors() {
    // tokenizers 0.22 `expect`s on these rather than returning an error; the first was found by
    // the model_file fuzz target (a decoder's string with a byte that is not UTF-8).
    let d = dir("unigram_vq");
    let (config, safetensors) = (std::fs::read(format!("{d}/config.json")).unwrap(), std::fs::read(format!("{d}/model.safetensors")).unwrap());
    let good = std::fs::read_to_string(format!("{d}/tokenizer.json")).unwrap();
    assert!(StaticModel::from_bytes(&config, good.as_bytes(), &safetensors).is_ok());
    let decoder = r#""decoder":{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}"#;
    assert!(good.contains(decoder));
    let mut not_utf8 = good.replace(decoder, r#""decoder":{"type":"Metaspace","replacement":"▁","prepend_scheme":"aXways","split":true}"#).into_bytes();
    let at = not_utf8.windows(6).position(|w| w == b"aXways").unwrap() + 1;
    not_utf8[at] = 0x8f;
    let deep = good.replace(decoder, &format!(r#""decoder":{}1{}"#, "[".repeat(200), "]".repeat(200)));
    let precompiled = good.replace(r#""normalizer":{"type":"NFKC"}"#, r#""normalizer":{"type":"Precompiled","precompiled_charsmap":"!!"}"#);
    assert_ne!(precompiled, good);
    for (what, tokenizer, says) in [
        ("a decoder that is not UTF-8", not_utf8, "not UTF-8"),
        ("a decoder nested 200 deep", deep.into_bytes(), "201 arrays and objects deep"),
        ("a precompiled normaliser with no charsmap", precompiled.into_bytes(), "a precompiled normaliser that is not one"),
    ] {
        match StaticModel::from_bytes(&config, &tokenizer, &safetensors) {
            Err(e @ Error::BadFile { .. }) => assert!(e.to_string().contains(says), "{what}: {e}"),
            Err(e) => panic!("{what}: {e:?}"),
            Ok(_) => panic!("{what}: read"),
        }
    }
}
