//! Codec costs on the gateway's hot path, as ratios against a baseline
//! measured in the same run (these machines are noisy; absolute times are
//! printed for context only).
//!
//! Shape: the HTTP/3 article's large SELECT, 10,000 rows × 11 columns
//! (≈2.6 MB here, one tenth of the article's 27.5 MB), run at 1×, 2× and 4×
//! to show how cost grows with result size.
//!
//! Run: `cargo bench --bench codec`

use std::hint::black_box;
use std::time::{Duration, Instant};

use myquic::api::pb;
use myquic::api::{Codec, Encoding};
use myquic::translate::rows::pack_row;

fn result(rows: usize) -> pb::QueryResult {
    let fields = (0..11)
        .map(|i| pb::Field {
            name: format!("c{i}").into(),
            r#type: pb::Type::Varchar as i32,
            ..Default::default()
        })
        .collect();
    let rows = (0..rows)
        .map(|r| {
            let cells: Vec<Vec<u8>> = (0..11)
                .map(|c| {
                    format!(
                        "{r:08}-{c:02}-{}",
                        &"lorem ipsum dolor sit amet "[..(r + c) % 24]
                    )
                    .into_bytes()
                })
                .collect();
            pack_row(cells.iter().map(|c| Some(&c[..])))
        })
        .collect();
    pb::QueryResult {
        fields,
        rows,
        ..Default::default()
    }
}

/// Median of `runs` timings of `f`.
fn time(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    samples.sort();
    samples[runs / 2]
}

fn main() {
    println!("| rows | proto bytes | encode proto | JSON/proto size | JSON/proto encode time |");
    println!("|---:|---:|---:|---:|---:|");
    for scale in [1, 2, 4] {
        let r = result(10_000 * scale);
        let proto = Codec::Proto.encode(&r);
        let json = Codec::Json.encode(&r);
        let t_proto = time(9, || {
            black_box(Codec::Proto.encode(black_box(&r)));
        });
        let t_json = time(5, || {
            black_box(Codec::Json.encode(black_box(&r)));
        });
        println!(
            "| {} | {} | {:.1} ms | {:.2}× | {:.2}× |",
            r.rows.len(),
            proto.len(),
            t_proto.as_secs_f64() * 1e3,
            json.len() as f64 / proto.len() as f64,
            t_json.as_secs_f64() / t_proto.as_secs_f64()
        );
    }

    let body = Codec::Proto.encode(&result(10_000));
    // Baseline: copying the bytes once (what identity costs).
    let t_copy = time(15, || {
        black_box(body.to_vec());
    });
    println!();
    println!("| encoding | size vs identity | compress time vs copy | decompress time vs copy |");
    println!("|---|---:|---:|---:|");
    for enc in [
        Encoding::Snappy,
        Encoding::S2,
        Encoding::Zstd,
        Encoding::Gzip,
    ] {
        let packed = enc.compress(&body);
        let t_c = time(7, || {
            black_box(enc.compress(black_box(&body)));
        });
        let t_d = time(7, || {
            black_box(enc.decompress(packed.clone(), usize::MAX).unwrap());
        });
        println!(
            "| {} | {:.3} | {:.1}× | {:.1}× |",
            enc.as_str(),
            packed.len() as f64 / body.len() as f64,
            t_c.as_secs_f64() / t_copy.as_secs_f64(),
            t_d.as_secs_f64() / t_copy.as_secs_f64()
        );
    }
    println!(
        "\n(copy baseline: {:.2} ms for {} bytes)",
        t_copy.as_secs_f64() * 1e3,
        body.len()
    );
}
