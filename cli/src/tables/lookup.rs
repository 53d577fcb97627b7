//! `edo lookup`: rows of a table file by id (or by key, or through a reordered file's id map).

use super::*;

#[derive(Args)]
#[command(group(clap::ArgGroup::new("rows").required(true).args(["ids", "ids_file", "tokens"])))]
pub struct LookupArgs {
    /// The .edo table file (or model file: its ids are token ids, read from their rows as
    /// `edo embed` reads them).
    file: PathBuf,
    /// Row ids (a model's: token ids), comma separated.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    ids: Vec<String>,
    /// A file of row ids separated by commas, spaces or newlines (`-`: standard input), for more
    /// ids than a command line holds.
    #[arg(long)]
    ids_file: Option<PathBuf>,
    /// Tokens, comma separated (needs a table with a vocabulary).
    #[arg(long, value_delimiter = ',')]
    tokens: Vec<String>,
    /// Gather on the GPU (the table is uploaded from the memory-mapped file shard by shard).
    #[arg(long)]
    gpu: bool,
    /// Values printed per row (all with --json).
    #[arg(long, default_value_t = 8)]
    show: usize,
    /// Print the rows as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Row ids from text: each a number from 0 to 2³² − 1. A negative or malformed one is an error
/// with exit status `code` that says which.
pub(crate) fn parse_ids<'a>(items: impl Iterator<Item = &'a str>, code: u8) -> Result<Vec<u32>, Failure> {
    items
        .enumerate()
        .map(|(i, s)| match s.trim().parse::<i64>() {
            Ok(v) if v < 0 => Err(Failure::new(code, format!("ids[{i}] = {v} is negative: ids are rows, counted from 0"))),
            Ok(v) if v > u32::MAX as i64 => Err(Failure::new(code, format!("ids[{i}] = {v} is past the largest id, {}", u32::MAX))),
            Ok(v) => Ok(v as u32),
            Err(_) => Err(Failure::new(code, format!("ids[{i}] = {s:?} is not an id (a row number)"))),
        })
        .collect()
}

pub fn lookup(a: LookupArgs) -> Result<(), Failure> {
    require_edo(&a.file)?;
    if TableFile::open_stored(&a.file).is_ok_and(|f| f.keys().is_some()) {
        return lookup_keyed(a);
    }
    let Ok(file) = open_table_or_reordered(&a.file)? else { return lookup_reordered(a) };
    let t = file.table();
    let ids: Vec<u32> = if a.tokens.is_empty() {
        lookup_ids(&a)?
    } else if file.is_model() {
        return Err(Failure::new(
            exit::USAGE,
            format!("{} is a model: look its rows up by token id with --ids, or embed text with `edo embed`", a.file.display()),
        ));
    } else {
        let vocab = file.vocab().ok_or_else(|| Failure::new(exit::USAGE, format!("{} has no vocabulary; look rows up with --ids", a.file.display())))?;
        a.tokens.iter().map(|tok| vocab.id(tok)).collect::<Result<_, _>>()?
    };
    // A model's ids are its tokenizer's, each read from its row as encoding reads it (through
    // the model's mapping, when it has one: a quantised vocabulary, or reordered rows).
    let rows: Vec<u32> = if file.is_model() {
        let model = edo::model::StaticModel::from_edo(&file)?;
        if let Some((index, &id)) = ids.iter().enumerate().find(|&(_, &id)| id as usize >= model.vocab_size()) {
            return Err(Failure::new(exit::USAGE, format!("ids[{index}] = {id} is not a token id of the model's {}-token vocabulary", model.vocab_size())));
        }
        ids.iter().map(|&id| model.row_of(id).map(|(row, _)| row as u32)).collect::<Result<_, _>>()?
    } else {
        ids.clone()
    };
    Bounds::Error.check(&rows, t.rows())?;
    file.verify_ids(&rows)?;
    let values = if a.gpu {
        let engine = edo::Engine::new_blocking(edo::EngineOptions::default())?;
        file.verify()?;
        let gpu = edo::block_on(edo::GpuTable::upload(&engine, t))?;
        edo::block_on(edo::block_on(gpu.gather(&rows, Bounds::Error))?.read())?
    } else {
        edo::cpu::gather(t, &rows, Bounds::Error)?
    };
    let dim = t.dim();
    let token = |id: u32| file.vocab().and_then(|v| v.token(id)).map(str::to_string);
    // A model's row, named where it is not the id.
    let row_of = |i: usize| (file.is_model() && rows[i] != ids[i]).then_some(rows[i]);
    if a.json {
        let out: Vec<_> = ids
            .iter()
            .zip(values.chunks_exact(dim))
            .enumerate()
            .map(|(i, (&id, row))| json!({ "id": id, "token": token(id), "row": rows[i], "values": row }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&json!({ "format": t.format().name(), "dim": dim, "model": file.is_model(), "rows": out })).expect("JSON"));
    } else {
        for (i, (&id, row)) in ids.iter().zip(values.chunks_exact(dim)).enumerate() {
            let name = token(id).map_or(String::new(), |t| format!(" {t:?}"));
            let place = row_of(i).map_or(String::new(), |r| format!(" (row {r})"));
            println!("{id}{name}{place}: {}", shown_row(row, a.show));
        }
    }
    Ok(())
}

/// `[v0, v1, … n more]`: a row's first `show` values and how many are left out.
pub(crate) fn shown_row(row: &[f32], show: usize) -> String {
    let mut parts: Vec<String> = row.iter().take(show).map(|v| format!("{v:.5}")).collect();
    if row.len() > show {
        parts.push(format!("… {} more", row.len() - show));
    }
    format!("[{}]", parts.join(", "))
}

/// `edo lookup` of a reordered table (`edo reorder`): ids go through its id map.
/// `edo lookup` of a keyed table (a live table's snapshot, `edo update`): --ids are its 64-bit
/// keys.
pub(crate) fn lookup_keyed(a: LookupArgs) -> Result<(), Failure> {
    if !a.tokens.is_empty() || a.gpu {
        return Err(Failure::new(exit::USAGE, format!("{} is a keyed table: look rows up by key with --ids, on the CPU path", a.file.display())));
    }
    let text = match &a.ids_file {
        Some(path) => ids_file_text(path)?.1,
        None => a.ids.join(","),
    };
    let keys = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .enumerate()
        .map(|(i, s)| s.parse::<u64>().map_err(|_| Failure::new(exit::USAGE, format!("keys[{i}] = {s:?} is not a key (a number from 0 to 2⁶⁴ − 1)"))))
        .collect::<Result<Vec<u64>, _>>()?;
    let file = TableFile::open_stored(&a.file)?;
    let (format, dim) = (file.table().format(), file.table().dim());
    let table = edo::live::LiveTable::from_file(&file, edo::live::LiveOptions::new(format, dim).capacity(file.table().rows().max(1)))?;
    let values = table.gather(&keys, edo::live::Missing::Error).map_err(|e| Failure::new(exit::USAGE, e.to_string()))?;
    if a.json {
        let rows: Vec<_> = keys.iter().zip(values.chunks_exact(dim)).map(|(&key, row)| json!({ "key": key, "values": row })).collect();
        println!("{}", serde_json::to_string_pretty(&json!({ "format": format.name(), "dim": dim, "keyed": true, "rows": rows })).expect("JSON"));
    } else {
        for (&key, row) in keys.iter().zip(values.chunks_exact(dim)) {
            println!("{key}: {}", shown_row(row, a.show));
        }
    }
    Ok(())
}

pub(crate) fn lookup_reordered(a: LookupArgs) -> Result<(), Failure> {
    let pruned = edo::PrunedTable::open(&a.file)?;
    if !a.tokens.is_empty() {
        return Err(Failure::new(exit::USAGE, format!("{} is a reordered table: look rows up with --ids", a.file.display())));
    }
    let ids = lookup_ids(&a)?;
    Bounds::Error.check(&ids, pruned.original_rows())?;
    let values = if a.gpu {
        let engine = edo::Engine::new_blocking(edo::EngineOptions::default())?;
        let gpu = edo::block_on(edo::GpuPrunedTable::upload(&engine, &pruned))?;
        edo::block_on(edo::block_on(gpu.gather(&ids, Bounds::Error))?.read())?
    } else {
        edo::Lookup::gather(&pruned, &ids, Bounds::Error)?
    };
    let dim = pruned.dim();
    if a.json {
        let rows: Vec<_> = ids.iter().zip(values.chunks_exact(dim)).map(|(&id, row)| json!({ "id": id, "values": row })).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "format": pruned.table().format().name(), "dim": dim, "reordered": true, "rows": rows })).expect("JSON")
        );
    } else {
        for (&id, row) in ids.iter().zip(values.chunks_exact(dim)) {
            println!("{id}: {}", shown_row(row, a.show));
        }
    }
    Ok(())
}

/// The ids of `edo lookup` from --ids or --ids-file (`-`: standard input).
pub(crate) fn lookup_ids(a: &LookupArgs) -> Result<Vec<u32>, Failure> {
    match &a.ids_file {
        Some(path) => {
            let (name, text) = ids_file_text(path)?;
            let ids = parse_ids(text.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()), exit::DATA)?;
            if ids.is_empty() {
                return Err(Failure::new(exit::DATA, format!("{name}: no ids in it (row ids separated by commas, spaces or newlines)")));
            }
            Ok(ids)
        }
        None => parse_ids(a.ids.iter().map(String::as_str), exit::USAGE),
    }
}
