//! `meshmail-chaos compare A B`: the differences between two runs'
//! summaries (report.json, see `summary.rs`), one line per metric, with
//! which way is worse, so a regression across commits shows at a glance.

use std::path::{Path, PathBuf};

use crate::summary::{Percentiles, ReportHead, SCHEMA_VERSION, Summary};

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("reading {}: {}", .0.display(), .1)]
    Read(PathBuf, std::io::Error),
    #[error("{} is not a chaos report.json: {}", .0.display(), .1)]
    Parse(PathBuf, serde_json::Error),
    #[error("{} has schema_version {}; this runner reads {}", .0.display(), .1, SCHEMA_VERSION)]
    Schema(PathBuf, u32),
}

/// Reads a run's summary from a run output directory or a report.json.
pub fn load(path: &Path) -> Result<Summary, CompareError> {
    let file = if path.is_dir() {
        path.join("report.json")
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file).map_err(|e| CompareError::Read(file.clone(), e))?;
    let head: ReportHead = serde_json::from_str(&text).map_err(|e| CompareError::Parse(file.clone(), e))?;
    if head.schema_version != SCHEMA_VERSION {
        return Err(CompareError::Schema(file, head.schema_version));
    }
    Ok(head.summary)
}

/// Which direction of change is a regression.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Worse {
    Higher,
    Lower,
    /// Neither (context: counts of faults, seeds).
    Neither,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub metric: String,
    pub a: f64,
    pub b: f64,
    pub worse: Worse,
}

impl Row {
    /// "worse", "better" or "" (equal, or a context metric). Recovery
    /// times and memory move by noise: under 5 % is "".
    pub fn verdict(&self) -> &'static str {
        let exact = self.metric.starts_with("lost")
            || self.metric.starts_with("duplicated")
            || self.metric.starts_with("misdelivered")
            || self.metric.contains("not_recovered")
            || self.metric == "failed_checks";
        let d = self.b - self.a;
        let rel = if self.a.abs() > 1e-9 {
            d.abs() / self.a.abs()
        } else {
            d.abs()
        };
        if d == 0.0 || (!exact && rel < 0.05) {
            return "";
        }
        match (self.worse, d > 0.0) {
            (Worse::Higher, true) | (Worse::Lower, false) => "worse",
            (Worse::Higher, false) | (Worse::Lower, true) => "better",
            (Worse::Neither, _) => "",
        }
    }
}

fn push_pct(rows: &mut Vec<Row>, class: &str, a: Option<&Percentiles>, b: Option<&Percentiles>) {
    let d = Percentiles::default();
    let (a, b) = (a.unwrap_or(&d), b.unwrap_or(&d));
    let mut add = |name: &str, x: f64, y: f64, worse| {
        rows.push(Row {
            metric: format!("recovery.{class}.{name}"),
            a: x,
            b: y,
            worse,
        })
    };
    add("n", a.n as f64, b.n as f64, Worse::Neither);
    // A class one run did not measure has no times to be better or worse than.
    let t = if a.n > 0 && b.n > 0 {
        Worse::Higher
    } else {
        Worse::Neither
    };
    add("p50_s", a.p50_s, b.p50_s, t);
    add("p90_s", a.p90_s, b.p90_s, t);
    add("p99_s", a.p99_s, b.p99_s, t);
    add("max_s", a.max_s, b.max_s, t);
    add(
        "not_recovered",
        a.not_recovered as f64,
        b.not_recovered as f64,
        Worse::Higher,
    );
}

/// Every compared metric of A and B, in a fixed order.
pub fn diff(a: &Summary, b: &Summary) -> Vec<Row> {
    let row = |metric: &str, x: f64, y: f64, worse| Row {
        metric: metric.into(),
        a: x,
        b: y,
        worse,
    };
    let mut rows = vec![
        row(
            "failed_checks",
            a.failed_checks.len() as f64,
            b.failed_checks.len() as f64,
            Worse::Higher,
        ),
        row("acked", a.acked as f64, b.acked as f64, Worse::Neither),
        row("lost", a.lost as f64, b.lost as f64, Worse::Higher),
        row("duplicated", a.duplicated as f64, b.duplicated as f64, Worse::Higher),
        row(
            "misdelivered",
            a.misdelivered as f64,
            b.misdelivered as f64,
            Worse::Higher,
        ),
        row(
            "extra_unexplained",
            a.extra_unexplained as f64,
            b.extra_unexplained as f64,
            Worse::Higher,
        ),
    ];
    let mut classes: Vec<&String> = a.recovery.keys().chain(b.recovery.keys()).collect();
    classes.sort();
    classes.dedup();
    for c in classes {
        push_pct(&mut rows, c, a.recovery.get(c), b.recovery.get(c));
    }
    let (ta, tb) = (&a.throughput, &b.throughput);
    rows.extend([
        row("throughput.acked_per_s", ta.acked_per_s, tb.acked_per_s, Worse::Lower),
        row("throughput.smtp_p50_ms", ta.smtp_p50_ms, tb.smtp_p50_ms, Worse::Higher),
        row("throughput.smtp_p99_ms", ta.smtp_p99_ms, tb.smtp_p99_ms, Worse::Higher),
        row("throughput.imap_p99_ms", ta.imap_p99_ms, tb.imap_p99_ms, Worse::Higher),
        row(
            "throughput.refused",
            ta.refused as f64,
            tb.refused as f64,
            Worse::Neither,
        ),
        row(
            "memory.peak_rss_mib",
            a.memory.peak_rss_mib,
            b.memory.peak_rss_mib,
            Worse::Higher,
        ),
        row(
            "memory.mean_rss_mib",
            a.memory.mean_rss_mib,
            b.memory.mean_rss_mib,
            Worse::Higher,
        ),
        row(
            "memory.incarnation_peak_rss_mib_p50",
            a.memory.incarnation_peak_rss_mib_p50,
            b.memory.incarnation_peak_rss_mib_p50,
            Worse::Higher,
        ),
    ]);
    let mut kinds: Vec<&String> = a.faults.keys().chain(b.faults.keys()).collect();
    kinds.sort();
    kinds.dedup();
    for k in kinds {
        let n = |s: &Summary| s.faults.get(k).copied().unwrap_or(0) as f64;
        rows.push(row(&format!("faults.{k}"), n(a), n(b), Worse::Neither));
    }
    rows
}

fn fmt(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e12 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The printed comparison: a header naming both runs, then one line per metric.
pub fn render(a: &Summary, b: &Summary) -> String {
    let who = |s: &Summary| {
        format!(
            "{} seed {} commit {} ({}, {})",
            s.scenario,
            s.seed,
            s.commit.as_deref().unwrap_or("?"),
            if s.network.is_empty() {
                "transport"
            } else {
                s.network.as_str()
            },
            if s.passed { "passed" } else { "FAILED" }
        )
    };
    let mut out = format!("A: {}\nB: {}\n", who(a), who(b));
    out.push_str(&format!(
        "{:<30} {:>12} {:>12} {:>12} {:>8}  \n",
        "metric", "A", "B", "B-A", "B/A"
    ));
    for r in diff(a, b) {
        let ratio = if r.a.abs() > 1e-9 {
            format!("{:.2}", r.b / r.a)
        } else {
            "-".into()
        };
        out.push_str(
            format!(
                "{:<30} {:>12} {:>12} {:>12} {:>8}  {}",
                r.metric,
                fmt(r.a),
                fmt(r.b),
                fmt(r.b - r.a),
                ratio,
                r.verdict()
            )
            .trim_end(),
        );
        out.push('\n');
    }
    if a.failed_checks != b.failed_checks {
        out.push_str(&format!(
            "failed checks: A {:?}, B {:?}\n",
            a.failed_checks, b.failed_checks
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(lost: u64, p99: f64, rate: f64) -> Summary {
        let mut s = Summary {
            scenario: "x".into(),
            lost,
            ..Summary::default()
        };
        s.recovery.insert(
            "kill".into(),
            Percentiles {
                n: 10,
                p50_s: 1.0,
                p90_s: 2.0,
                p99_s: p99,
                max_s: p99,
                not_recovered: 0,
            },
        );
        s.throughput.acked_per_s = rate;
        s
    }

    fn verdict(rows: &[Row], metric: &str) -> &'static str {
        rows.iter().find(|r| r.metric == metric).expect(metric).verdict()
    }

    #[test]
    fn regressions_are_marked_worse() {
        let rows = diff(&summary(0, 2.0, 40.0), &summary(1, 3.0, 30.0));
        assert_eq!(verdict(&rows, "lost"), "worse");
        assert_eq!(verdict(&rows, "recovery.kill.p99_s"), "worse");
        assert_eq!(verdict(&rows, "throughput.acked_per_s"), "worse");
        assert_eq!(verdict(&rows, "recovery.kill.p50_s"), "");
        let back = diff(&summary(1, 3.0, 30.0), &summary(0, 2.0, 40.0));
        assert_eq!(verdict(&back, "lost"), "better");
        // Noise under 5 % is not a verdict; a single lost message always is.
        let noise = diff(&summary(0, 2.0, 40.0), &summary(0, 2.05, 39.5));
        assert_eq!(verdict(&noise, "recovery.kill.p99_s"), "");
        assert_eq!(verdict(&noise, "throughput.acked_per_s"), "");
    }

    #[test]
    fn summary_round_trips_through_report_json() {
        let s = summary(2, 1.5, 12.0);
        let text = format!(
            "{{\"schema_version\": {SCHEMA_VERSION}, \"summary\": {}, \"run\": {{\"anything\": 1}}}}",
            serde_json::to_string(&s).unwrap()
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("report.json"), &text).unwrap();
        assert_eq!(load(dir.path()).unwrap(), s);
        let old = text.replacen(
            &format!("\"schema_version\": {SCHEMA_VERSION}"),
            "\"schema_version\": 0",
            1,
        );
        std::fs::write(dir.path().join("report.json"), old).unwrap();
        assert!(matches!(load(dir.path()), Err(CompareError::Schema(_, 0))));
    }
}
