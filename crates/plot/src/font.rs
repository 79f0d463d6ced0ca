//! The embedded font: DejaVu Sans (Bitstream Vera licence, `assets/DejaVu-LICENSE`), so the
//! dashboard draws text on machines without any system font.

use std::sync::OnceLock;

use plotters::style::{FontStyle, register_font};

use crate::PlotError;

static DEJAVU_SANS: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Registers the font as plotters' `sans-serif` (once per process).
pub(crate) fn register() -> Result<(), PlotError> {
    static PARSED: OnceLock<bool> = OnceLock::new();
    let parsed = PARSED.get_or_init(|| {
        [FontStyle::Normal, FontStyle::Bold]
            .into_iter()
            .all(|style| register_font("sans-serif", style, DEJAVU_SANS).is_ok())
    });
    if *parsed {
        Ok(())
    } else {
        Err(PlotError::Font)
    }
}
