//! One PNG per network: p50 latency of each client relative to direct
//! (top) and throughput of every client (bottom), per shape. Drawn with
//! plotters' bitmap backend; text with ab_glyph from the DejaVu font
//! Debian ships (`fonts-dejavu-core`), read at run time.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::FontStyle;

use super::driver::Shape;
use super::report::{find, time_ratio};
use super::run::NetResult;

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers a font as "sans-serif"; false if none was found (then no
/// charts are drawn, and the report says so).
pub fn init_font() -> bool {
    for p in FONT_PATHS {
        if let Ok(bytes) = std::fs::read(p) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return true;
            }
        }
    }
    false
}

fn color(client: &str, i: usize) -> RGBColor {
    match client {
        "direct" => RGBColor(120, 120, 120),
        "sidecar h2" => RGBColor(31, 119, 180),
        "sidecar h3" => RGBColor(255, 127, 14),
        _ => [
            RGBColor(44, 160, 44),
            RGBColor(148, 103, 189),
            RGBColor(214, 39, 40),
        ][i % 3],
    }
}

fn shape_label(x: f64) -> String {
    let i = x.floor();
    if (x - i - 0.5).abs() < 0.01 && (0.0..6.0).contains(&i) {
        Shape::ALL[i as usize].short().to_string()
    } else {
        String::new()
    }
}

pub fn draw(n: &NetResult, title: &str, path: &Path) -> anyhow::Result<()> {
    let root = BitMapBackend::new(path, (1200, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 24))?;
    let (top, bottom) = root.split_vertically(450);

    // Top: p50 relative to direct, the non-direct clients.
    let others: Vec<&String> = n.clients.iter().filter(|c| *c != "direct").collect();
    let mut ratios = Vec::new();
    for (ci, client) in others.iter().enumerate() {
        for (si, shape) in Shape::ALL.into_iter().enumerate() {
            if let Some(r) = find(&n.cells, client, shape).and_then(|c| time_ratio(&n.cells, c)) {
                ratios.push((ci, si, r));
            }
        }
    }
    let ymax = ratios.iter().map(|r| r.2).fold(1.2f64, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&top)
        .caption(
            "time relative to direct MySQL+TLS (p50; parallel: inverse throughput) — below 1 is faster",
            ("sans-serif", 17),
        )
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..6f64, 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_labels(13)
        .x_label_formatter(&|x| shape_label(*x))
        .disable_x_mesh()
        .y_desc("× direct")
        .label_style(("sans-serif", 14))
        .draw()?;
    let width = 0.8 / others.len().max(1) as f64;
    for (ci, client) in others.iter().enumerate() {
        let c = color(client, ci);
        let bars: Vec<_> = ratios
            .iter()
            .filter(|r| r.0 == ci)
            .map(|&(_, si, r)| {
                let x0 = si as f64 + 0.1 + ci as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.9, r)], c.filled())
            })
            .collect();
        chart
            .draw_series(bars)?
            .label(client.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], c.filled()));
        chart.draw_series(ratios.iter().filter(|r| r.0 == ci).map(|&(_, si, r)| {
            let x = si as f64 + 0.1 + ci as f64 * width + width * 0.1;
            Text::new(format!("{r:.2}"), (x, r + ymax * 0.01), ("sans-serif", 12))
        }))?;
    }
    chart.draw_series(LineSeries::new(
        [(0.0, 1.0), (6.0, 1.0)],
        RED.stroke_width(2),
    ))?;
    // A cell that failed gets a mark where its bar would be, not a gap.
    for (ci, client) in others.iter().enumerate() {
        for (si, shape) in Shape::ALL.into_iter().enumerate() {
            let failed = n
                .cells
                .iter()
                .any(|c| &c.client == *client && c.shape == shape.label() && !c.ok());
            if failed {
                let x = si as f64 + 0.1 + ci as f64 * width;
                let style = ("sans-serif", 13).into_font().color(&RED);
                chart.draw_series([Text::new("failed", (x, ymax * 0.05), style)])?;
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;

    // Bottom: throughput, operations per second, every client, log scale.
    let tp: Vec<(usize, usize, f64)> = n
        .clients
        .iter()
        .enumerate()
        .flat_map(|(ci, client)| {
            Shape::ALL
                .into_iter()
                .enumerate()
                .filter_map(move |(si, shape)| {
                    find(&n.cells, client, shape).map(|c| (ci, si, c.ops_per_sec))
                })
        })
        .collect();
    let lo = tp.iter().map(|t| t.2).fold(f64::MAX, f64::min).min(1.0) / 2.0;
    let hi = tp.iter().map(|t| t.2).fold(1.0f64, f64::max) * 3.0;
    let mut chart = ChartBuilder::on(&bottom)
        .caption(
            "throughput, operations/s (log scale) — higher is better",
            ("sans-serif", 17),
        )
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..6f64, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_labels(13)
        .x_label_formatter(&|x| shape_label(*x))
        .disable_x_mesh()
        .y_desc("ops/s")
        .y_label_formatter(&|v| {
            if *v >= 1.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            }
        })
        .label_style(("sans-serif", 14))
        .draw()?;
    let width = 0.8 / n.clients.len().max(1) as f64;
    for (ci, client) in n.clients.iter().enumerate() {
        let c = color(client, ci.saturating_sub(1));
        chart
            .draw_series(tp.iter().filter(|t| t.0 == ci).map(|&(_, si, v)| {
                let x0 = si as f64 + 0.1 + ci as f64 * width;
                Rectangle::new([(x0, lo), (x0 + width * 0.9, v)], c.filled())
            }))?
            .label(client.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    root.present()?;
    Ok(())
}
