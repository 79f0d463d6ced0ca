//! Cockpit's three gradient tests — NormTest, InnerTest, OrthoTest (Byrd et al. 2012;
//! Bollapragada et al. 2017) — one file each, named for the test.

mod inner;
mod norm;
mod ortho;

pub use inner::InnerTest;
pub use norm::NormTest;
pub use ortho::OrthoTest;
