//! The benchmark table of issue 4, reproducing the "Faster MySQL with
//! HTTP/3" article's six shapes × three clients on loopback and on an
//! emulated WAN (1 % and 0 % loss), with real parts throughout: a private
//! MariaDB with TLS, the release `myquic` binary as gateway and sidecars,
//! and `mysql_async` as every client.
//!
//! ```text
//! cargo bench --bench table                 # the whole table, ~12 min, needs root
//! cargo bench --bench table -- --smoke      # a few seconds per cell
//! cargo bench --bench table -- --no-wan --shape parallel --sweep 32 --skip-idle   # one shape, for profiling
//! cargo bench --bench table -- --no-wan --extra other='proxy --listen {port} --upstream {gateway_url}'
//! ```
//! Writes `benches/results/<date>-<host>/` (report.md, results.json, one
//! PNG per network) and, for full runs, the README's benchmark section.
//! `table driver JOB` is the load generator the harness re-executes inside
//! the client network namespace.

mod table {
    pub mod cell;
    pub mod certs;
    pub mod charts;
    pub mod data;
    pub mod driver;
    pub mod mariadb;
    pub mod net;
    pub mod perf;
    pub mod procs;
    pub mod report;
    pub mod run;
    pub mod stack;
    // The emulator is shared with tests/wan.rs, which uses other parts.
    #[allow(unused_imports)]
    #[path = "../wan/mod.rs"]
    pub mod wan;
}

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;

use table::driver::Shape;
use table::net::Net;
use table::report::{self, Machine};
use table::run::{self, NetResult, Settings};

#[derive(Parser, Debug)]
#[command(about = "myquic benchmark table: direct MySQL+TLS vs sidecar over HTTP/2 and HTTP/3")]
struct Args {
    /// A few seconds per cell, for development (results marked as smoke).
    #[arg(long)]
    smoke: bool,
    /// Loopback only (skip the emulated WAN).
    #[arg(long)]
    no_wan: bool,
    /// Only these networks (repeatable): loopback, wan-1pct, wan-0pct.
    #[arg(long = "net", value_name = "ID")]
    nets: Vec<String>,
    /// Only these shapes (repeatable): connect, parallel, medium-select,
    /// medium-insert, large-select, large-insert.
    #[arg(long = "shape", value_name = "ID")]
    shapes: Vec<String>,
    /// Pool sizes of the loopback connection sweep (parallel SELECT 1),
    /// comma-separated; "none" for no sweep.
    #[arg(long, value_name = "N,N,…", default_value = "1,8,32,128,512")]
    sweep: String,
    /// Skip the 1,000-idle-clients memory measurement.
    #[arg(long)]
    skip_idle: bool,
    /// Seconds of timed load per cell (default 8, smoke 1.5).
    #[arg(long)]
    budget_secs: Option<f64>,
    /// An extra client, NAME='shell command' that listens for MySQL
    /// clients on 127.0.0.1:{port}. Placeholders: {port}, {gateway_url},
    /// {gateway_host}, {gateway_port}, {ca}, {user}, {password} (the API
    /// credentials, which the harness also logs in with). Repeatable.
    #[arg(long, value_name = "NAME=COMMAND")]
    extra: Vec<String>,
    /// Results directory (default benches/results/<date>-<host>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Keep the scratch directory (server logs, configs, certificates).
    #[arg(long)]
    keep_scratch: bool,
    /// On the WAN: jumbo-frame devices at both ends and a link that drops
    /// IP packets over this size without a word (a path-MTU black hole);
    /// 0 (default): 1,500-byte devices.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    wan_path_mtu: usize,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("driver") {
        table::driver::main(argv.get(2).map(String::as_str).unwrap_or("{}"));
        return;
    }
    let args = Args::parse();
    if let Err(e) = orchestrate(args, &argv) {
        eprintln!("table: {e:#}");
        std::process::exit(1);
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn orchestrate(args: Args, argv: &[String]) -> anyhow::Result<()> {
    if !is_root() {
        bail!("needs root (network namespaces, nftables)");
    }
    let extras = args
        .extra
        .iter()
        .map(|e| {
            e.split_once('=')
                .map(|(n, c)| (n.to_string(), c.to_string()))
                .with_context(|| format!("--extra {e:?}: expected NAME=COMMAND"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let shapes = args
        .shapes
        .iter()
        .map(|id| {
            Shape::ALL
                .into_iter()
                .find(|s| s.id() == id)
                .with_context(|| format!("--shape {id:?}: not a shape"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let sweep = match args.sweep.as_str() {
        "none" => Vec::new(),
        list => list
            .split(',')
            .map(|n| n.trim().parse::<usize>().ok().filter(|n| *n > 0))
            .collect::<Option<Vec<_>>>()
            .with_context(|| format!("--sweep {list:?}: expected pool sizes like 1,8,32"))?,
    };
    let settings = Settings {
        shapes,
        sweep,
        idle: !args.skip_idle,
        smoke: args.smoke,
        wan: !args.no_wan,
        budget: Duration::from_secs_f64(args.budget_secs.unwrap_or(if args.smoke {
            1.5
        } else {
            8.0
        })),
        min_ops: if args.smoke { 1 } else { 3 },
        extras,
    };
    let machine = Machine::probe();
    let charts_ok = table::charts::init_font();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut scratch = tempfile::Builder::new().prefix("myqb").tempdir()?;
    if args.keep_scratch {
        scratch.disable_cleanup(true);
        eprintln!("scratch (kept): {}", scratch.path().display());
    }
    let mut nets: Vec<NetResult> = Vec::new();
    let mut skipped = Vec::new();

    let wanted = |id: &str| args.nets.is_empty() || args.nets.iter().any(|n| n == id);
    if wanted("loopback") {
        let lo = Net::loopback()?;
        nets.push(run::run_network(&rt, &lo, &settings, scratch.path())?);
    }
    if settings.wan {
        for loss in [0.01, 0.0] {
            if !wanted(&format!("wan-{}pct", (loss * 100.0f64).round())) {
                continue;
            }
            // Bounded: the emulator tears itself down if this run dies.
            match Net::wan(loss, args.wan_path_mtu, Duration::from_secs(30 * 60)) {
                Ok(net) => match run::run_network(&rt, &net, &settings, scratch.path()) {
                    Ok(r) => {
                        if args.wan_path_mtu > 0 {
                            eprintln!(
                                "[{}] packets over the path MTU dropped: {}",
                                net.id,
                                net.mtu_drops()
                            );
                        }
                        nets.push(r)
                    }
                    Err(e) => skipped.push(format!("{}: {e:#}", net.label)),
                },
                Err(e) => skipped.push(format!("WAN with {} % loss: {e}", loss * 100.0)),
            }
        }
    } else {
        skipped.push("the emulated WAN (run with --no-wan)".into());
    }

    let dir = run::results_dir(args.out.clone(), &machine.date, &machine.host);
    std::fs::create_dir_all(&dir)?;
    let mut charts = Vec::new();
    if charts_ok {
        for n in &nets {
            let file = format!("{}.png", n.id);
            let title = format!("{} — {} on {}", n.label, machine.date, machine.host);
            match table::charts::draw(n, &title, &dir.join(&file)) {
                Ok(()) => charts.push((n.id.clone(), file)),
                Err(e) => eprintln!("chart {file}: {e}"),
            }
        }
    } else {
        skipped.push("charts (no DejaVu font: apt-get install fonts-dejavu-core)".into());
    }
    let large_bytes = nets
        .iter()
        .find_map(|n| report::find(&n.cells, "direct", Shape::LargeSelect))
        .map(|c| c.payload_bytes)
        .unwrap_or(0);
    let shown: Vec<&str> = argv[1..]
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--bench")
        .collect();
    let command = format!("cargo bench --bench table -- {}", shown.join(" "));
    let cx = report::Context {
        machine: &machine,
        nets: &nets,
        skipped: &skipped,
        command: command.trim_end_matches([' ', '-']).trim_end().to_string(),
        smoke: settings.smoke,
        budget_secs: settings.budget.as_secs_f64(),
        min_ops: settings.min_ops,
        large_bytes,
        charts,
        sweep: args.sweep.clone(),
    };
    let md = report::render(&cx);
    std::fs::write(dir.join("report.md"), &md)?;
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&serde_json::json!({ "machine": machine, "networks": nets }))?,
    )?;
    if !settings.smoke && args.out.is_none() {
        update_readme(&dir, &cx)?;
    }
    println!("{md}");
    eprintln!("wrote {}", dir.join("report.md").display());
    Ok(())
}

/// Rewrites the README's block between the bench markers: the latest
/// charts, with the date and machine they came from.
fn update_readme(dir: &std::path::Path, cx: &report::Context) -> anyhow::Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let readme = root.join("README.md");
    let text = std::fs::read_to_string(&readme)?;
    let (begin, end) = ("<!-- bench:begin -->", "<!-- bench:end -->");
    let (Some(b), Some(e)) = (text.find(begin), text.find(end)) else {
        return Ok(());
    };
    let rel = dir.strip_prefix(&root).unwrap_or(dir).display().to_string();
    let m = cx.machine;
    let mut block = format!(
        "{begin}\nLatest run: **{}** on `{}` ({} × {}, Linux {}; every process on the same cores). \
         Full report: [{rel}/report.md]({rel}/report.md).\n",
        m.date, m.host, m.cores, m.cpu, m.kernel
    );
    let targets = report::targets(cx.nets);
    let met = targets.iter().filter(|t| t.met).count();
    block.push_str(&format!(
        "\nTargets met: {met} of {}. Missed:\n\n",
        targets.len()
    ));
    for t in targets.iter().filter(|t| !t.met) {
        block.push_str(&format!("- {} — {}\n", t.what, t.figure));
    }
    for (id, file) in &cx.charts {
        let label = cx
            .nets
            .iter()
            .find(|n| &n.id == id)
            .map(|n| n.label.as_str())
            .unwrap_or(id);
        block.push_str(&format!("\n![{label}]({rel}/{file})\n"));
    }
    let new = format!("{}{block}{}", &text[..b], &text[e..]);
    std::fs::write(readme, new)?;
    Ok(())
}
