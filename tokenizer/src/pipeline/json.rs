//! A tokenizer.json as serde reads it: the parts of the file the pipeline is built from.

use super::*;

#[derive(serde::Deserialize)]
pub(crate) struct Json {
    #[serde(default)]
    pub(crate) added_tokens: Vec<AddedJson>,
    pub(crate) normalizer: Option<serde_json::Value>,
    pub(crate) pre_tokenizer: Option<serde_json::Value>,
    pub(crate) model: ModelJson,
}

#[derive(serde::Deserialize)]
pub(crate) struct AddedJson {
    pub(crate) content: String,
    #[serde(default)]
    pub(crate) single_word: bool,
    #[serde(default)]
    pub(crate) lstrip: bool,
    #[serde(default)]
    pub(crate) rstrip: bool,
    #[serde(default = "yes")]
    pub(crate) normalized: bool,
}

pub(crate) fn yes() -> bool {
    true
}

#[derive(serde::Deserialize)]
pub(crate) struct ModelJson {
    #[serde(rename = "type")]
    pub(crate) kind: Option<String>,
    pub(crate) vocab: Option<VocabJson>,
    pub(crate) merges: Option<Vec<MergeJson>>,
    pub(crate) unk_token: Option<String>,
    pub(crate) unk_id: Option<usize>,
    pub(crate) continuing_subword_prefix: Option<String>,
    pub(crate) end_of_word_suffix: Option<String>,
    pub(crate) fuse_unk: Option<bool>,
    pub(crate) byte_fallback: Option<bool>,
    pub(crate) ignore_merges: Option<bool>,
    pub(crate) dropout: Option<f64>,
}

/// A model's vocabulary: token → id (WordPiece, BPE, WordLevel), or `[token, score]` pairs in id
/// order (Unigram).
pub(crate) enum VocabJson {
    Map(FxHashMap<String, u32>),
    Scored(Vec<(String, f64)>),
}

// Read by hand rather than as an untagged enum, which first copies the whole vocabulary into
// serde's buffered form (every token a string of its own) and then again into the map.
impl<'de> serde::Deserialize<'de> for VocabJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<VocabJson, D::Error> {
        struct Vocab;
        impl<'de> serde::de::Visitor<'de> for Vocab {
            type Value = VocabJson;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a vocabulary: an object of token ids, or a list of [token, score]")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<VocabJson, A::Error> {
                let mut vocab = FxHashMap::with_capacity_and_hasher(map.size_hint().unwrap_or(0), Default::default());
                while let Some((token, id)) = map.next_entry::<String, u32>()? {
                    vocab.insert(token, id);
                }
                Ok(VocabJson::Map(vocab))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<VocabJson, A::Error> {
                let mut pieces = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(piece) = seq.next_element::<(String, f64)>()? {
                    pieces.push(piece);
                }
                Ok(VocabJson::Scored(pieces))
            }
        }
        d.deserialize_any(Vocab)
    }
}

/// A BPE merge as a tokenizer.json writes it: `["a", "b"]` or the older `"a b"`.
pub(crate) enum MergeJson {
    Pair(String, String),
    Line(String),
}

// Read by hand rather than as an untagged enum, which tries the pair first and builds an error
// for every merge written as a line (tens of thousands in a Llama tokenizer: a fifth of the
// time reading WordLlama's model).
impl<'de> serde::Deserialize<'de> for MergeJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MergeJson, D::Error> {
        struct Merge;
        impl<'de> serde::de::Visitor<'de> for Merge {
            type Value = MergeJson;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a merge: two tokens, or one string of them")
            }
            fn visit_str<E: serde::de::Error>(self, line: &str) -> Result<MergeJson, E> {
                Ok(MergeJson::Line(line.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, line: String) -> Result<MergeJson, E> {
                Ok(MergeJson::Line(line))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<MergeJson, A::Error> {
                use serde::de::Error;
                let a: String = seq.next_element()?.ok_or_else(|| A::Error::invalid_length(0, &self))?;
                let b: String = seq.next_element()?.ok_or_else(|| A::Error::invalid_length(1, &self))?;
                if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(A::Error::invalid_length(3, &self));
                }
                Ok(MergeJson::Pair(a, b))
            }
        }
        d.deserialize_any(Merge)
    }
}
