//! The `edo` command line.

mod bag_bench;
mod bench;
mod cache;
mod embed;
mod embed_bench;
mod index;
mod live;
mod plan;
mod reports;
mod search;
mod suite;
mod tables;

use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue};
use clap::{Args, CommandFactory, Parser, Subcommand};
use edo::Format;
use reports::bench::Config;

#[derive(Parser)]
#[command(
    name = "edo",
    version,
    about = "Portable embedding engine: compressed tables, GPU lookups",
    after_help = "Exit status: 0 success, 1 failure (GPU, internal), 2 bad arguments (including ids out of range, unknown \
                  tokens, k over 1024, a budget no plan fits, and a dim that packed rows need), 65 malformed input data, 66 input file missing or unreadable, 74 output not writable."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Quantise a built-in synthetic table to every format and compare memory, error and lookup
    /// speed on the GPU and the CPU path.
    #[command(
        mut_arg("rows", |a| a.help("Rows of the synthetic table [default: 1 000 000]")),
        mut_arg("ids", |a| a.help("Ids per lookup, uniformly random [default: 65 536]"))
    )]
    Demo(Common),
    /// Benchmarks: `edo bench suite` runs the whole matrix on every backend and writes JSON and
    /// an HTML report, `edo bench compare` sets runs side by side; `gather`, `search`, `cache`
    /// and `embed` time one operation. Without a subcommand: the gather benchmark.
    Bench(BenchArgs),
    /// Read a table (safetensors, .npy, word2vec/GloVe text, FBGEMM or packbits arrays, a GGUF
    /// tensor) and write it in any format to an .edo table file.
    Quantize(tables::QuantizeArgs),
    /// Show an .edo file's shape, format, size, checksums and quantisation error against its
    /// source, and write a picture of the table and its error; or list a GGUF file's tensors.
    Inspect(tables::InspectArgs),
    /// Print rows of an .edo file by id or by token.
    Lookup(tables::LookupArgs),
    /// Store a table's rows by how often a trace (or counts) looks them up, the most looked-up
    /// first, with an id map so lookups keep the same ids; or a model's, by how often a corpus's
    /// tokens look them up (the same vectors for every text).
    Reorder(tables::ReorderArgs),
    /// Write an .edo file's table as .npy, .safetensors (FBGEMM / packbits layouts or dense
    /// f32), a GGUF file or word2vec text.
    Export(tables::ExportArgs),
    /// Recall@1/10/100, memory and latency of binary, binary + rescoring, asymmetric, and
    /// exhaustive search over every format of values, against exact FP32 search, on a synthetic
    /// or given float table.
    Eval(search::EvalArgs),
    /// Now `edo bench search`.
    #[command(hide = true)]
    SearchBench(search::SearchBenchArgs),
    /// Now `edo bench cache`.
    #[command(hide = true)]
    CacheBench(cache::CacheBenchArgs),
    /// Sentence vectors from a static embedding model (model2vec, sentence-transformers'
    /// StaticEmbedding): text in, vectors out, on the CPU path or the GPU.
    Embed(embed::EmbedArgs),
    /// Write a static embedding model — table in any format, tokenizer, mapping, weights,
    /// settings — as one .edo model file, for `edo embed`, `edo index` and the browser.
    QuantizeModel(embed::QuantizeModelArgs),
    /// Now `edo bench embed`.
    #[command(hide = true)]
    EmbedBench(embed_bench::EmbedBenchArgs),
    /// Embed every line of a text file with a static model and write them, in INT8, as an .edo
    /// index for `edo query`.
    Index(index::IndexArgs),
    /// The lines of an index nearest a question: binary Hamming candidates, rescored in INT8.
    Query(index::QueryArgs),
    /// Replay an update log (batches of rows by 64-bit key) into a table file: new keys are
    /// inserted, known ones overwritten, batch by batch; the result is written as a keyed table.
    Update(live::UpdateArgs),
    /// Choose per table how to hold it in a GPU budget — resident in a format, cached, or mixed
    /// precision (hot rows FP16, cold rows INT4) — with the least expected error.
    Plan(plan::PlanArgs),
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct BenchArgs {
    #[command(subcommand)]
    command: Option<BenchCommand>,
    #[command(flatten)]
    gather: Common,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The benchmark suite: gather, bags, hashed bags, Hamming search with rescoring, the
    /// hot-row cache, latency against batch size (and a static model's embedding with --model),
    /// per format and table size, on every GPU adapter and the CPU path on one thread and on
    /// all. Writes a JSON results file and an HTML report with charts.
    Suite(suite::SuiteArgs),
    /// Set results files side by side (devices, runs, the browser's, the peers'): a table on the
    /// terminal, and with --html a report with one series per file and backend.
    Compare(suite::CompareArgs),
    /// Time the gather of every format on the GPU and the CPU path, as ratios to the device's
    /// own copy and to memcpy measured in the same run.
    Gather(Common),
    /// Time binary Hamming top-k (1M × 256-bit codes, 100 queries by default) on the GPU and the
    /// CPU path, as ratios to the device's copy and to each other.
    Search(search::SearchBenchArgs),
    /// Hot-row cache over a table several times larger than the cache, under a Zipf id stream:
    /// hit rate per policy, lookups/s against the fully resident table, bytes uploaded per id.
    Cache(cache::CacheBenchArgs),
    /// Texts and tokens per second of a static embedding model, for batches of 1, 32 and 1024
    /// short texts, on the CPU path and the GPU, per table format.
    Embed(embed_bench::EmbedBenchArgs),
    /// EmbeddingBag on the CPU path over a table file and index arrays a peer made (FBGEMM's
    /// fused rows through PyTorch: scripts/peers/fbgemm_peer.py): the median time as JSON, and the
    /// largest difference from the peer's output.
    Bags(bag_bench::BagBenchArgs),
    /// A live table: inserts and updates per second by batch size, lookup P50/P99 alone and
    /// beside an update stream, the longest lookup while snapshots are swapped in, and on a GPU
    /// the host's key translation against the whole lookup.
    Live(live::LiveBenchArgs),
    /// Precision that follows the traffic: the mean error of the rows looked up from a table
    /// tiered by frequency (FP16 for the hottest, a compact base for all) against all-INT8 at
    /// the same bytes and against a static plan, on a drifting, stationary or real id stream.
    Tiering(live::TieringBenchArgs),
}

#[derive(Args)]
struct Common {
    /// Rows of the synthetic table [default: 2 000 000, whose FP32 table (1 GiB) and INT8 one
    /// (272 MB) are over 4× a large GPU's L2; `edo demo`: 1 000 000]
    #[arg(long)]
    rows: Option<usize>,
    /// Values per row.
    #[arg(long, default_value_t = 128)]
    dim: usize,
    /// Ids per lookup, uniformly random [default: 1 048 576, so the rows and output a gather
    /// touches do not fit a GPU's L2; `edo demo`: 65 536]
    #[arg(long)]
    ids: Option<usize>,
    /// Timed repetitions (the median is reported).
    #[arg(long, default_value_t = 10, value_parser = parse_iters)]
    iters: usize,
    /// Formats to run, comma separated (default: all).
    #[arg(long, value_delimiter = ',', value_parser = FormatParser)]
    formats: Option<Vec<Format>>,
    /// Largest table shard in MiB (default: the device's storage-binding limit).
    #[arg(long)]
    shard_mib: Option<u64>,
    /// Run the CPU path only, even when a GPU is present.
    #[arg(long)]
    cpu: bool,
    /// Align each row on the GPU to this many bytes (a power of two from 4 to 256; FBGEMM's
    /// row_alignment): 16 lets rows of 8-bit codes (INT8, FP8, q8_0) of a dim that is a multiple
    /// of 16 be read sixteen codes a load. Rows stay packed on the CPU path.
    #[arg(long, value_name = "BYTES")]
    row_alignment: Option<usize>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// `--iters`'s parser: a count of timed repetitions, at least one (a median of none is nothing).
pub(crate) fn parse_iters(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("at least 1 repetition is needed".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

pub(crate) fn parse_format(s: &str) -> Result<Format, String> {
    Format::from_name(s).ok_or_else(|| format!("unknown format {s:?} ({})", Format::ALL.map(Format::name).join(", ")))
}

/// `--format`'s parser: [`parse_format`], and the possible values clap's help lists, both from
/// `Format::ALL` (no hand-kept list of formats in the command line's help).
#[derive(Clone, Copy)]
pub(crate) struct FormatParser;

impl clap::builder::TypedValueParser for FormatParser {
    type Value = Format;

    fn parse_ref(&self, cmd: &clap::Command, _arg: Option<&clap::Arg>, value: &std::ffi::OsStr) -> Result<Format, clap::Error> {
        let text = value.to_string_lossy();
        parse_format(&text).map_err(|message| clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{message}\n")).with_cmd(cmd))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(Format::ALL.iter().map(|f| clap::builder::PossibleValue::new(f.name()))))
    }
}

/// A failed command: the message for stderr and the exit status.
pub(crate) struct Failure {
    pub code: u8,
    pub message: String,
}

pub(crate) mod exit {
    pub const FAILURE: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const DATA: u8 = 65;
    pub const NO_INPUT: u8 = 66;
    pub const CANT_CREATE: u8 = 74;
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure { code, message: message.into() }
    }
}

/// edo-core's errors (quantising, the CPU path) as the edo errors of the same name.
impl From<edo::CoreError> for Failure {
    fn from(e: edo::CoreError) -> Failure {
        edo::Error::from(e).into()
    }
}

/// A suite run with nothing to run on is a usage error; a case's failure is edo's.
impl From<edo_bench::suite::SuiteError> for Failure {
    fn from(e: edo_bench::suite::SuiteError) -> Failure {
        match e {
            edo_bench::suite::SuiteError::NoBackend => Failure::new(exit::USAGE, e.to_string()),
            edo_bench::suite::SuiteError::Edo(e) => e.into(),
        }
    }
}

/// The GPU path's errors as the library's (the variant of the same name).
impl From<edo::gpu::Error> for Failure {
    fn from(e: edo::gpu::Error) -> Failure {
        edo::Error::from(e).into()
    }
}

impl From<edo::Error> for Failure {
    fn from(e: edo::Error) -> Failure {
        use edo::Error as E;
        let code = match &e {
            E::BadFile { .. }
            | E::UnsupportedVersion { .. }
            | E::Checksum { .. }
            | E::Parse { .. }
            | E::NonFinite { .. }
            | E::OutOfRange { .. }
            | E::BeyondF32 { .. }
            | E::ShapeMismatch { .. }
            | E::NonFiniteWeight { .. }
            | E::Tokenizer { .. }
            | E::UnsupportedTokenizer { .. }
            | E::TokenizerPart { .. }
            | E::NotAPermutation { .. }
            | E::TooFewRows { .. }
            | E::NotOrthogonal { .. }
            | E::Training { .. }
            | E::Unsupported(edo::Unsupported::ReorderedTableFile | edo::Unsupported::GgufTensorType) => exit::DATA,
            // A tensor asked for that is not there, or none asked for among several, or a dim left
            // open that the rows' width does not settle: say which.
            E::IdOutOfRange { .. } | E::UnknownToken { .. } | E::ZeroDim | E::MissingTensor { .. } | E::AmbiguousDim { .. } => exit::USAGE,
            // What the command line asked of a table that cannot do it: an argument to change.
            E::Unsupported(
                edo::Unsupported::GbqExportFormat
                | edo::Unsupported::GbqExportOddWidth
                | edo::Unsupported::GgufExportFormat
                | edo::Unsupported::GgufPartialBlocks
                | edo::Unsupported::HammingOfNonBinaryCodes
                | edo::Unsupported::CodeTransformOfNonBinary
                | edo::Unsupported::ReservedMetadataKey
                | edo::Unsupported::RowAlignment { .. }
                | edo::Unsupported::ZeroNeighbours
                | edo::Unsupported::ZipfExponent
                | edo::Unsupported::PlanWithoutFormats
                | edo::Unsupported::ChecksumChunkBytes,
            ) => exit::USAGE,
            E::Io { .. } | E::Remote { .. } => exit::NO_INPUT,
            _ => exit::FAILURE,
        };
        Failure { code, message: e.to_string() }
    }
}

/// The command line, parsed. A mistyped command that clap finds close to a hidden old name
/// (`search-bench`) is offered the name it has now (`bench search`, from the old one's "Now `edo
/// bench search`." help), not the old one.
fn parse() -> Cli {
    Cli::try_parse().unwrap_or_else(|mut e| {
        if let Some(ContextValue::Strings(names)) = e.get(ContextKind::SuggestedSubcommand) {
            let cmd = Cli::command();
            let now = |name: &String| {
                let about = cmd.find_subcommand(name).filter(|c| c.is_hide_set())?.get_about()?.to_string();
                Some(about.split('`').nth(1)?.strip_prefix("edo ")?.to_string())
            };
            let mut offered: Vec<String> = Vec::new();
            for name in names.iter().map(|n| now(n).unwrap_or_else(|| n.clone())) {
                if !offered.contains(&name) {
                    offered.push(name);
                }
            }
            e.insert(ContextKind::SuggestedSubcommand, ContextValue::Strings(offered));
        }
        e.exit()
    })
}

fn main() -> ExitCode {
    // `edo … | head` should end quietly when head has read enough, as other Unix tools do,
    // rather than panic on a failed print: restore the default SIGPIPE action Rust ignores.
    #[cfg(unix)]
    // SAFETY: sets a signal disposition before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Mesa's device-select Vulkan layer prints "XDG_RUNTIME_DIR is invalid" on headless machines
    // and chooses nothing edo needs (wgpu picks the adapter). Leave it on if the user steers it.
    if std::env::var_os("MESA_VK_DEVICE_SELECT").is_none() && std::env::var_os("NODEVICE_SELECT").is_none() {
        // Nothing else runs yet: no other thread can be reading the environment.
        std::env::set_var("NODEVICE_SELECT", "1");
    }
    let result = match parse().command {
        Command::Demo(c) => run_bench(c, true),
        Command::Bench(b) => match b.command {
            None => run_bench(b.gather, false),
            Some(BenchCommand::Gather(c)) => run_bench(c, false),
            Some(BenchCommand::Suite(a)) => suite::suite(a),
            Some(BenchCommand::Compare(a)) => suite::compare(a),
            Some(BenchCommand::Search(a)) => search::search_bench(a),
            Some(BenchCommand::Cache(a)) => cache::cache_bench(a),
            Some(BenchCommand::Embed(a)) => embed_bench::embed_bench(a),
            Some(BenchCommand::Bags(a)) => bag_bench::bag_bench(a),
            Some(BenchCommand::Live(a)) => live::live_bench(a),
            Some(BenchCommand::Tiering(a)) => live::tiering_bench(a),
        },
        Command::Quantize(a) => tables::quantize(a),
        Command::Inspect(a) => tables::inspect(a),
        Command::Lookup(a) => tables::lookup(a),
        Command::Reorder(a) => tables::reorder(a),
        Command::Export(a) => tables::export(a),
        Command::Eval(a) => search::eval(a),
        Command::SearchBench(a) => search::search_bench(a),
        Command::CacheBench(a) => cache::cache_bench(a),
        Command::Plan(a) => plan::run(a),
        Command::Update(a) => live::update(a),
        Command::Embed(a) => embed::embed(a),
        Command::EmbedBench(a) => embed_bench::embed_bench(a),
        Command::QuantizeModel(a) => embed::quantize_model(a),
        Command::Index(a) => index::index(a),
        Command::Query(a) => index::query(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("edo: error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn run_bench(common: Common, accuracy: bool) -> Result<(), Failure> {
    // The demo stays quick; the benchmark's working set is out of a big GPU's cache.
    let (rows, ids) = if accuracy { (1_000_000, 65_536) } else { (2_000_000, 1 << 20) };
    let config = Config {
        rows: common.rows.unwrap_or(rows),
        dim: common.dim,
        ids: common.ids.unwrap_or(ids),
        iters: common.iters,
        formats: common.formats.unwrap_or_else(|| Format::ALL.to_vec()),
        accuracy,
        cpu_only: common.cpu,
        // The benchmark times the f16 gather and bags of 16 too; the demo keeps to one gather a
        // format.
        f16_output: !accuracy,
        bag: (!accuracy).then_some(16),
        max_binding_bytes: common.shard_mib.map(|m| m << 20),
        row_alignment: common.row_alignment,
        ..Config::default()
    };
    if let Some(bytes) = common.row_alignment {
        edo::format::check_row_alignment(bytes).map_err(|e| Failure::new(exit::USAGE, format!("--row-alignment: {e}")))?;
    }
    if config.rows == 0 || config.dim == 0 || config.ids == 0 {
        return Err(Failure::new(exit::USAGE, "--rows, --dim and --ids must be at least 1"));
    }
    if common.shard_mib == Some(0) {
        return Err(Failure::new(exit::USAGE, "--shard-mib must be at least 1"));
    }
    let quiet = common.json;
    let report = reports::bench::run(&config, |step| {
        if !quiet {
            eprintln!("  … {step}");
        }
    })?;
    if common.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| Failure::new(exit::FAILURE, e.to_string()))?);
    } else {
        bench::print_report(&report, accuracy);
    }
    Ok(())
}
