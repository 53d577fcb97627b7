//! `edo reorder`: a table file with its most looked-up rows first, and its id map.

use super::*;

#[derive(Args)]
#[command(group(clap::ArgGroup::new("frequency").required(true).args(["trace", "counts", "texts"])))]
pub struct ReorderArgs {
    /// The .edo table or model file.
    file: PathBuf,
    /// The reordered file to write: a table's rows stored most looked-up first, with the id map
    /// that keeps lookups by the same ids; a model's the same way, its tokens mapped to their
    /// rows' new places (every text gets the same vector).
    #[arg(short, long)]
    output: PathBuf,
    /// A trace of looked-up ids (one a line, or a 1-D .npy of ids; for a model, ids of its
    /// table's rows): rows are ordered by how often it looks them up.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Lookup counts, one per row of the table (one a line, or a 1-D .npy).
    #[arg(long)]
    counts: Option<PathBuf>,
    /// For a model: a file of texts (one a line, `-`: standard input) like those it will embed;
    /// rows are ordered by how often their tokens look them up.
    #[arg(long)]
    texts: Option<PathBuf>,
}

/// `edo reorder`: the table's rows stored by frequency, the most looked-up first.
pub fn reorder(a: ReorderArgs) -> Result<(), Failure> {
    let file = open_table(&a.file)?;
    if let Some(t) = file.code_transform() {
        return Err(Failure::new(
            exit::DATA,
            format!(
                "{} holds {} codes: a reordered file would not keep their transform (reorder the table before quantising it to codes)",
                a.file.display(),
                t.kind()
            ),
        ));
    }
    if file.is_model() {
        return reorder_model(&a, &file);
    }
    if a.texts.is_some() {
        return Err(Failure::new(exit::USAGE, format!("--texts orders a model's rows; {} is a table: give --trace or --counts", a.file.display())));
    }
    file.verify()?;
    let t = file.table();
    let rows = t.rows();
    let Some(counts) = trace_or_counts(&a, rows)? else { return Err(Failure::new(exit::USAGE, "give --trace or --counts")) };
    let order = edo::prune::frequency_order(&counts);
    let reordered = edo::PrunedTable::reorder(t, &order)?;
    reordered.write(&a.output, Some(file.chunk_bytes()), file.metadata()).map_err(write_failure)?;
    println!("{}: {rows} rows reordered by lookup count; {}", a.output.display(), shares(&counts, &order));
    if file.vocab().is_some() {
        println!("(the vocabulary is not carried over: a reordered table is looked up by id)");
    }
    Ok(())
}

/// `edo reorder` of a model file: its rows by how often `--texts`' tokens (or `--trace`'s rows,
/// or `--counts`) look them up; the tokenizer's ids kept, its mapping sending them to the rows'
/// new places.
pub(crate) fn reorder_model(a: &ReorderArgs, file: &TableFile) -> Result<(), Failure> {
    let model = edo::model::StaticModel::from_edo(file)?;
    let rows = model.table().rows();
    let (counts, what): (Vec<u64>, String) = match &a.texts {
        Some(path) => {
            let (bytes, name) = if path.as_os_str() == "-" {
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes).map_err(|e| Failure::new(exit::NO_INPUT, format!("standard input: {e}")))?;
                (bytes, "standard input".to_string())
            } else {
                (read_input(path)?, path.display().to_string())
            };
            let text = String::from_utf8(bytes).map_err(|e| Failure::new(exit::DATA, format!("{name}: not UTF-8 text ({e})")))?;
            let lines: Vec<&str> = text.lines().collect();
            let mut counts = vec![0u64; rows];
            // A batch at a time: the tokens of a whole corpus need not be held at once.
            for (b, batch) in lines.chunks(4096).enumerate() {
                let batch_counts = model
                    .row_counts(batch)
                    .map_err(|e| Failure::new(exit::DATA, format!("{name}, lines {} to {}: {e}", b * 4096 + 1, b * 4096 + batch.len())))?;
                for (c, n) in counts.iter_mut().zip(batch_counts) {
                    *c += n;
                }
            }
            (counts, format!("{} texts' tokens", lines.len()))
        }
        None => match trace_or_counts(a, rows)? {
            Some(counts) => (counts, "lookup count".into()),
            None => return Err(Failure::new(exit::USAGE, "give --texts, --trace or --counts")),
        },
    };
    let order = edo::prune::frequency_order(&counts);
    let reordered = model.reorder(&order)?;
    let mut out = reordered.to_edo().with_chunk_bytes(file.chunk_bytes())?;
    for (k, v) in file.metadata() {
        out.set_metadata(k.clone(), v.clone())?;
    }
    out.write(&a.output).map_err(write_failure)?;
    println!("{}: the model's {rows} rows reordered by {what}; {}; every text gets the same vector", a.output.display(), shares(&counts, &order));
    Ok(())
}

/// `edo reorder`'s lookup counts of `rows` rows from --trace or --counts, or `None` if neither
/// was given. As `edo bench cache --trace`: a trace or counts file that does not fit is a usage
/// error.
pub(crate) fn trace_or_counts(a: &ReorderArgs, rows: usize) -> Result<Option<Vec<u64>>, Failure> {
    let in_file = |path: &Path, e: Error| Failure::new(exit::USAGE, format!("{}: {e}", path.display()));
    Ok(Some(match (&a.trace, &a.counts) {
        (Some(path), _) => {
            let ids = edo::cache::parse_trace(&read_input(path)?, Some(rows)).map_err(|e| in_file(path, e))?;
            edo::prune::lookup_counts(&ids, rows).map_err(|e| in_file(path, e))?
        }
        (None, Some(path)) => {
            let counts = edo::cache::parse_trace(&read_input(path)?, None).map_err(|e| in_file(path, e))?;
            if counts.len() != rows {
                return Err(in_file(path, Error::ShapeMismatch { what: "lookup counts (one per row of the table)", expected: rows, actual: counts.len() }));
            }
            counts.into_iter().map(u64::from).collect()
        }
        (None, None) => return Ok(None),
    }))
}

/// A file `edo reorder` reads.
pub(crate) fn read_input(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| Failure::new(exit::NO_INPUT, format!("{}: {e}", path.display())))
}

/// The share of the lookups the first 1 % and 10 % of the rows in `order` take.
pub(crate) fn shares(counts: &[u64], order: &[u32]) -> String {
    let total = counts.iter().sum::<u64>().max(1) as f64;
    let share = |n: usize| 100.0 * order[..n.min(order.len())].iter().map(|&r| counts[r as usize]).sum::<u64>() as f64 / total;
    format!(
        "the first 1 % of the stored rows take {:.1} % of the lookups, the first 10 % {:.1} %",
        share(order.len().div_ceil(100)),
        share(order.len().div_ceil(10))
    )
}
