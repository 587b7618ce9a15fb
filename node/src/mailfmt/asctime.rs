//! The date of an mbox `From ` line: C's `asctime` form in UTC
//! (`Sat Dec  5 09:03:07 2026`), to the second.

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `ms` since the epoch as asctime in UTC (milliseconds dropped: the form
/// has none).
pub fn format(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{} {} {:>2} {:02}:{:02}:{:02} {}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(m - 1) as usize],
        d,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        y
    )
}

/// The date at the end of a `From ` line (`From sender Sat Dec  5 09:03:07
/// 2026`, tolerating a zone or extra words before the date) as ms since
/// the epoch; None when the line ends in no such date.
pub fn parse_from_line(line: &str) -> Option<i64> {
    let words: Vec<&str> = line.split_whitespace().collect();
    // Find "Mon DD HH:MM:SS YYYY" anywhere after the sender.
    (2..words.len()).find_map(|i| {
        let month = MONTHS.iter().position(|m| *m == words[i])? as i64 + 1;
        let day: i64 = words.get(i + 1)?.parse().ok()?;
        let mut hms = words.get(i + 2)?.split(':').map(|p| p.parse::<i64>());
        let (h, mi, s) = (hms.next()?.ok()?, hms.next()?.ok()?, hms.next().unwrap_or(Ok(0)).ok()?);
        let year: i64 = words.get(i + 3)?.parse().ok()?;
        if !(1..=31).contains(&day) || h > 23 || mi > 59 || s > 60 {
            return None;
        }
        Some((days_from_civil(year, month, day) * 86_400 + h * 3600 + mi * 60 + s) * 1000)
    })
}

/// Howard Hinnant's `days_from_civil`: days since 1970-01-01.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Its inverse: (year, month 1-12, day 1-31).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_back_to_the_second() {
        // 2026-12-05T09:03:07Z, a Saturday.
        let ms = 1_796_461_387_000;
        assert_eq!(format(ms + 999), "Sat Dec  5 09:03:07 2026");
        assert_eq!(parse_from_line(&format!("From MAILER-DAEMON {}", format(ms))), Some(ms));
        assert_eq!(format(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(parse_from_line("From a@b Thu Jan  1 00:00:00 1970"), Some(0));
        // A 29 February and a date before the epoch.
        let leap = parse_from_line("From x Sat Feb 29 12:00:00 2020").unwrap();
        assert_eq!(format(leap), "Sat Feb 29 12:00:00 2020");
        let old = parse_from_line("From x Mon Jun  1 00:00:00 1964").unwrap();
        assert!(old < 0);
        assert_eq!(format(old), "Mon Jun  1 00:00:00 1964");
    }

    #[test]
    fn a_line_without_a_date_has_none() {
        assert_eq!(parse_from_line("From someone"), None);
        assert_eq!(parse_from_line("From x Sat Dec 45 09:03:07 2026"), None);
    }
}
