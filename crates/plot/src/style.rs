//! Cockpit's look: seaborn "dark" panels, the three column colours, viridis points and a
//! "cool" moving average.

use plotters::style::RGBColor;

/// STEP SIZE column (Cockpit's blue `#4a73ad`).
pub const BLUE: RGBColor = RGBColor(0x4a, 0x73, 0xad);
/// GRADIENTS column (Cockpit's orange `#f28033`).
pub const ORANGE: RGBColor = RGBColor(0xf2, 0x80, 0x33);
/// CURVATURE column (Cockpit's green `#339966`).
pub const GREEN: RGBColor = RGBColor(0x33, 0x99, 0x66);
/// Secondary-screen and bottom-row headers.
pub const GREY: RGBColor = RGBColor(0x59, 0x59, 0x59);
/// Page background.
pub const PAGE: RGBColor = RGBColor(0xff, 0xff, 0xff);
/// Plot background (seaborn "dark": `#eaeaf2`).
pub const PANEL: RGBColor = RGBColor(0xea, 0xea, 0xf2);
/// Histogram bars of all values.
pub const BAR_GREY: RGBColor = RGBColor(0x99, 0x99, 0x99);
/// Text.
pub const INK: RGBColor = RGBColor(0x26, 0x26, 0x26);
/// Markers of values off an axis's scale, at its edge.
pub const OUTLIER: RGBColor = RGBColor(0xd6, 0x27, 0x28);

/// Matplotlib's viridis at `t` in [0, 1] (piecewise-linear through 9 of its stops).
pub fn viridis(t: f64) -> RGBColor {
    const STOPS: [(u8, u8, u8); 9] = [
        (68, 1, 84),
        (71, 44, 122),
        (59, 81, 139),
        (44, 113, 142),
        (33, 144, 141),
        (39, 173, 129),
        (92, 200, 99),
        (170, 220, 50),
        (253, 231, 37),
    ];
    interpolate(&STOPS, t)
}

/// Matplotlib's "cool" colormap (cyan to magenta) at `t` in [0, 1].
pub fn cool(t: f64) -> RGBColor {
    interpolate(&[(0, 255, 255), (255, 0, 255)], t)
}

fn interpolate(stops: &[(u8, u8, u8)], t: f64) -> RGBColor {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (stops.len() - 1) as f64;
    let i = (x.floor() as usize).min(stops.len() - 2);
    let f = x - i as f64;
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    let (a, b) = (stops[i], stops[i + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colormaps_hit_their_ends() {
        assert_eq!(viridis(0.0), RGBColor(68, 1, 84));
        assert_eq!(viridis(1.0), RGBColor(253, 231, 37));
        assert_eq!(cool(0.5), RGBColor(128, 128, 255));
        assert_eq!(viridis(f64::NAN), viridis(0.0));
    }
}
