//! PNG charts of benchmark [`Report`]s, drawn with `plotters` (bitmap backend).
//!
//! [`write_plots`] writes into a directory:
//!
//! * `throughput.png` — grouped bars: one group per workload, one bar per engine,
//!   Mops/s, with a legend;
//! * `latency_cdf_<workload>.png` — one line per engine: latency (µs, log scale)
//!   against cumulative fraction, from [`Report::latency_cdf`];
//! * `timeline_<workload>.png` — one line per engine: ops/s in each second of the
//!   run, from [`Report::timeline`];
//! * `footprint_<workload>.png` — one line per engine: fast plus slow tier MB at the
//!   end of each second, from [`Report::footprint_timeline`].
//!
//! A workload whose reports carry no CDF points (or no timeline, or no footprint
//! samples) gets no such chart. Workload names are sanitized for file names (`[A-Za-z0-9_-]`).
//!
//! Fonts: plotters is built with its pure-Rust `ab_glyph` text renderer, not its
//! `ttf` feature (font-kit, which links fontconfig and freetype), so building
//! needs no system libraries. `ab_glyph` needs the bytes of a TrueType font at
//! run time: [`write_plots`] reads the file named by `$CASCADE_PLOT_FONT`, or else
//! the first of a few well-known system paths (DejaVu Sans from Debian's
//! `fonts-dejavu-core`, Liberation Sans, …), and returns an error if none exists.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::Report;

/// Environment variable naming a `.ttf`/`.otf` font file to draw text with.
pub const FONT_ENV: &str = "CASCADE_PLOT_FONT";

/// Font files tried, in order, when [`FONT_ENV`] is not set.
const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "/Library/Fonts/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

/// Chart size in pixels.
const SIZE: (u32, u32) = (1200, 700);

/// Series colours (Tableau 10), one per engine in order of first appearance.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Writes `throughput.png`, `latency_cdf_<workload>.png`, `timeline_<workload>.png` and
/// `footprint_<workload>.png`
/// for `reports` into `dir` (created if missing) and returns the files written.
///
/// # Errors
///
/// No usable font (see the module docs), or a directory or chart that cannot be
/// written; the message names the file.
pub fn write_plots(reports: &[Report], dir: &Path) -> Result<Vec<PathBuf>, String> {
    if reports.is_empty() {
        return Ok(Vec::new());
    }
    ensure_font()?;
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;

    let workloads = distinct(reports.iter().map(|r| r.workload.as_str()));
    let engines = distinct(reports.iter().map(|r| r.engine.as_str()));
    let color_of = |engine: &str| {
        let i = engines.iter().position(|e| *e == engine).unwrap_or(0);
        COLORS[i % COLORS.len()]
    };

    let mut written = Vec::new();

    let path = dir.join("throughput.png");
    throughput_chart(reports, &workloads, &engines, &color_of, &path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    written.push(path);

    for workload in &workloads {
        let runs: Vec<&Report> = reports.iter().filter(|r| r.workload == *workload).collect();
        let name = file_part(workload);

        if runs
            .iter()
            .any(|r| r.latency_cdf.iter().any(|&(_, us)| us > 0.0))
        {
            let path = dir.join(format!("latency_cdf_{name}.png"));
            cdf_chart(workload, &runs, &color_of, &path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            written.push(path);
        }
        if runs.iter().any(|r| !r.timeline.is_empty()) {
            let path = dir.join(format!("timeline_{name}.png"));
            timeline_chart(workload, &runs, &color_of, &path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            written.push(path);
        }
        if runs.iter().any(|r| !r.footprint_timeline.is_empty()) {
            let path = dir.join(format!("footprint_{name}.png"));
            footprint_chart(workload, &runs, &color_of, &path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            written.push(path);
        }
    }
    Ok(written)
}

/// Registers a font as plotters' `sans-serif` family, once per process.
fn ensure_font() -> Result<(), String> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let candidates: Vec<PathBuf> = match std::env::var_os(FONT_ENV) {
            Some(p) if !p.is_empty() => vec![PathBuf::from(p)],
            _ => FONT_CANDIDATES.iter().map(PathBuf::from).collect(),
        };
        let (path, bytes) = candidates
            .iter()
            .find_map(|p| std::fs::read(p).ok().map(|b| (p, b)))
            .ok_or_else(|| {
                format!(
                    "no font for plot text: set {FONT_ENV} to a .ttf file or install one of {} \
                     (Debian/Ubuntu: apt-get install fonts-dejavu-core)",
                    FONT_CANDIDATES.join(", ")
                )
            })?;
        // Read once per process; plotters keeps `&'static` font data.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{}: not a usable TrueType/OpenType font", path.display()))
    })
    .clone()
}

/// Distinct values in order of first appearance.
fn distinct<'a>(it: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for s in it {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// `name` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
fn file_part(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "_".to_string()
    } else {
        s
    }
}

/// A compact axis label: `1.5M`, `20k`, `3.2`, `0.05`.
fn short_num(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let digits = if x == 0.0 || x.abs() >= 100.0 || x.fract().abs() < 1e-9 {
        0
    } else if x.abs() >= 10.0 {
        1
    } else if x.abs() >= 0.1 {
        2
    } else {
        3
    };
    let s = format!("{x:.digits$}");
    // Drop trailing zeros of a fraction ("2.50" -> "2.5").
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{suffix}")
}

/// The middle of `a..b`.
#[expect(
    clippy::manual_midpoint,
    reason = "chart coordinates are far from overflow; f64::midpoint needs Rust 1.85"
)]
fn midpoint(a: f64, b: f64) -> f64 {
    (a + b) / 2.0
}

/// `throughput.png`: one bar group per workload, one bar per engine.
fn throughput_chart(
    reports: &[Report],
    workloads: &[&str],
    engines: &[&str],
    color_of: &dyn Fn(&str) -> RGBColor,
    path: &Path,
) -> Result<(), String> {
    let mops: HashMap<(&str, &str), f64> = reports
        .iter()
        .map(|r| {
            (
                (r.workload.as_str(), r.engine.as_str()),
                r.ops_per_sec / 1e6,
            )
        })
        .collect();
    let top = mops.values().copied().fold(0.0_f64, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    let n = workloads.len().max(1);

    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Throughput by workload", ("sans-serif", 30))
        .margin(20)
        .x_label_area_size(75)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5_f64..n as f64 - 0.5, 0.0_f64..top)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        // Workload names are drawn below, one under each bar group.
        .x_labels(0)
        .y_label_formatter(&|y| short_num(*y))
        .x_desc("workload")
        .y_desc("Mops/s")
        .label_style(("sans-serif", 18))
        .axis_desc_style(("sans-serif", 20))
        .draw()
        .map_err(|e| e.to_string())?;
    let name_style = ("sans-serif", 20)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (w, workload) in workloads.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(w as f64, 0.0));
        root.draw(&Text::new(*workload, (px, py + 8), name_style.clone()))
            .map_err(|e| e.to_string())?;
    }

    let group = 0.8;
    let bar = group / engines.len().max(1) as f64;
    for (e, engine) in engines.iter().enumerate() {
        let color = color_of(engine);
        let bars: Vec<(f64, f64, f64)> = workloads
            .iter()
            .enumerate()
            .filter_map(|(w, workload)| {
                mops.get(&(*workload, *engine)).map(|&v| {
                    let x0 = w as f64 - group / 2.0 + e as f64 * bar;
                    (x0, x0 + bar, v)
                })
            })
            .collect();
        chart
            .draw_series(bars.iter().map(|&(x0, x1, v)| {
                Rectangle::new(
                    [(x0 + bar * 0.05, 0.0), (x1 - bar * 0.05, v)],
                    color.filled(),
                )
            }))
            .map_err(|e| e.to_string())?
            .label(*engine)
            .legend(move |(x, y)| Rectangle::new([(x, y - 7), (x + 16, y + 7)], color.filled()));
        chart
            .draw_series(bars.iter().map(|&(x0, x1, v)| {
                Text::new(
                    short_num(v),
                    (midpoint(x0, x1), v),
                    ("sans-serif", 14)
                        .into_font()
                        .color(&BLACK)
                        .pos(Pos::new(HPos::Center, VPos::Bottom)),
                )
            }))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 18))
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// `latency_cdf_<workload>.png`: cumulative fraction against latency (log x).
fn cdf_chart(
    workload: &str,
    runs: &[&Report],
    color_of: &dyn Fn(&str) -> RGBColor,
    path: &Path,
) -> Result<(), String> {
    let series: Vec<(&str, Vec<(f64, f64)>)> = runs
        .iter()
        .map(|r| {
            let mut pts: Vec<(f64, f64)> = r
                .latency_cdf
                .iter()
                .filter(|&&(f, us)| us > 0.0 && f.is_finite())
                .map(|&(f, us)| (us, f))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
            (r.engine.as_str(), pts)
        })
        .collect();
    let all = series.iter().flat_map(|(_, p)| p.iter().map(|&(us, _)| us));
    let (lo, hi) = all.fold((f64::INFINITY, 0.0_f64), |(lo, hi), us| {
        (lo.min(us), hi.max(us))
    });
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo * 0.8, hi * 1.25)
    } else {
        (lo.min(1.0) * 0.5, lo.max(1.0) * 2.0)
    };

    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("Latency CDF — {workload}"), ("sans-serif", 30))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0_f64..1.02)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| short_num(*x))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .x_desc("latency (µs, log scale)")
        .y_desc("cumulative fraction")
        .label_style(("sans-serif", 18))
        .axis_desc_style(("sans-serif", 20))
        .draw()
        .map_err(|e| e.to_string())?;
    for (engine, pts) in series {
        let color = color_of(engine);
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(3)))
            .map_err(|e| e.to_string())?
            .label(engine)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 18))
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// `timeline_<workload>.png`: ops/s in each second of the run.
fn timeline_chart(
    workload: &str,
    runs: &[&Report],
    color_of: &dyn Fn(&str) -> RGBColor,
    path: &Path,
) -> Result<(), String> {
    let series: Vec<(&str, Vec<f64>)> = runs
        .iter()
        .map(|r| (r.engine.as_str(), r.timeline.clone()))
        .collect();
    per_second_chart(
        &format!("Throughput over time — {workload}"),
        "ops/s",
        &series,
        color_of,
        path,
    )
}

/// `footprint_<workload>.png`: fast plus slow tier MB at the end of each second.
fn footprint_chart(
    workload: &str,
    runs: &[&Report],
    color_of: &dyn Fn(&str) -> RGBColor,
    path: &Path,
) -> Result<(), String> {
    let series: Vec<(&str, Vec<f64>)> = runs
        .iter()
        .map(|r| {
            let mb = r.footprint_timeline.iter().map(|&b| b as f64 / 1e6);
            (r.engine.as_str(), mb.collect())
        })
        .collect();
    per_second_chart(
        &format!("Space in use over time — {workload}"),
        "MB (fast + slow tier)",
        &series,
        color_of,
        path,
    )
}

/// One line per engine over the seconds of a run.
fn per_second_chart(
    caption: &str,
    y_desc: &str,
    series: &[(&str, Vec<f64>)],
    color_of: &dyn Fn(&str) -> RGBColor,
    path: &Path,
) -> Result<(), String> {
    let secs = series.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    let x_hi = secs.saturating_sub(1).max(1) as f64;
    let top = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max);
    let top = if top > 0.0 { top * 1.1 } else { 1.0 };

    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 30))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0_f64..x_hi, 0.0_f64..top)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| short_num(*x))
        .y_label_formatter(&|y| short_num(*y))
        .x_desc("second")
        .y_desc(y_desc)
        .label_style(("sans-serif", 18))
        .axis_desc_style(("sans-serif", 20))
        .draw()
        .map_err(|e| e.to_string())?;
    for (engine, values) in series {
        let color = color_of(engine);
        let pts: Vec<(f64, f64)> = values
            .iter()
            .enumerate()
            .map(|(i, &v)| (i as f64, v))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(3)))
            .map_err(|e| e.to_string())?
            .label(*engine)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 18))
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(engine: &str, workload: &str, speed: f64) -> Report {
        // A log-normal-ish CDF: fraction f at latency base * 2^(8f) µs.
        let latency_cdf = (0..=100)
            .map(|i| {
                let f = f64::from(i) / 100.0;
                (f, 2.0 / speed * 2f64.powf(8.0 * f))
            })
            .collect();
        let timeline = (0..30)
            .map(|s| speed * 1e6 * (1.0 + 0.2 * (f64::from(s) / 3.0).sin()))
            .collect();
        let footprint_timeline = (0..30u64).map(|s| (1000 + 10 * s) << 20).collect();
        Report {
            engine: engine.to_string(),
            workload: workload.to_string(),
            ops_per_sec: speed * 1e6,
            latency_cdf,
            timeline,
            footprint_timeline,
            ..Report::default()
        }
    }

    #[test]
    fn writes_all_plots() {
        let reports = vec![
            fake("cascade", "a", 2.5),
            fake("rocksdb", "a", 1.2),
            fake("cascade", "fill random", 1.8),
            fake("rocksdb", "fill random", 0.9),
        ];
        let dir = std::env::temp_dir().join(format!("cascade-plot-test-{}", std::process::id()));
        let written = write_plots(&reports, &dir).expect("write_plots");
        let expected = [
            "throughput.png",
            "latency_cdf_a.png",
            "timeline_a.png",
            "footprint_a.png",
            "latency_cdf_fill_random.png",
            "timeline_fill_random.png",
            "footprint_fill_random.png",
        ];
        assert_eq!(written.len(), expected.len(), "{written:?}");
        for name in expected {
            let path = dir.join(name);
            assert!(
                written.contains(&path),
                "{name} not reported in {written:?}"
            );
            let bytes = std::fs::read(&path).expect("read png");
            assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: not a PNG");
            assert!(bytes.len() > 2048, "{name}: only {} bytes", bytes.len());
        }
        if std::env::var_os("CASCADE_PLOT_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn empty_reports_write_nothing() {
        let dir = std::env::temp_dir().join(format!("cascade-plot-empty-{}", std::process::id()));
        let written = write_plots(&[], &dir).expect("write_plots");
        assert!(written.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn helpers() {
        assert_eq!(file_part("fill random/1"), "fill_random_1");
        assert_eq!(short_num(1_500_000.0), "1.5M");
        assert_eq!(short_num(20_000.0), "20k");
        assert_eq!(short_num(2.5), "2.5");
        assert_eq!(short_num(0.0), "0");
    }
}
