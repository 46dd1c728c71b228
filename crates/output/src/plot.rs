//! The learning-curve PNG: episode returns, their rolling mean, evaluation
//! means and the target, against environment steps.

use crate::records::{EpisodeRecord, EvalRecord};
use plotters::prelude::*;
use std::path::Path;
use std::sync::OnceLock;

/// Fonts tried in order (Debian's fonts-dejavu-core, which set-up installs).
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers a sans-serif font with plotters once; false when none exists
/// (the plot is then drawn without text).
fn font_available() -> bool {
    static FONT: OnceLock<bool> = OnceLock::new();
    *FONT.get_or_init(|| {
        for p in FONT_PATHS {
            if let Ok(bytes) = std::fs::read(p) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        tracing::warn!("no DejaVuSans.ttf found: the learning curve is drawn without labels");
        false
    })
}

/// Draws the learning curve to `path` (PNG, 1000×600).
pub fn plot_learning_curve(
    path: &Path,
    title: &str,
    episodes: &[EpisodeRecord],
    evals: &[EvalRecord],
    target: Option<f64>,
) -> Result<(), String> {
    let text = font_available();
    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let max_x = episodes
        .iter()
        .map(|e| e.env_steps)
        .chain(evals.iter().map(|e| e.env_steps))
        .max()
        .unwrap_or(1)
        .max(1);
    let ys = episodes
        .iter()
        .map(|e| e.ret)
        .chain(evals.iter().map(|e| e.mean_return))
        .chain(target);
    let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
        (lo.min(y), hi.max(y))
    });
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.05).max(1.0);
    let mut builder = ChartBuilder::on(&root);
    builder.margin(15);
    if text {
        builder
            .caption(title, ("sans-serif", 24))
            .x_label_area_size(45)
            .y_label_area_size(60);
    }
    let mut chart = builder
        .build_cartesian_2d(0u64..max_x, (lo - pad)..(hi + pad))
        .map_err(|e| e.to_string())?;
    if text {
        chart
            .configure_mesh()
            .x_desc("environment steps")
            .y_desc("return")
            .draw()
            .map_err(|e| e.to_string())?;
    }
    let light = RGBColor(150, 180, 220);
    chart
        .draw_series(LineSeries::new(
            episodes.iter().map(|e| (e.env_steps, e.ret)),
            &light,
        ))
        .map_err(|e| e.to_string())?;
    let window = 20;
    let rolling: Vec<(u64, f64)> = (0..episodes.len())
        .map(|i| {
            let from = i.saturating_sub(window - 1);
            let slice = &episodes[from..=i];
            (
                episodes[i].env_steps,
                slice.iter().map(|e| e.ret).sum::<f64>() / slice.len() as f64,
            )
        })
        .collect();
    let s = chart
        .draw_series(LineSeries::new(rolling, BLUE.stroke_width(2)))
        .map_err(|e| e.to_string())?;
    if text {
        s.label("rolling mean of 20 episodes")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    }
    let s = chart
        .draw_series(
            evals
                .iter()
                .filter(|e| !e.confirming)
                .map(|e| Circle::new((e.env_steps, e.mean_return), 4, RED.filled())),
        )
        .map_err(|e| e.to_string())?;
    if text {
        s.label("evaluation mean")
            .legend(|(x, y)| Circle::new((x + 10, y), 4, RED.filled()));
    }
    // Confirming evaluations (more episodes, same weights): hollow, larger.
    let confirming: Vec<&EvalRecord> = evals.iter().filter(|e| e.confirming).collect();
    if !confirming.is_empty() {
        let s = chart
            .draw_series(
                confirming
                    .iter()
                    .map(|e| Circle::new((e.env_steps, e.mean_return), 7, BLACK.stroke_width(2))),
            )
            .map_err(|e| e.to_string())?;
        if text {
            s.label("confirming evaluation mean")
                .legend(|(x, y)| Circle::new((x + 10, y), 6, BLACK.stroke_width(2)));
        }
    }
    if let Some(t) = target {
        let s = chart
            .draw_series(LineSeries::new([(0, t), (max_x, t)], GREEN.stroke_width(1)))
            .map_err(|e| e.to_string())?;
        if text {
            s.label(format!("target {t}"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], GREEN));
        }
    }
    if text {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}
