//! The text of one timeseries.csv cell for each value type: what report::csv writes and reads
//! back, and what the metrics table's generated columns use. Text cells never hold a comma
//! or a line break (commas become `;`), so a row splits on commas.

/// A value that fits in one cell.
pub trait Cell: Sized {
    fn to_cell(&self) -> String;
    /// `None` when the text is not a value of this type.
    fn from_cell(s: &str) -> Option<Self>;
}

impl Cell for u64 {
    fn to_cell(&self) -> String {
        self.to_string()
    }
    fn from_cell(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

impl Cell for f64 {
    fn to_cell(&self) -> String {
        format!("{self:.3}")
    }
    fn from_cell(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

impl Cell for bool {
    fn to_cell(&self) -> String {
        u8::from(*self).to_string()
    }
    fn from_cell(s: &str) -> Option<Self> {
        match s {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        }
    }
}

impl Cell for String {
    fn to_cell(&self) -> String {
        self.replace(',', ";").replace(['\n', '\r'], " ")
    }
    fn from_cell(s: &str) -> Option<Self> {
        Some(s.to_string())
    }
}

/// Empty cell for `None`; an empty or unparsable cell reads back as `None`.
impl<T: Cell> Cell for Option<T> {
    fn to_cell(&self) -> String {
        self.as_ref().map_or(String::new(), Cell::to_cell)
    }
    fn from_cell(s: &str) -> Option<Self> {
        if s.is_empty() {
            Some(None)
        } else {
            T::from_cell(s).map(Some)
        }
    }
}
