//! Codec costs on the gateway's hot path, as ratios against a baseline
//! measured in the same run (these machines are noisy; absolute times are
//! printed for context only).
//!
//! Shape: the HTTP/3 article's large SELECT, 10,000 rows × 11 columns
//! (≈2.6 MB here, one tenth of the article's 27.5 MB), run at 1×, 2× and 4×
//! to show how cost grows with result size.
//!
//! Last, what each zstd level costs per MB and saves on the benchmark
//! table's own data (benches/table/data.rs): the large INSERT's statement
//! (2,000 rows, 5.5 MB) whole, and cut in the 256 KiB pieces the gateway
//! streams rows in. From these, the link rate below which a level's extra
//! CPU is paid back by the bytes it saves.
//!
//! Run: `cargo bench --bench codec` (`-- --levels` for the zstd levels only)

use std::hint::black_box;
use std::time::{Duration, Instant};

use myquic::api::pb;
use myquic::api::{Codec, Encoding};
use myquic::translate::rows::pack_row;

// Only the data generator is used here.
#[allow(dead_code)]
#[path = "table/data.rs"]
mod data;

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
    if std::env::args().all(|a| a != "--levels") {
        formats_and_encodings();
    }
    zstd_levels();
}

/// zstd levels on the table's rows: size, compress and decompress time
/// per MB of input, and the break-even link rate against level 3: below
/// it the level's extra CPU time is smaller than the time its saved bytes
/// take on the link (the "pieces" size, as rows are streamed).
fn zstd_levels() {
    streamed_select_levels();
    let large = data::large_inserts("large_ins", data::LARGE_INSERT_ROWS).swap_remove(0);
    zstd_levels_of("the large INSERT statement", large.as_bytes());
    zstd_levels_of(
        "the medium INSERT statement",
        data::medium_insert("medium_ins").as_bytes(),
    );
}

fn zstd_levels_of(what: &str, input: &[u8]) {
    let mb = input.len() as f64 / 1e6;
    let pieces: Vec<&[u8]> = input.chunks(256 << 10).collect();
    let mut base: Option<(f64, f64)> = None;
    println!(
        "\nzstd on {what} ({} bytes); times per MB of input:\n",
        input.len()
    );
    println!(
        "| level | ratio, whole | ratio, 256 KiB pieces | compress ms/MB | decompress ms/MB | pays off below (vs level 3) |"
    );
    println!("|--:|--:|--:|--:|--:|--:|");
    for level in [-1, 1, 3, 4, 6, 9, 12, 15, 19] {
        let whole = zstd::bulk::compress(input, level).unwrap();
        let pieces_len: usize = pieces
            .iter()
            .map(|p| zstd::bulk::compress(p, level).unwrap().len())
            .sum();
        let runs = if level >= 12 { 1 } else { 5 };
        let t_c = time(runs, || {
            black_box(zstd::bulk::compress(black_box(input), level).unwrap());
        });
        let t_d = time(runs, || {
            black_box(zstd::bulk::decompress(black_box(&whole), input.len()).unwrap());
        });
        let (c_ms, out_bytes) = (t_c.as_secs_f64() * 1e3 / mb, pieces_len as f64 / mb);
        let payoff = match base {
            None if level == 3 => {
                base = Some((c_ms, out_bytes));
                "(baseline)".to_string()
            }
            Some((b_ms, b_bytes)) if out_bytes < b_bytes && c_ms > b_ms => {
                // Bytes saved per MB ÷ extra seconds per MB = bytes/s.
                let rate = (b_bytes - out_bytes) / ((c_ms - b_ms) / 1e3);
                format!("{:.1} Mbit/s", rate * 8.0 / 1e6)
            }
            Some((_, b_bytes)) if out_bytes >= b_bytes => "never (no smaller)".into(),
            _ => "–".into(),
        };
        println!(
            "| {level} | {:.3} | {:.3} | {c_ms:.1} | {:.1} | {payoff} |",
            input.len() as f64 / whole.len() as f64,
            input.len() as f64 / pieces_len as f64,
            t_d.as_secs_f64() * 1e3 / mb,
        );
    }
}

/// What the gateway compresses for the table's large SELECT: its 10,000
/// rows as psdb messages of about 256 KiB (`StreamSink`'s target), each
/// compressed on its own by one reused context, as the gateway does. Per
/// level: the ratio, the time per MB of input, and the link rate below
/// which it beats sending the bytes as they are (its CPU time per byte is
/// less than the time the bytes it saves take on the link) —
/// `api::effort`'s table.
fn streamed_select_levels() {
    let messages = select_messages();
    let input: usize = messages.iter().map(Vec::len).sum();
    let mb = input as f64 / 1e6;
    println!(
        "\nzstd on the large SELECT's rows as {} streamed messages ({input} bytes); times per MB of input:\n",
        messages.len()
    );
    println!(
        "| level | ratio | compress ms/MB | decompress ms/MB | beats none below | beats level 1 below |"
    );
    println!("|--:|--:|--:|--:|--:|--:|");
    let mut level1: Option<(f64, f64)> = None;
    let mut rows = Vec::new();
    for level in [-7, -5, -3, -1, 1, 2, 3, 6, 9, 19] {
        let mut ctx = zstd::bulk::Compressor::new(level).unwrap();
        let packed: Vec<Vec<u8>> = messages.iter().map(|m| ctx.compress(m).unwrap()).collect();
        let output: usize = packed.iter().map(Vec::len).sum();
        let runs = if level >= 9 { 1 } else { 5 };
        let t_c = time(runs, || {
            for m in &messages {
                black_box(ctx.compress(black_box(m)).unwrap());
            }
        });
        let mut dctx = zstd::bulk::Decompressor::new().unwrap();
        let t_d = time(runs, || {
            for (p, m) in packed.iter().zip(&messages) {
                black_box(dctx.decompress(black_box(p), m.len()).unwrap());
            }
        });
        let c_s_per_mb = t_c.as_secs_f64() / mb;
        let out_per_mb = output as f64 / mb;
        // Saved bytes per MB ÷ CPU seconds per MB = the rate (bytes/s)
        // at which the two times are equal.
        let vs_none = (1e6 - out_per_mb) / c_s_per_mb;
        if level == 1 {
            level1 = Some((c_s_per_mb, out_per_mb));
        }
        rows.push((
            level,
            input as f64 / output as f64,
            c_s_per_mb,
            t_d,
            out_per_mb,
            vs_none,
        ));
    }
    let (l1_s, l1_out) = level1.unwrap();
    for (level, ratio, c_s, t_d, out, vs_none) in rows {
        let vs_l1 = if level == 1 {
            "–".to_string()
        } else if out < l1_out && c_s > l1_s {
            format!("{:.0} Mbit/s", (l1_out - out) / (c_s - l1_s) * 8.0 / 1e6)
        } else if out >= l1_out && c_s >= l1_s {
            "never".to_string()
        } else if out >= l1_out {
            format!(
                "faster; above {:.0} Mbit/s",
                (out - l1_out) / (l1_s - c_s) * 8.0 / 1e6
            )
        } else {
            "always".to_string()
        };
        println!(
            "| {level} | {ratio:.3} | {:.2} | {:.2} | {:.0} Mbit/s | {vs_l1} |",
            c_s * 1e3,
            t_d.as_secs_f64() * 1e3 / mb,
            vs_none * 8.0 / 1e6,
        );
    }
}

/// The large table's rows, packed as psdb rows and encoded as the
/// `ExecuteResponse` messages the gateway streams (~256 KiB of rows each).
fn select_messages() -> Vec<Vec<u8>> {
    let mut messages = Vec::new();
    let mut pending = Vec::new();
    let mut pending_bytes = 0;
    let flush = |pending: &mut Vec<pb::Row>, messages: &mut Vec<Vec<u8>>| {
        let message = pb::ExecuteResponse {
            result: Some(pb::QueryResult {
                rows: std::mem::take(pending),
                ..Default::default()
            }),
            ..Default::default()
        };
        messages.push(Codec::Proto.encode(&message).to_vec());
    };
    for statement in data::large_inserts("large", data::LARGE_INSERT_ROWS) {
        let values = &statement[statement.find(" VALUES ").unwrap() + 8..];
        for cells in sql_tuples(values) {
            let row = pack_row(cells.iter().map(|c| Some(c.as_bytes())));
            pending_bytes += myquic::translate::rows::row_size(&row);
            pending.push(row);
            if pending_bytes >= 256 << 10 {
                flush(&mut pending, &mut messages);
                pending_bytes = 0;
            }
        }
    }
    if !pending.is_empty() {
        flush(&mut pending, &mut messages);
    }
    messages
}

/// The cells of `(a, 'b', …),(…)` as the server would return them: the
/// generator's strings hold no quotes or escapes.
fn sql_tuples(values: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let (mut row, mut cell, mut quoted) = (Vec::new(), String::new(), false);
    for ch in values.chars() {
        match ch {
            '\'' => quoted = !quoted,
            _ if quoted => cell.push(ch),
            '(' => {}
            ',' if !cell.is_empty() || !row.is_empty() => row.push(std::mem::take(&mut cell)),
            ')' => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            ' ' | ',' => {}
            _ => cell.push(ch),
        }
    }
    rows
}

fn formats_and_encodings() {
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
