//! The parts of the `evenkeel` command that are worth reaching from outside the binary: the
//! line format of `load` and `dump` (for the fuzz targets in `fuzz/` and the cli's tests).

pub mod escape;
#[doc(hidden)]
pub mod fuzz;
