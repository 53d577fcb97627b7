//! `edo index` and `edo query`: semantic search over the lines of a text file.

use std::path::PathBuf;

use clap::Args;
use edo::file::{TableFile, Vocab};
use edo::model::StaticModel;
use edo::{Format, PackedTable};

use crate::{exit, Failure};

#[derive(Args)]
pub struct IndexArgs {
    /// A static embedding model: an .edo model file (`edo quantize-model`) or a folder
    /// (model2vec, sentence-transformers StaticEmbedding).
    model: PathBuf,
    /// The corpus: one document per line (empty lines are skipped).
    corpus: PathBuf,
    /// The index to write: an .edo file of the lines' sentence vectors in INT8, the lines as its
    /// vocabulary.
    #[arg(short, long)]
    output: PathBuf,
}

#[derive(Args)]
pub struct QueryArgs {
    /// An index written by `edo index`.
    index: PathBuf,
    /// The model that wrote it (default: the path the index recorded).
    #[arg(long)]
    model: Option<PathBuf>,
    /// The question.
    query: String,
    /// Results (1 to 1024).
    #[arg(short, long, default_value_t = 10)]
    k: usize,
    /// Hamming candidates per result that INT8 rescoring ranks.
    #[arg(long, default_value_t = 4)]
    multiplier: usize,
}

pub fn index(a: IndexArgs) -> Result<(), Failure> {
    let model = StaticModel::open(&a.model)?;
    let text = std::fs::read_to_string(&a.corpus).map_err(|e| Failure::new(exit::NO_INPUT, format!("{}: {e}", a.corpus.display())))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return Err(Failure::new(exit::DATA, format!("{}: no lines to index", a.corpus.display())));
    }
    let bar = indicatif::ProgressBar::new(lines.len() as u64);
    bar.set_style(indicatif::ProgressStyle::with_template("  embedding {bar:40} {pos}/{len} lines").expect("a valid template"));
    let started = std::time::Instant::now();
    let mut vectors = Vec::with_capacity(lines.len() * model.dim());
    for chunk in lines.chunks(1024) {
        vectors.extend(model.encode(chunk)?);
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let table = PackedTable::quantize(Format::Int8, &vectors, lines.len(), model.dim())?;
    let mut file = TableFile::new(table).with_vocab(Vocab::new(lines.iter().map(|l| l.to_string()).collect()))?;
    let model_path = std::fs::canonicalize(&a.model).unwrap_or_else(|_| a.model.clone());
    file.set_metadata("index.model", model_path.display().to_string())?;
    file.set_metadata(MODEL_CRC_KEY, model_crc32(&model)?.to_string())?;
    file.write(&a.output)?;
    println!(
        "indexed {} lines in {:.2} s ({:.0} lines/s): {} × {} INT8 vectors, {} → {}",
        lines.len(),
        seconds,
        lines.len() as f64 / seconds,
        lines.len(),
        model.dim(),
        crate::bench::human_bytes(file.table().bytes()),
        a.output.display()
    );
    Ok(())
}

/// The metadata key of an index's model's checksum ([`model_crc32`]).
const MODEL_CRC_KEY: &str = "index.model_crc32";

/// A checksum of what a model's vectors come from: each token id's packed row and weight (so
/// its mapping, and not the order its rows are stored in), the rows' format, normalisation and
/// truncation. Another model — even one of the same dim and format — has another; the same
/// model from another path, or reordered, has the same. (Its tokenizer is not covered.)
fn model_crc32(model: &StaticModel) -> Result<u32, Failure> {
    let mut crc = crc32fast::Hasher::new();
    let table = model.table();
    let settings = (table.format().name(), table.dim(), model.vocab_size(), model.normalize(), model.max_length(), model.truncation());
    crc.update(format!("{settings:?}\0").as_bytes());
    for id in 0..model.vocab_size() as u32 {
        let (row, weight) = model.row_of(id)?;
        crc.update(bytemuck::cast_slice(table.row(row)));
        crc.update(&weight.to_bits().to_le_bytes());
    }
    Ok(crc.finalize())
}

pub fn query(a: QueryArgs) -> Result<(), Failure> {
    if a.k == 0 || a.multiplier == 0 {
        return Err(Failure::new(exit::USAGE, "-k and --multiplier must be at least 1"));
    }
    let file = TableFile::open(&a.index)?;
    let (Some(lines), Some(recorded)) = (file.vocab(), file.metadata().get(MODEL_CRC_KEY)) else {
        return Err(Failure::new(exit::DATA, format!("{}: not an index written by `edo index` (it records no model)", a.index.display())));
    };
    let model_path = match (&a.model, file.metadata().get("index.model")) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => PathBuf::from(p),
        (None, None) => return Err(Failure::new(exit::USAGE, "the index does not name its model: give --model")),
    };
    let model = StaticModel::open(&model_path).map_err(|e| {
        let mut f = Failure::from(e);
        if a.model.is_none() {
            f.message = format!("{} (the model {} records; give another with --model)", f.message, a.index.display());
        }
        f
    })?;
    let table = file.table();
    if table.dim() != model.dim() {
        return Err(Failure::new(exit::USAGE, format!("the index has {} dims, the model {}: not the model that wrote it", table.dim(), model.dim())));
    }
    if *recorded != model_crc32(&model)?.to_string() {
        return Err(Failure::new(
            exit::USAGE,
            format!(
                "{} is not the model that wrote {} (the index records another model's checksum): query with that model, or index the lines again with this one",
                model_path.display(),
                a.index.display()
            ),
        ));
    }
    // More results than lines asks for every line; past a search's limit, it is the -k given.
    let k = a.k.min(table.rows());
    if k > edo::search::MAX_K {
        return Err(Failure::new(exit::USAGE, format!("-k {}: a search returns at most {} results", a.k, edo::search::MAX_K)));
    }
    // Every row is read below: a damaged index is an error, not wrong neighbours.
    file.verify()?;
    let started = std::time::Instant::now();
    // Binary codes of the corpus (x > 0 of its INT8 rows) find candidates; INT8 rescores them.
    let codes = table.requantize(Format::Binary)?;
    let query = model.encode(&[a.query.as_str()])?;
    if query.iter().all(|&x| x == 0.0) {
        eprintln!("edo: note: the model knows no token of {:?}: its vector is zero, and every line scores 0 against it", a.query);
    }
    // A binary index made through a transform (edo quantize --itq) searches with it.
    let found = edo::search::search_rescored_with(&codes, file.code_transform(), &query, table, k, a.multiplier)?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    println!("{} of {} lines for {:?} ({ms:.1} ms, binary candidates rescored in {}):", found.k, table.rows(), a.query, table.format());
    for (rank, (&id, &score)) in found.ids.iter().zip(&found.scores).enumerate() {
        println!("{:>3}. {score:+.4}  {}", rank + 1, lines.token(id).unwrap_or("?"));
    }
    Ok(())
}
