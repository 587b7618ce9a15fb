//! PNG plots for the reports. Text needs a font, and plotters is built
//! without system font lookup (no fontconfig dependency), so a TTF is
//! loaded from the usual places once; without one the plots are drawn
//! without captions and axis labels rather than not at all.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

/// Registers a font as "sans-serif"; false when none was found.
pub fn fonts_available() -> bool {
    static HAVE: OnceLock<bool> = OnceLock::new();
    *HAVE.get_or_init(|| {
        let from_env = std::env::var("MESHMAIL_PLOT_FONT").ok();
        for p in from_env.iter().map(String::as_str).chain(FONT_PATHS.iter().copied()) {
            if let Ok(bytes) = std::fs::read(p) {
                // Registered once for the life of the process: leaking it is the 'static it needs.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

type Res = Result<(), Box<dyn std::error::Error>>;

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Lines over a shared x axis, one per named series.
pub fn lines(path: &Path, title: &str, x_label: &str, y_label: &str, series: &[(String, Vec<(f64, f64)>)]) -> Res {
    let text = fonts_available();
    let root = BitMapBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let pts = series.iter().flat_map(|(_, v)| v.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 >= x1 {
        x0 = 0.0;
        x1 = x0 + 1.0;
    }
    let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.1 };
    let mut b = ChartBuilder::on(&root);
    b.margin(15);
    if text {
        b.caption(title, ("sans-serif", 22))
            .x_label_area_size(40)
            .y_label_area_size(70);
    }
    let mut chart = b.build_cartesian_2d(x0..x1, 0f64..y1)?;
    if text {
        chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw()?;
    } else {
        chart.configure_mesh().disable_x_mesh().disable_y_mesh().draw()?;
    }
    for (i, (name, v)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let s = chart.draw_series(LineSeries::new(v.iter().copied(), color.stroke_width(2)))?;
        if text {
            s.label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
    }
    if text && series.len() > 1 {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// A histogram of `values` in `bins` equal-width bins from 0 to the maximum.
pub fn histogram(path: &Path, title: &str, x_label: &str, values: &[f64], bins: usize) -> Res {
    let text = fonts_available();
    let root = BitMapBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let max = values.iter().copied().fold(0f64, f64::max).max(1e-3);
    let bins = bins.max(1);
    let width = max / bins as f64;
    let mut counts = vec![0u32; bins];
    for v in values {
        counts[((v / width) as usize).min(bins - 1)] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(0).max(1) + 1;
    let mut b = ChartBuilder::on(&root);
    b.margin(15);
    if text {
        b.caption(title, ("sans-serif", 22))
            .x_label_area_size(40)
            .y_label_area_size(60);
    }
    let mut chart = b.build_cartesian_2d(0f64..max * 1.02, 0u32..top)?;
    if text {
        chart.configure_mesh().x_desc(x_label).y_desc("count").draw()?;
    } else {
        chart.configure_mesh().disable_x_mesh().disable_y_mesh().draw()?;
    }
    chart.draw_series(counts.iter().enumerate().map(|(i, &c)| {
        let x = i as f64 * width;
        Rectangle::new([(x, 0), (x + width * 0.95, c)], COLORS[0].filled())
    }))?;
    root.present()?;
    Ok(())
}

/// Renders a plot, turning plotters' error into a note for the report
/// instead of failing the run: a missing plot is not a failed check.
pub fn try_plot(what: &str, f: impl FnOnce() -> Res) -> Option<String> {
    f().err().map(|e| format!("plot {what} failed: {e}"))
}
