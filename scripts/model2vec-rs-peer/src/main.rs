//! model2vec-rs 0.4.0's `encode_flat` (all cores, its rayon pool) on the texts edo's
//! `edo bench embed --texts-out` wrote, in edo's batches (1, 32, 1024; at most 64 batches a run):
//! prints `batch texts_per_second` lines, the median of `iters` runs after one warm-up.
//!
//!     model2vec-rs-peer MODEL_DIR TEXTS_FILE [ITERS]

use model2vec_rs::model::StaticModel;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, model, texts, ..] = &args[..] else {
        eprintln!("usage: model2vec-rs-peer MODEL_DIR TEXTS_FILE [ITERS]");
        std::process::exit(2);
    };
    let iters: usize = args.get(3).map_or(7, |i| i.parse().expect("ITERS is a count"));
    let model = StaticModel::from_pretrained(model, None, None, None).expect("a model2vec folder");
    let texts: Vec<String> = std::fs::read_to_string(texts).expect("the texts").lines().take(1024).map(String::from).collect();
    for batch in [1usize, 32, 1024] {
        let chunks: Vec<&[String]> = texts.chunks(batch).take((1024 / batch).clamp(1, 64)).collect();
        let n: usize = chunks.iter().map(|c| c.len()).sum();
        let mut run = || {
            let t = std::time::Instant::now();
            for c in &chunks {
                std::hint::black_box(model.encode_flat(c));
            }
            t.elapsed().as_secs_f64()
        };
        run();
        let mut times: Vec<f64> = (0..iters).map(|_| run()).collect();
        times.sort_by(f64::total_cmp);
        println!("{batch} {:.0}", n as f64 / times[times.len() / 2]);
    }
}
