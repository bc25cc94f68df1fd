//! The Worker benchmark's plots, as SVG files in `docs/bench/` (committed next to
//! BENCHMARKS.md): throughput against replicas, the latency distribution, and memory against
//! result size.

use std::ops::Range;
use std::path::PathBuf;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::small_jobs::Load;
use super::stats::ms;

const SIZE: (u32, u32) = (720, 440);

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn output(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench");
    std::fs::create_dir_all(&dir).expect("docs/bench");
    dir.canonicalize().expect("docs/bench").join(name)
}

/// Draws `docs/bench/<name>`: a chart titled `caption` over the ranges `x` and `y`, each with
/// its axis name, whose series `draw` adds, their legend at `legend_at`.
fn plot(
    name: &str,
    caption: &str,
    (x, x_desc): (Range<f64>, &str),
    (y, y_desc): (Range<f64>, &str),
    legend_at: SeriesLabelPosition,
    draw: impl FnOnce(&mut Chart<'_, '_>),
) {
    let path = output(name);
    let root = SVGBackend::new(&path, SIZE).into_drawing_area();
    root.fill(&WHITE).expect("fill");
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x, y)
        .expect("chart");
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .expect("mesh");
    draw(&mut chart);
    legend(&mut chart, legend_at);
    root.present().expect("write the plot");
    println!("plot: {}", path.display());
}

/// A line with its points marked, labelled in the legend.
fn series(chart: &mut Chart<'_, '_>, label: &str, points: Vec<(f64, f64)>, color: RGBColor) {
    chart
        .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
        .expect("line")
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    chart
        .draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 4, color.filled())),
        )
        .expect("points");
}

fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, position: SeriesLabelPosition) {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .expect("legend");
}

/// `docs/bench/memory-by-result-size.svg`: peak RSS growth (MiB) against result size (MiB),
/// after and (when measured) before, with the 64 MiB goal.
pub fn memory_by_result_size(points: &[(f64, f64, Option<f64>)]) {
    let x_max = points.iter().map(|p| p.0).fold(0.0, f64::max) * 1.1;
    let y_max = points
        .iter()
        .map(|p| p.1.max(p.2.unwrap_or(0.0)))
        .fold(64.0, f64::max)
        * 1.1;
    plot(
        "memory-by-result-size.svg",
        "Worker peak RSS growth during one job",
        (0.0..x_max, "result JSON (MiB)"),
        (0.0..y_max, "peak RSS growth (MiB)"),
        SeriesLabelPosition::UpperLeft,
        |chart| {
            series(
                chart,
                "after (streamed)",
                points.iter().map(|p| (p.0, p.1)).collect(),
                BLUE,
            );
            let before: Vec<(f64, f64)> = points.iter().filter_map(|p| Some((p.0, p.2?))).collect();
            if !before.is_empty() {
                series(chart, "before (whole result in memory)", before, RED);
            }
            series(
                chart,
                "goal: 64 MiB",
                vec![(0.0, 64.0), (x_max, 64.0)],
                RGBColor(120, 120, 120),
            );
        },
    );
}

/// `docs/bench/small-jobs-throughput.svg` (jobs/s against replicas, with the bare `PutObject`
/// and PostgreSQL rates at the same concurrency) and `docs/bench/small-jobs-latency.svg` (the
/// share of jobs done within each latency, per replica count).
pub fn small_jobs(loads: &[Load]) {
    let x_max = loads.iter().map(|l| l.replicas).max().unwrap_or(1) as f64 + 0.5;
    let y_max = loads
        .iter()
        .map(|l| {
            l.put_objects_per_second
                .max(l.jobs_per_second)
                .max(l.commits_per_second)
        })
        .fold(0.0, f64::max)
        * 1.15;
    let at = |f: fn(&Load) -> f64| -> Vec<(f64, f64)> {
        loads.iter().map(|l| (l.replicas as f64, f(l))).collect()
    };
    plot(
        "small-jobs-throughput.svg",
        "Small jobs: throughput against replicas",
        (0.5..x_max, "Worker replicas (5 jobs at once each)"),
        (0.0..y_max, "per second"),
        SeriesLabelPosition::UpperLeft,
        |chart| {
            series(chart, "jobs/s", at(|l| l.jobs_per_second), BLUE);
            series(
                chart,
                "bare 1 KiB PutObject/s, same concurrency",
                at(|l| l.put_objects_per_second),
                RED,
            );
            series(
                chart,
                "PostgreSQL job commits/s, same concurrency",
                at(|l| l.commits_per_second),
                RGBColor(0, 140, 0),
            );
        },
    );

    let x_max = loads
        .iter()
        .flat_map(|l| l.latencies.iter().copied().map(ms))
        .fold(1.0, f64::max)
        * 1.05;
    plot(
        "small-jobs-latency.svg",
        "Small jobs: latency distribution",
        (0.0..x_max, "message sent to job.completed received (ms)"),
        (0.0..1.0, "share of jobs done within"),
        SeriesLabelPosition::LowerRight,
        |chart| {
            let colors = [BLUE, RED, RGBColor(0, 140, 0), MAGENTA, CYAN];
            for (load, color) in loads.iter().zip(colors.into_iter().cycle()) {
                let mut sorted: Vec<f64> = load.latencies.iter().copied().map(ms).collect();
                sorted.sort_by(f64::total_cmp);
                let n = sorted.len() as f64;
                let cdf: Vec<(f64, f64)> = sorted
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| (x, (i + 1) as f64 / n))
                    .collect();
                chart
                    .draw_series(LineSeries::new(cdf, color.stroke_width(2)))
                    .expect("line")
                    .label(format!("{} replica(s)", load.replicas))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
            }
        },
    );
}
