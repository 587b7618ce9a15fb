//! RFC 5260 dates: a header's RFC 5322 date (or now) in a zone, and its
//! date-parts as strings.

/// The date-parts RFC 5260 §4.2 names.
pub const PARTS: &[&str] = &[
    "year", "month", "day", "date", "julian", "hour", "minute", "second", "time", "iso8601", "std11", "zone", "weekday",
];

/// An instant and the zone it is shown in (minutes east of UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instant {
    pub utc_s: i64,
    pub zone_min: i32,
}

/// The date of an RFC 5322 `Date:`-like value.
pub fn parse(value: &str) -> Option<Instant> {
    let d = mail_parser::DateTime::parse_rfc822(value.trim())?;
    if d.month == 0 || d.month > 12 || d.day == 0 || d.day > 31 || d.hour > 23 || d.minute > 59 || d.second > 60 {
        return None;
    }
    let zone = (d.tz_hour as i32 * 60 + d.tz_minute as i32) * if d.tz_before_gmt { -1 } else { 1 };
    Some(Instant {
        utc_s: d.to_timestamp(),
        zone_min: zone,
    })
}

/// `+hhmm`/`-hhmm` (RFC 5260 §4.1's :zone argument).
pub fn parse_zone(z: &str) -> Option<i32> {
    let b = z.as_bytes();
    if b.len() != 5 || !matches!(b[0], b'+' | b'-') || !b[1..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let h: i32 = z[1..3].parse().ok()?;
    let m: i32 = z[3..5].parse().ok()?;
    if m > 59 {
        return None;
    }
    Some((h * 60 + m) * if b[0] == b'-' { -1 } else { 1 })
}

/// Days since 1970-01-01 to (year, month, day) (the proleptic Gregorian
/// calendar, H. Hinnant's civil_from_days).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The named part of `t` shown in its zone.
pub fn part(t: Instant, name: &str) -> String {
    let local = t.utc_s + i64::from(t.zone_min) * 60;
    let days = local.div_euclid(86_400);
    let secs = local.rem_euclid(86_400);
    let (y, mo, d) = civil(days);
    let (h, mi, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let zone = {
        let sign = if t.zone_min < 0 { '-' } else { '+' };
        let a = t.zone_min.abs();
        format!("{sign}{:02}{:02}", a / 60, a % 60)
    };
    match name {
        "year" => format!("{y:04}"),
        "month" => format!("{mo:02}"),
        "day" => format!("{d:02}"),
        "date" => format!("{y:04}-{mo:02}-{d:02}"),
        // Modified Julian Day: days since 1858-11-17.
        "julian" => (days + 40_587).to_string(),
        "hour" => format!("{h:02}"),
        "minute" => format!("{mi:02}"),
        "second" => format!("{s:02}"),
        "time" => format!("{h:02}:{mi:02}:{s:02}"),
        "iso8601" => format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{}:{}",
            &zone[..3],
            &zone[3..]
        ),
        "std11" => {
            const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
            const MONTHS: [&str; 12] = [
                "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
            ];
            let wd = DAYS[days.rem_euclid(7) as usize];
            format!(
                "{wd}, {d:02} {} {y:04} {h:02}:{mi:02}:{s:02} {zone}",
                MONTHS[mo as usize - 1]
            )
        }
        "zone" => zone,
        // 0 is Sunday; 1970-01-01 was a Thursday.
        "weekday" => ((days + 4).rem_euclid(7)).to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_in_zones() {
        let t = parse("Tue, 1 Dec 2026 23:30:05 -0500").unwrap();
        assert_eq!(part(t, "date"), "2026-12-01");
        assert_eq!(part(t, "zone"), "-0500");
        assert_eq!(part(t, "weekday"), "2");
        let utc = Instant { zone_min: 0, ..t };
        assert_eq!(part(utc, "iso8601"), "2026-12-02T04:30:05+00:00");
        assert_eq!(part(utc, "std11"), "Wed, 02 Dec 2026 04:30:05 +0000");
        assert_eq!(part(utc, "julian"), "61376");
        assert_eq!(parse_zone("+0130"), Some(90));
        assert_eq!(parse_zone("0130"), None);
    }
}
