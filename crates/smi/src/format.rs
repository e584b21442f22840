//! `--format=csv[,noheader][,nounits]`.

use crate::QueryError;

/// How query output is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsvFormat {
    /// Print the header line.
    pub header: bool,
    /// Print units after values (headers keep their units either way, as nvidia-smi does).
    pub units: bool,
}

impl Default for CsvFormat {
    fn default() -> Self {
        Self { header: true, units: true }
    }
}

impl CsvFormat {
    /// Parses the value of `--format=`: `csv` and the modifiers, in any order. nvidia-smi 580
    /// prints CSV for `--format=noheader` too: the query options have no other format.
    pub fn parse(spec: &str) -> Result<Self, QueryError> {
        let mut f = Self::default();
        for p in spec.split(',') {
            match p {
                "csv" => {}
                "noheader" => f.header = false,
                "nounits" => f.units = false,
                _ => return Err(QueryError::BadFormat),
            }
        }
        Ok(f)
    }

    /// The `--format=` value that gives this format back.
    pub fn spec(&self) -> String {
        let mut s = String::from("csv");
        if !self.header {
            s += ",noheader";
        }
        if !self.units {
            s += ",nounits";
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_modifiers() {
        assert_eq!(CsvFormat::parse("csv"), Ok(CsvFormat { header: true, units: true }));
        assert_eq!(CsvFormat::parse("csv,noheader,nounits"), Ok(CsvFormat { header: false, units: false }));
        assert_eq!(CsvFormat::parse("csv,nounits"), Ok(CsvFormat { header: true, units: false }));
        assert_eq!(CsvFormat::parse("xml"), Err(QueryError::BadFormat));
        assert_eq!(CsvFormat::parse("csv,bogus"), Err(QueryError::BadFormat));
        // Lightning passes `csv,nounits,noheader`; nvidia-smi takes the parts in any order.
        assert_eq!(CsvFormat::parse("nounits,noheader,csv"), Ok(CsvFormat { header: false, units: false }));
        assert_eq!(CsvFormat::parse("noheader,csv"), Ok(CsvFormat { header: false, units: true }));
        assert_eq!(CsvFormat::parse("noheader"), Ok(CsvFormat { header: false, units: true }));
        assert_eq!(CsvFormat::parse("CSV"), Err(QueryError::BadFormat));
        for spec in ["csv", "csv,noheader", "csv,nounits", "csv,noheader,nounits"] {
            assert_eq!(CsvFormat::parse(spec).unwrap().spec(), spec);
        }
    }
}
