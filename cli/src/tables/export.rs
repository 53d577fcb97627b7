//! `edo export`: a table file's rows as .npy, safetensors or text for other tools.

use super::*;

#[derive(Args)]
pub struct ExportArgs {
    /// The .edo table file.
    file: PathBuf,
    /// Output: .npy, .safetensors, .gguf (fp32, fp16 and ggml block formats) or .txt (word2vec
    /// text, always decoded values).
    #[arg(long, short)]
    output: PathBuf,
    /// Write decoded f32 values instead of the packed layout (FBGEMM fused rows, packbits, ggml
    /// blocks).
    #[arg(long)]
    dense: bool,
    /// Tensor name in a safetensors output (default weight) or a GGUF output (default
    /// token_embd.weight).
    #[arg(long)]
    tensor: Option<String>,
    /// Write a safetensors output as ONNX Runtime's GatherBlockQuantized inputs (tensors data,
    /// scales, zero_points): for tables in int4_zp32/64/128 or int8_zp32/64/128.
    #[arg(long, conflicts_with_all = ["dense", "tensor"])]
    gbq: bool,
}

pub fn export(a: ExportArgs) -> Result<(), Failure> {
    let file = open_table(&a.file)?;
    file.verify()?;
    if let Some(ct) = file.code_transform() {
        eprintln!(
            "edo: warning: {} holds {} codes; the export has the codes but not their transform (queries must go through (x − mean){} before their signs)",
            a.file.display(),
            ct.kind(),
            if ct.rotation().is_some() { "·R" } else { "" }
        );
    }
    let t = file.table();
    let array = || if a.dense { exp::dense_array(t) } else { exp::packed_array(t) };
    let (bytes, what) = match FileKind::from_path(&a.output) {
        Some(FileKind::Npy) => (array().to_npy(), layout_name(t.format(), a.dense)),
        Some(FileKind::Safetensors) if a.gbq => (edo::file::gbq::Gbq::from_table(t)?.to_safetensors(), "GatherBlockQuantized data, scales and zero points"),
        Some(FileKind::Safetensors) => {
            let mut meta = BTreeMap::new();
            meta.insert("edo.layout".to_string(), layout_name(t.format(), a.dense).to_string());
            meta.insert("edo.dim".to_string(), t.dim().to_string());
            if !a.dense {
                // So that `edo quantize` reads the rows back as they are, with no --layout.
                meta.insert("edo.format".to_string(), t.format().name().to_string());
            }
            (array().to_safetensors(a.tensor.as_deref().unwrap_or("weight"), &meta), layout_name(t.format(), a.dense))
        }
        Some(FileKind::Gguf) => {
            let dense;
            let table = if a.dense {
                dense = t.requantize(Format::F32)?;
                &dense
            } else {
                t
            };
            let mut bytes = Vec::new();
            let name = a.tensor.as_deref().unwrap_or(edo::file::gguf::EMBEDDING_TENSOR);
            edo::file::gguf::write(table, name, &[("general.name", &a.file.display().to_string()), ("edo.format", t.format().name())], &mut bytes)?;
            (bytes, if a.dense { "a GGUF tensor of decoded f32 values" } else { "a GGUF tensor of the table's ggml type" })
        }
        Some(FileKind::Text) => (exp::text(t, file.vocab())?.into_bytes(), "word2vec text (decoded f32)"),
        _ if a.gbq => return Err(Failure::new(exit::USAGE, format!("{}: --gbq writes a .safetensors file", a.output.display()))),
        _ => return Err(Failure::new(exit::USAGE, format!("{}: export writes .npy, .safetensors, .gguf or .txt", a.output.display()))),
    };
    std::fs::write(&a.output, &bytes).map_err(|e| Failure::new(exit::CANT_CREATE, format!("{}: {e}", a.output.display())))?;
    println!("wrote {}: {} rows × {} dim as {what}, {}", a.output.display(), t.rows(), t.dim(), mib(bytes.len() as u64));
    if FileKind::from_path(&a.output) == Some(FileKind::Npy) && !a.dense && !matches!(t.format(), Format::F32 | Format::F16) {
        // A .npy of bytes does not say what they are.
        println!(
            "  read it back: edo quantize {} --layout {} --dim {} --format {} -o TABLE.edo",
            a.output.display(),
            t.format().name(),
            t.dim(),
            t.format().name()
        );
    }
    Ok(())
}

pub(crate) fn layout_name(format: Format, dense: bool) -> &'static str {
    match (format, dense) {
        (_, true) | (Format::F32, _) => "f32 [rows, dim]",
        (Format::F16, _) => "f16 [rows, dim]",
        (Format::Int8, _) => "FBGEMM fused 8-bit rows, u8 [rows, dim + 8]",
        (Format::Int4, _) => "FBGEMM fused 4-bit rows, u8 [rows, ceil(dim/2) + 4]",
        (Format::Binary, _) => "numpy.packbits sign bits, u8 [rows, ceil(dim/8)]",
        (Format::BinaryScaled, _) => "packbits bits then f32 scale, u8 [rows, ceil(dim/8) + 4]",
        (f, _) if f.group() > 0 && f.ggml_type().is_some() => "ggml blocks as in GGUF, u8 [rows, bytes of a row's blocks]",
        _ => "codes then the row's parameters, u8 [rows, bytes of a row]",
    }
}
