//! Latency percentiles and the printed results.

use serde::Serialize;

/// Percentiles of a set of latencies, in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Percentiles {
    /// Percentiles of `samples` (milliseconds); all zero when empty.
    pub fn of(mut samples: Vec<f64>) -> Self {
        if samples.is_empty() {
            return Percentiles::default();
        }
        samples.sort_by(|a, b| a.total_cmp(b));
        let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
        Percentiles {
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            max: samples[samples.len() - 1],
        }
    }
}

/// Prints `rows` as an aligned two-column table under `title`.
pub fn table(title: &str, rows: &[(&str, String)]) {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    println!("\n{title}");
    println!("{}", "-".repeat(title.len()));
    for (key, value) in rows {
        println!("{key:<width$}  {value}");
    }
}

#[cfg(test)]
mod tests {
    use super::Percentiles;

    #[test]
    fn percentiles_of_a_known_set() {
        let p = Percentiles::of((1..=100).map(f64::from).collect());
        assert_eq!((p.p50, p.p90, p.p99, p.max), (51.0, 90.0, 99.0, 100.0));
        assert_eq!(Percentiles::of(Vec::new()).max, 0.0);
    }
}
