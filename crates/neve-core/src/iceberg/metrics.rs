//! Which statistics a data file's manifest entry carries for each column: Iceberg's metrics
//! modes (`write.metadata.metrics.default`, `write.metadata.metrics.column.<name>`), set by
//! the table setting `iceberg_metrics`.
//!
//! Readers prune files by these bounds, and pay for them as they plan: DuckDB turns every
//! bound of every file into a value before it reads a byte (BENCHMARKS.md, issue 19). A wide
//! table of many small files can keep bounds only where queries filter.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use super::types::Prim;

/// What one column's entries carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetricsMode {
    /// Nothing: no counts, no bounds.
    None,
    /// Value and null counts.
    Counts,
    /// Counts, and bounds with strings cut to this many characters (the upper bound's last
    /// kept character raised by one, so it still bounds every value).
    Truncate(usize),
    /// Counts and the bounds as the log keeps them (strings of up to 256 characters exact).
    #[default]
    Full,
}

impl MetricsMode {
    pub(crate) fn counts(self) -> bool {
        self != MetricsMode::None
    }

    pub(crate) fn bounds(self) -> bool {
        matches!(self, MetricsMode::Truncate(_) | MetricsMode::Full)
    }
}

impl fmt::Display for MetricsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricsMode::None => f.write_str("none"),
            MetricsMode::Counts => f.write_str("counts"),
            MetricsMode::Truncate(n) => write!(f, "truncate({n})"),
            MetricsMode::Full => f.write_str("full"),
        }
    }
}

impl FromStr for MetricsMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        match s.to_ascii_lowercase().as_str() {
            "none" => return Ok(MetricsMode::None),
            "counts" => return Ok(MetricsMode::Counts),
            "full" => return Ok(MetricsMode::Full),
            _ => {}
        }
        let n = s
            .strip_prefix("truncate(")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|n| n.trim().parse::<usize>().ok());
        match n {
            Some(n) if n >= 1 => Ok(MetricsMode::Truncate(n)),
            _ => Err(format!(
                "'{s}' is not a metrics mode (none, counts, truncate(N) with N at least 1, full)"
            )),
        }
    }
}

/// The setting's value: a mode for every column, then `column=mode` for some, e.g.
/// `none, payment_type=full, trip_start_timestamp=truncate(16)`. Unset: `full`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetricsConfig {
    pub default: MetricsMode,
    /// By column name (`struct.field` for a struct's field), in the order given.
    pub columns: Vec<(String, MetricsMode)>,
}

impl FromStr for MetricsConfig {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut config = MetricsConfig::default();
        // A comma inside `truncate(…)` never occurs, so items split on commas.
        for (i, item) in s.split(',').map(str::trim).enumerate() {
            match item.split_once('=') {
                Some((column, mode)) => {
                    let column = column.trim();
                    if column.is_empty() {
                        return Err(format!("'{item}': expected column=mode"));
                    }
                    if config.columns.iter().any(|(c, _)| c == column) {
                        return Err(format!("column '{column}' is given twice"));
                    }
                    config.columns.push((column.to_string(), mode.parse()?));
                }
                None if i == 0 && !item.is_empty() => {
                    config.default = item.parse()?;
                }
                None => {
                    return Err(format!(
                        "'{item}': only the first item is a mode for every column; the others are column=mode"
                    ))
                }
            }
        }
        Ok(config)
    }
}

impl fmt::Display for MetricsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.default)?;
        for (c, m) in &self.columns {
            write!(f, ", {c}={m}")?;
        }
        Ok(())
    }
}

impl MetricsConfig {
    /// The table's setting, read; a value the setting's own check let through always parses.
    pub(crate) fn of(setting: Option<&str>) -> MetricsConfig {
        setting.and_then(|s| s.parse().ok()).unwrap_or_default()
    }

    /// The metadata properties Iceberg's own writers read for the same choice.
    pub(crate) fn properties(&self) -> Vec<(String, String)> {
        let mut out = vec![(
            "write.metadata.metrics.default".to_string(),
            self.default.to_string(),
        )];
        for (c, m) in &self.columns {
            out.push((format!("write.metadata.metrics.column.{c}"), m.to_string()));
        }
        out
    }

    /// The setting after a schema change, as Iceberg's schema updates rewrite
    /// `write.metadata.metrics.column.*`: an entry follows the field it named `before` by id,
    /// so a renamed column, or a field of a renamed struct, is named as it is `after`, and an
    /// entry whose field is gone (a dropped column) goes. Otherwise a rename would silently
    /// put the column back to the default. An entry that named nothing before (a log written
    /// before names were checked) is kept, unless a renamed field now has its name.
    pub(crate) fn after_alter(
        &self,
        before: &[(String, i32, Prim, bool)],
        after: &[(String, i32, Prim, bool)],
    ) -> MetricsConfig {
        // (name after, mode, whether it named a field before)
        let followed: Vec<(String, MetricsMode, bool)> = self
            .columns
            .iter()
            .filter_map(|(c, m)| match before.iter().find(|f| f.0 == *c) {
                Some((_, id, ..)) if after.iter().any(|f| f.0 == *c && f.1 == *id) => {
                    Some((c.clone(), *m, true))
                }
                Some((_, id, ..)) => after
                    .iter()
                    .find(|f| f.1 == *id)
                    .map(|f| (f.0.clone(), *m, true)),
                None => Some((c.clone(), *m, false)),
            })
            .collect();
        let columns = followed
            .iter()
            .filter(|(c, _, known)| *known || !followed.iter().any(|(o, _, k)| *k && o == c))
            .map(|(c, m, _)| (c.clone(), *m))
            .collect();
        MetricsConfig {
            default: self.default,
            columns,
        }
    }

    /// Each field id's mode, a column being named by its current name or a former one.
    /// Names no field has are returned too: the caller says so.
    pub(crate) fn resolve<'a>(
        &'a self,
        fields: &[(String, i32, Prim, bool)],
    ) -> (Resolved, Vec<&'a str>) {
        let mut by_id = HashMap::new();
        let mut unknown = Vec::new();
        for (name, mode) in &self.columns {
            let ids: Vec<i32> = fields
                .iter()
                .filter(|(path, ..)| path == name)
                .map(|(_, id, ..)| *id)
                .collect();
            if ids.is_empty() {
                unknown.push(name.as_str());
            }
            for id in ids {
                by_id.insert(id, *mode);
            }
        }
        (
            Resolved {
                default: self.default,
                by_id,
            },
            unknown,
        )
    }
}

/// A [`MetricsConfig`] by field id.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resolved {
    default: MetricsMode,
    by_id: HashMap<i32, MetricsMode>,
}

impl Resolved {
    pub fn mode(&self, id: i32) -> MetricsMode {
        self.by_id.get(&id).copied().unwrap_or(self.default)
    }
}

/// A lower bound of strings at most `n` characters long: a prefix of the least value.
pub(crate) fn truncate_lower(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// An upper bound of strings at most `n` characters long: the greatest value's first `n`
/// characters with the last one that can be raised raised by one (Iceberg's
/// `truncateStringMax`). `None` when no character can be raised: no bound.
pub(crate) fn truncate_upper(s: &str, n: usize) -> Option<String> {
    if s.chars().nth(n).is_none() {
        return Some(s.to_string());
    }
    let mut chars: Vec<char> = s.chars().take(n).collect();
    while let Some(last) = chars.pop() {
        if let Some(up) = next_char(last) {
            chars.push(up);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// The next Unicode scalar value, skipping the surrogates.
fn next_char(c: char) -> Option<char> {
    match c {
        '\u{D7FF}' => Some('\u{E000}'),
        char::MAX => None,
        c => char::from_u32(c as u32 + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_setting_reads_as_iceberg_writes_its_modes() {
        let c: MetricsConfig = "none, payment_type=full, s.f = truncate(8), n=counts"
            .parse()
            .unwrap();
        assert_eq!(c.default, MetricsMode::None);
        assert_eq!(
            c.columns,
            vec![
                ("payment_type".to_string(), MetricsMode::Full),
                ("s.f".to_string(), MetricsMode::Truncate(8)),
                ("n".to_string(), MetricsMode::Counts),
            ]
        );
        assert_eq!(
            c.to_string(),
            "none, payment_type=full, s.f=truncate(8), n=counts"
        );
        assert_eq!(c.to_string().parse::<MetricsConfig>().unwrap(), c);
        assert_eq!(
            c.properties()[..2],
            [
                (
                    "write.metadata.metrics.default".to_string(),
                    "none".to_string()
                ),
                (
                    "write.metadata.metrics.column.payment_type".to_string(),
                    "full".to_string()
                )
            ]
        );
        // Only columns: every other column keeps the default, full.
        let c: MetricsConfig = "a=none".parse().unwrap();
        assert_eq!(c.default, MetricsMode::Full);
        for bad in [
            "truncate(0)",
            "truncate(x)",
            "some",
            "full, none",
            "full, a=none, a=full",
            "=full",
            "a=trunc(3)",
        ] {
            assert!(bad.parse::<MetricsConfig>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_setting_follows_renames_and_drops() {
        let fields = |named: &[(&str, i32)]| -> Vec<(String, i32, Prim, bool)> {
            named
                .iter()
                .map(|(n, id)| (n.to_string(), *id, Prim::Long, !n.contains('.')))
                .collect()
        };
        let c: MetricsConfig = "none, user=full, user.plan=counts, a=truncate(4), b=full"
            .parse()
            .unwrap();
        let before = fields(&[("user", 1), ("user.plan", 2), ("a", 3), ("b", 4)]);
        // A struct renamed: its fields' entries follow.
        let after = fields(&[("member", 1), ("member.plan", 2), ("a", 3), ("b", 4)]);
        assert_eq!(
            c.after_alter(&before, &after).to_string(),
            "none, member=full, member.plan=counts, a=truncate(4), b=full"
        );
        // A field renamed within its struct; a column of a longer name is left alone.
        let c2: MetricsConfig = "full, user.plan=none, user.planner=counts".parse().unwrap();
        let before2 = fields(&[("user", 1), ("user.plan", 2), ("user.planner", 3)]);
        let after2 = fields(&[("user", 1), ("user.tier", 2), ("user.planner", 3)]);
        assert_eq!(
            c2.after_alter(&before2, &after2).to_string(),
            "full, user.tier=none, user.planner=counts"
        );
        // A column dropped: its entries go, the others stay.
        let after = fields(&[("user", 1), ("user.plan", 2), ("b", 4)]);
        assert_eq!(
            c.after_alter(&before, &after).to_string(),
            "none, user=full, user.plan=counts, b=full"
        );
        let after = fields(&[("a", 3), ("b", 4)]);
        assert_eq!(
            c.after_alter(&before, &after).to_string(),
            "none, a=truncate(4), b=full"
        );
    }

    #[test]
    fn truncated_bounds_of_strings() {
        assert_eq!(truncate_lower("abcdef", 3), "abc");
        assert_eq!(truncate_lower("ab", 3), "ab");
        assert_eq!(truncate_upper("abcdef", 3).as_deref(), Some("abd"));
        assert_eq!(truncate_upper("abc", 3).as_deref(), Some("abc"));
        assert_eq!(truncate_upper("żółw!", 2).as_deref(), Some("żô"));
        assert_eq!(
            truncate_upper("a\u{D7FF}x", 2).as_deref(),
            Some("a\u{E000}")
        );
        assert_eq!(
            truncate_upper("a\u{10FFFF}\u{10FFFF}", 2).as_deref(),
            Some("b")
        );
        assert_eq!(truncate_upper("\u{10FFFF}\u{10FFFF}x", 2), None);
    }

    proptest! {
        /// Iceberg orders strings by their UTF-8 bytes: truncated bounds of a set of strings
        /// still hold every one of them.
        #[test]
        fn truncated_bounds_hold_every_value(
            values in proptest::collection::vec("[a-c\u{D7FF}\u{E000}\u{10FFFF}ż]{0,6}", 1..20),
            n in 1usize..5,
        ) {
            let min = values.iter().min().unwrap();
            let max = values.iter().max().unwrap();
            let lo = truncate_lower(min, n);
            prop_assert!(lo.chars().count() <= n);
            for v in &values {
                prop_assert!(lo.as_bytes() <= v.as_bytes());
            }
            if let Some(hi) = truncate_upper(max, n) {
                prop_assert!(hi.chars().count() <= n);
                for v in &values {
                    prop_assert!(v.as_bytes() <= hi.as_bytes(), "{v:?} > {hi:?}");
                }
            } else {
                prop_assert!(max.chars().take(n).all(|c| c == char::MAX));
            }
        }
    }
}
