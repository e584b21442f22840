//! The report as a PNG, for pasting into an issue or a chat: the same SVG the HTML shows, drawn
//! by resvg, so it needs no browser.

use resvg::{tiny_skia, usvg};

/// Pixels per SVG unit: sharp on a high-density screen, still small.
pub const SCALE: f32 = 1.5;

/// Families tried for text, before whatever the system has.
const SANS: [&str; 5] = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "Arial", "Helvetica"];

/// A picture and whether its text could be drawn.
pub struct Png {
    pub bytes: Vec<u8>,
    /// `false` when the system has no font: the charts are drawn, their labels are not.
    pub has_text: bool,
}

/// Draws `svg` at [`SCALE`] with the system's fonts.
pub fn render(svg: &str) -> Result<Png, String> {
    let mut opt = usvg::Options::default();
    let db = opt.fontdb_mut();
    db.load_system_fonts();
    let families: Vec<String> = db.faces().filter_map(|f| f.families.first().map(|n| n.0.clone())).collect();
    let sans =
        SANS.iter().map(|s| (*s).to_owned()).find(|s| families.contains(s)).or_else(|| families.first().cloned());
    let has_text = sans.is_some();
    if let Some(sans) = sans {
        db.set_sans_serif_family(sans);
    }
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| format!("the report's SVG: {e}"))?;
    let size = tree.size().to_int_size().scale_by(SCALE).ok_or("the picture is too large")?;
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("the picture is too large")?;
    resvg::render(&tree, tiny_skia::Transform::from_scale(SCALE, SCALE), &mut pixmap.as_mut());
    let bytes = pixmap.encode_png().map_err(|e| format!("PNG: {e}"))?;
    Ok(Png { bytes, has_text })
}

/// Width, height and RGBA pixels of a PNG, for checking what was drawn.
pub fn decode(png: &[u8]) -> Option<(u32, u32, Vec<u8>)> {
    let p = tiny_skia::Pixmap::decode_png(png).ok()?;
    Some((p.width(), p.height(), p.data().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Analysis;

    fn analysis(rel: &str) -> Analysis {
        let path = gpulse_fixtures::root().join(rel);
        let rec = gpulse_record::read(&path).unwrap();
        let run = gpulse_diagnose::Run::from_recording(&rec);
        let diagnosis = gpulse_diagnose::Diagnosis::of(&run);
        Analysis { run, diagnosis, gpus: rec.devices.len(), samples: rec.snapshots.len(), ..Analysis::default() }
    }

    /// Pixels inside `area` (x, y, width, height, in SVG units) within a few levels of one of
    /// `colors`: a series' line, not the background, a band or a gridline.
    fn pixels_of(png: &[u8], area: [f64; 4], colors: &[[u8; 3]]) -> usize {
        let (w, _, rgba) = decode(png).unwrap();
        let s = f64::from(SCALE);
        let [x0, y0, aw, ah] = area.map(|v| (v * s) as usize);
        let near = |p: &[u8], c: &[u8; 3]| (0..3).all(|k| p[k].abs_diff(c[k]) < 40);
        (y0..y0 + ah)
            .flat_map(|y| (x0..x0 + aw).map(move |x| 4 * (y * w as usize + x)))
            .filter(|i| colors.iter().any(|c| near(&rgba[*i..*i + 3], c)))
            .count()
    }

    /// The stroke colours of each chart's series, in order.
    fn series_colors(svg: &str) -> Vec<Vec<[u8; 3]>> {
        svg.split("<svg class=\"chart\"")
            .skip(1)
            .map(|chart| {
                chart
                    .split("class=\"series\"")
                    .skip(1)
                    .map(|p| {
                        let hex = p.split("stroke=\"#").nth(1).unwrap();
                        let byte = |k: usize| u8::from_str_radix(&hex[k..k + 2], 16).unwrap();
                        [byte(0), byte(2), byte(4)]
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_png_shows_every_chart_of_the_report() {
        for rel in ["h200-gpulse-run/leak.db", "h200x2-gpulse/uneven.db"] {
            let a = analysis(rel);
            let (svg, areas) = crate::html::composite_svg(rel, &a);
            // The ledger's bar is a figure of the page, not a chart over time.
            let page = crate::html::render(rel, &a);
            let charts = page.matches("<svg").count() - page.matches("<svg class=\"ledger-bar\"").count();
            assert_eq!(areas.len(), charts, "{rel}: every chart of the page is in the picture");
            let png = render(&svg).unwrap();
            assert!(png.has_text, "the test machine has a font");
            let (w, h, _) = decode(&png.bytes).unwrap();
            let height: f64 = svg.split("height=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
            assert_eq!((w, h), ((940.0 * SCALE) as u32, (height * f64::from(SCALE)).ceil() as u32), "{rel}");
            let colors = series_colors(&svg);
            assert_eq!(colors.len(), areas.len());
            for (i, (area, colors)) in areas.iter().zip(&colors).enumerate() {
                // A line across the run is over a thousand pixels of its colour at this scale.
                let drawn = pixels_of(&png.bytes, *area, colors);
                assert!(drawn > 300, "{rel}: chart {i} shows {drawn} pixels of its lines {colors:?}");
            }
        }
    }

    #[test]
    fn a_chart_without_its_line_reads_as_blank() {
        let a = analysis("h200-gpulse-run/leak.db");
        let (svg, areas) = crate::html::composite_svg("leak.db", &a);
        let colors = series_colors(&svg);
        // The same picture with the lines' paths emptied: gridlines, bands and markers remain.
        const D: &str = "class=\"series\" d=\"";
        let (mut blank, mut rest) = (String::new(), svg.as_str());
        while let Some(i) = rest.find(D) {
            blank += &rest[..i + D.len()];
            rest = &rest[i + D.len()..];
            rest = &rest[rest.find('"').unwrap()..];
        }
        blank += rest;
        let png = render(&blank).unwrap();
        for (area, colors) in areas.iter().zip(&colors) {
            let n = pixels_of(&png.bytes, *area, colors);
            assert!(n < 100, "so the check above can fail: {n} {colors:?}");
        }
    }
}
