//! The timeline picture (SVG) of a run, for a person to look at: grabs per second by
//! answer, the slowest grab of each second, the faults on each target, and each app
//! process's answered calls per second. One column per second.

use crate::history::{Fault, FaultKind, Op, OpKind};
use std::fmt::Write;

const LEFT: f64 = 110.0;
const WIDTH: f64 = 1000.0;
const LANE: f64 = 16.0;

/// The picture of `ops` and `faults` over `seconds`, with `processes` app processes.
pub fn svg(title: &str, ops: &[Op], faults: &[Fault], seconds: usize, processes: usize) -> String {
    let seconds = seconds.max(1);
    let x = |ms: u64| LEFT + WIDTH * (ms as f64 / 1_000.0) / seconds as f64;
    let col = WIDTH / seconds as f64;
    let mut out = String::new();
    // Grabs per second by answer: granted, refused (4xx), busy (503), no answer.
    let mut per_sec = vec![[0usize; 4]; seconds + 1];
    let mut slowest = vec![0u64; seconds + 1];
    let mut by_process = vec![vec![0usize; seconds + 1]; processes];
    for op in ops {
        let s = ((op.invoked / 1_000) as usize).min(seconds);
        if op.status.is_some() {
            by_process[op.process][s] += 1;
        }
        if op.kind != OpKind::Grab {
            continue;
        }
        let class = match op.status {
            Some(200) => 0,
            Some(503) => 2,
            Some(_) => 1,
            None => 3,
        };
        per_sec[s][class] += 1;
        slowest[s] = slowest[s].max(op.took());
    }
    let peak = per_sec.iter().map(|c| c.iter().sum::<usize>()).max().unwrap_or(1).max(1) as f64;
    let (grabs_top, grabs_h) = (40.0, 120.0);
    let (lat_top, lat_h) = (grabs_top + grabs_h + 30.0, 80.0);
    // A lane per app, then one per other target hit (Redis, a cluster node, the database).
    let mut targets: Vec<String> = (1..=processes).map(|i| format!("app-{i}")).collect();
    let mut others: Vec<String> = faults.iter().map(|f| f.target.clone()).filter(|t| !targets.contains(t)).collect();
    others.sort();
    others.dedup();
    targets.extend(others);
    // Room for the legend's three rows above the lanes.
    let faults_top = lat_top + lat_h + 58.0;
    let procs_top = faults_top + LANE * targets.len() as f64 + 30.0;
    let height = procs_top + LANE * 2.0 * processes as f64 + 60.0;
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="14">{title}</text>
"#,
        w = LEFT + WIDTH + 20.0
    );
    let colours = ["#2ca02c", "#7f7f7f", "#ff7f0e", "#d62728"];
    let _ = writeln!(out, r#"<text x="10" y="{}">grabs/s (peak {peak})</text>"#, grabs_top + 12.0);
    for (s, counts) in per_sec.iter().enumerate() {
        let mut y = grabs_top + grabs_h;
        for (class, &n) in counts.iter().enumerate() {
            let h = grabs_h * n as f64 / peak;
            if n > 0 {
                y -= h;
                let _ = writeln!(
                    out,
                    r#"<rect x="{:.1}" y="{y:.1}" width="{col:.2}" height="{h:.1}" fill="{}"/>"#,
                    x(s as u64 * 1_000),
                    colours[class]
                );
            }
        }
    }
    for (i, label) in ["granted", "refused (4xx)", "busy (503)", "no answer"].iter().enumerate() {
        let lx = LEFT + 10.0 + 110.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{lx}" y="26" width="10" height="10" fill="{}"/><text x="{}" y="35">{label}</text>"#,
            colours[i],
            lx + 14.0
        );
    }
    // The slowest grab of each second, on a log scale from 1 ms to 10 s.
    let _ = writeln!(
        out,
        r#"<text x="10" y="{}">slowest grab</text><text x="10" y="{}">(1 ms–10 s, log)</text>"#,
        lat_top + 12.0,
        lat_top + 26.0
    );
    let y_of = |ms: u64| lat_top + lat_h - lat_h * ((ms.max(1) as f64).log10() / 4.0).min(1.0);
    let _ = writeln!(
        out,
        r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ccc" stroke-dasharray="4"/><text x="{}" y="{y:.1}">2 s</text>"##,
        LEFT + WIDTH,
        LEFT + WIDTH + 2.0,
        y = y_of(2_000)
    );
    let points: Vec<String> = slowest
        .iter()
        .enumerate()
        .filter(|(_, ms)| **ms > 0)
        .map(|(s, ms)| format!("{:.1},{:.1}", x(s as u64 * 1_000) + col / 2.0, y_of(*ms)))
        .collect();
    let _ = writeln!(out, r##"<polyline fill="none" stroke="#1f77b4" points="{}"/>"##, points.join(" "));
    // The faults, one lane per target.
    for (i, target) in targets.iter().enumerate() {
        let y = faults_top + LANE * i as f64;
        let _ = writeln!(out, r#"<text x="10" y="{:.1}">{target}</text>"#, y + 11.0);
        for f in faults.iter().filter(|f| &f.target == target) {
            let w = (x(f.end) - x(f.start)).max(2.0);
            let _ = writeln!(
                out,
                r#"<rect x="{:.1}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{} {} ms</title></rect>"#,
                x(f.start),
                LANE - 3.0,
                f.kind.colour(),
                f.kind.name(),
                f.end - f.start
            );
        }
    }
    let legend_y = faults_top - 8.0;
    for (i, kind) in FaultKind::ALL.iter().enumerate() {
        // Three rows.
        let per_row = FaultKind::ALL.len().div_ceil(3);
        let (lx, legend_y) = (LEFT + 10.0 + 140.0 * (i % per_row) as f64, legend_y - 14.0 * (2 - i / per_row) as f64);
        let _ = writeln!(
            out,
            r#"<rect x="{lx}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{}" y="{:.1}">{}</text>"#,
            legend_y - 9.0,
            kind.colour(),
            lx + 14.0,
            legend_y,
            kind.name()
        );
    }
    // Each process's answered calls per second.
    let busiest = by_process.iter().flatten().copied().max().unwrap_or(1).max(1) as f64;
    for (p, counts) in by_process.iter().enumerate() {
        let base = procs_top + LANE * 2.0 * (p as f64 + 1.0);
        let _ = writeln!(out, r#"<text x="10" y="{:.1}">app-{} answers/s</text>"#, base - 4.0, p + 1);
        for (s, &n) in counts.iter().enumerate() {
            let h = (LANE * 2.0 - 4.0) * n as f64 / busiest;
            let _ = writeln!(
                out,
                r##"<rect x="{:.1}" y="{:.1}" width="{col:.2}" height="{h:.1}" fill="#1f77b4"/>"##,
                x(s as u64 * 1_000),
                base - h
            );
        }
    }
    let axis = procs_top + LANE * 2.0 * processes as f64 + 20.0;
    for s in (0..=seconds).step_by((seconds / 10).max(1)) {
        let _ = writeln!(out, r#"<text x="{:.1}" y="{axis:.1}">{s} s</text>"#, x(s as u64 * 1_000));
    }
    out.push_str("</svg>\n");
    out
}
