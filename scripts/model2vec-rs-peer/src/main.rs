//! model2vec-rs 0.4.0's `encode_flat` (all cores, its rayon pool) beside edo's
//! `StaticModel::encode` (all cores, its own pool), in one process, on the texts edo's
//! `edo bench embed --texts-out` wrote, in edo's batches (1, 32, 1024; at most 64 batches a run).
//! The two alternate run by run, so the machine's noise hits both alike. Prints, per batch,
//! `batch rs_texts_per_second edo_texts_per_second edo_over_rs`: the medians of `iters` runs
//! after one warm-up, and the median of the runs' ratios.
//!
//!     model2vec-rs-peer MODEL_DIR TEXTS_FILE [ITERS]

use model2vec_rs::model::StaticModel;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, model, texts, ..] = &args[..] else {
        eprintln!("usage: model2vec-rs-peer MODEL_DIR TEXTS_FILE [ITERS]");
        std::process::exit(2);
    };
    let iters: usize = args.get(3).map_or(7, |i| i.parse().expect("ITERS is a count"));
    let rs = StaticModel::from_pretrained(model, None, None, None).expect("a model2vec folder");
    let edo = edo::model::StaticModel::from_dir(model).expect("a model edo reads");
    let texts: Vec<String> = std::fs::read_to_string(texts).expect("the texts").lines().take(1024).map(String::from).collect();
    for batch in [1usize, 32, 1024] {
        let chunks: Vec<&[String]> = texts.chunks(batch).take((1024 / batch).clamp(1, 64)).collect();
        let strs: Vec<Vec<&str>> = chunks.iter().map(|c| c.iter().map(String::as_str).collect()).collect();
        let n: usize = chunks.iter().map(|c| c.len()).sum();
        let run_rs = || {
            let t = std::time::Instant::now();
            for c in &chunks {
                std::hint::black_box(rs.encode_flat(c));
            }
            t.elapsed().as_secs_f64()
        };
        let run_edo = || {
            let t = std::time::Instant::now();
            for c in &strs {
                std::hint::black_box(edo.encode(c).expect("edo encodes"));
            }
            t.elapsed().as_secs_f64()
        };
        run_rs();
        run_edo();
        let (mut t_rs, mut t_edo, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..iters {
            // Alternate which goes first, so neither always follows the other's warm caches.
            let (r, e) = if i % 2 == 0 {
                let r = run_rs();
                (r, run_edo())
            } else {
                let e = run_edo();
                (run_rs(), e)
            };
            t_rs.push(r);
            t_edo.push(e);
            ratios.push(r / e);
        }
        println!("{batch} {:.0} {:.0} {:.3}", n as f64 / median(t_rs), n as f64 / median(t_edo), median(ratios));
    }
}
