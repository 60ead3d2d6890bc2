//! The fast scan's one way to fail: [`Punt`], "not accepted here, let the serde walk decide",
//! and [`Scan`], a step of the scan that may punt. Below the scanner and the key set, which
//! both punt.

/// Not accepted by the scan: the serde walk decides.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Punt;

pub(crate) type Scan<T> = Result<T, Punt>;
