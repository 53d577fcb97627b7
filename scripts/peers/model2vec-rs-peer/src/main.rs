//! model2vec-rs 0.4.0's `encode_flat` (all cores, its rayon pool) or edo's
//! `StaticModel::encode` (all cores, its own pool) — one of the two a process — on the texts edo's
//! `edo bench embed --texts-out` wrote, in edo's batches (1, 32, 1024; at most 64 batches a run).
//! Prints, per batch, `batch texts_per_second`: the median of `iters` runs after one warm-up.
//!
//!     model2vec-rs-peer MODEL_DIR TEXTS_FILE ITERS (edo | model2vec-rs)
//!
//! One library a process, because two thread pools in one process can disturb each other: the
//! idle threads of the one that ran last still poll for work (rayon's yield for a while before
//! they sleep) while the other runs; on a 2-core machine model2vec-rs's batch-32 figure moved
//! between 0.4 M and 1.2 M texts/s with what edo's threads did. `scripts/peers/model2vec_peer.py` runs
//! the two in many processes, alternating, and compares their medians.

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, model, texts, iters, which] = &args[..] else {
        eprintln!("usage: model2vec-rs-peer MODEL_DIR TEXTS_FILE ITERS (edo | model2vec-rs)");
        std::process::exit(2);
    };
    let iters: usize = iters.parse().expect("ITERS is a count");
    let texts: Vec<String> = std::fs::read_to_string(texts).expect("the texts").lines().take(1024).map(String::from).collect();
    let encode: Box<dyn Fn(&[String])> = match which.as_str() {
        "model2vec-rs" => {
            let rs = model2vec_rs::model::StaticModel::from_pretrained(model, None, None, None).expect("a model2vec folder");
            Box::new(move |batch| {
                std::hint::black_box(rs.encode_flat(batch));
            })
        }
        "edo" => {
            let edo = edo::model::StaticModel::from_dir(model).expect("a model edo reads");
            Box::new(move |batch| {
                let strs: Vec<&str> = batch.iter().map(String::as_str).collect();
                std::hint::black_box(edo.encode(&strs).expect("edo encodes"));
            })
        }
        other => {
            eprintln!("model2vec-rs-peer: runs edo or model2vec-rs, not {other:?}");
            std::process::exit(2);
        }
    };
    for batch in [1usize, 32, 1024] {
        let chunks: Vec<&[String]> = texts.chunks(batch).take((1024 / batch).clamp(1, 64)).collect();
        let n: usize = chunks.iter().map(|c| c.len()).sum();
        let run = || {
            let t = std::time::Instant::now();
            for c in &chunks {
                encode(c);
            }
            t.elapsed().as_secs_f64()
        };
        run();
        let times: Vec<f64> = (0..iters).map(|_| run()).collect();
        println!("{batch} {:.0}", n as f64 / median(times));
    }
}
