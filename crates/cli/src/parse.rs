//! Parsing of sizes and ages given on the command line, and formatting them for people.

use std::time::Duration;

/// Parses a size: a number with an optional unit, `B`, `K`/`KB` (1000), `KiB` (1024), up to
/// `T`/`TB`/`TiB`, case-insensitive; `5MiB`, `500mb`, `2G`, `1024`.
pub fn bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || {
        format!(
            "'{s}' is not a size: write a number with an optional unit, like 512KiB, 5MB or 2GiB"
        )
    };
    if num.is_empty() {
        return Err(bad());
    }
    let value: f64 = num.parse().map_err(|_| bad())?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "ki" | "kib" => 1024.0,
        "mi" | "mib" => 1024.0 * 1024.0,
        "gi" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "ti" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    let out = value * mult;
    if !out.is_finite() || out < 0.0 || out > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(out.round() as u64)
}

/// Parses an age: a whole number and a unit, `s`, `m`, `h`, `d` or `w` (`90m`, `14d`).
pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let bad = || {
        format!(
            "'{s}' is not an age: write a whole number and a unit s, m, h, d or w, like 90m or 14d"
        )
    };
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(secs).map(Duration::from_secs).ok_or_else(bad)
}

/// A count with its noun for people: `1 path`, `0 paths`, `2 paths`.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    match n.into() {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    }
}

/// A size for people: `812 B`, `4.1 KiB`, `2.0 GiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A time in milliseconds since the Unix epoch as `2026-12-02 11:35:39` (UTC).
pub fn human_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Text an agent or a user chose (a label, an entry's text, a metadata value) as human output
/// shows it: control characters escaped as file names are ([`cairn_store::relpath::escape_controls`]),
/// so that it cannot drive the terminal nor fake a line (issue 53.9). JSON keeps it exactly.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    cairn_store::relpath::escape_controls(std::borrow::Cow::Borrowed(text))
}

/// [`shown`] for one cell of a table: runs of white space made one space, and cut to `max`
/// characters with an ellipsis.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let flat = shown(&flat).into_owned();
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_of_one_takes_the_singular_and_any_other_the_plural() {
        assert_eq!(count(1u64, "path", "paths"), "1 path");
        assert_eq!(count(0u64, "path", "paths"), "0 paths");
        assert_eq!(count(2u64, "entry", "entries"), "2 entries");
    }

    #[test]
    fn sizes_parse_with_decimal_and_binary_units() {
        assert_eq!(bytes("1024"), Ok(1024));
        assert_eq!(bytes("2GiB"), Ok(2 << 30));
        assert_eq!(bytes("500mb"), Ok(500_000_000));
        assert_eq!(bytes("1.5K"), Ok(1500));
        assert_eq!(bytes("10 MiB"), Ok(10 << 20));
        assert!(bytes("lots").is_err());
        assert!(bytes("5XB").is_err());
        assert!(bytes("").is_err());
    }

    #[test]
    fn ages_parse_with_their_units() {
        assert_eq!(duration("14d"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(duration("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert!(duration("14").is_err());
        assert!(duration("d").is_err());
        assert!(duration("1.5d").is_err());
    }

    #[test]
    fn sizes_and_times_print_for_people() {
        assert_eq!(human_bytes(812), "812 B");
        assert_eq!(human_bytes(4200), "4.1 KiB");
        assert_eq!(human_bytes(2 << 30), "2.0 GiB");
        assert_eq!(human_time(0), "1970-01-01 00:00:00");
        assert_eq!(human_time(1_796_211_339_000), "2026-12-02 11:35:39");
    }
}
