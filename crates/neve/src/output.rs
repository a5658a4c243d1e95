//! Human-readable formatting helpers.

use neve_core::log::Snapshot;
use neve_core::partition::format_spec;
use serde_json::Value;

pub fn bytes(n: u64) -> String {
    humansize::format_size(n, humansize::DECIMAL)
}

/// `1234567` -> `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The `neve info --json` object.
pub fn info_json(location: &str, s: &Snapshot) -> Value {
    neve_core::describe::info(location, s)
}

/// The plain `neve info` text.
pub fn info_text(location: &str, s: &Snapshot) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let parts = s.partitions();
    let _ = writeln!(o, "table         {location}");
    let _ = writeln!(
        o,
        "version       {}  ({})",
        s.version,
        neve_core::clock::format_millis(s.timestamp)
    );
    let _ = writeln!(o, "files         {}", count(s.files.len() as u64));
    let _ = writeln!(o, "rows          {}", count(s.rows()));
    let _ = writeln!(
        o,
        "bytes         {} ({})",
        count(s.bytes()),
        bytes(s.bytes())
    );
    if s.metadata.partition_by.is_empty() {
        let _ = writeln!(o, "partitions    none");
    } else {
        let _ = writeln!(
            o,
            "partitions    {}  by {}",
            parts.len(),
            format_spec(&s.metadata.partition_by)
        );
        let show = 5.min(parts.len());
        for (p, (files, rows)) in parts.iter().rev().take(show) {
            let _ = writeln!(o, "  {p:<28} {files:>6} files {:>14} rows", count(*rows));
        }
        if parts.len() > show {
            let _ = writeln!(o, "  ... {} more", parts.len() - show);
        }
    }
    let sort = if s.metadata.sort_by.is_empty() {
        "none".to_string()
    } else {
        s.metadata.sort_by.join(", ")
    };
    let _ = writeln!(o, "sort by       {sort}");
    if let Some(m) = &s.metadata.merge {
        let _ = writeln!(o, "merge         {m}");
    }
    let st = &s.metadata.settings;
    let _ = writeln!(
        o,
        "settings      checkpoint_interval={} strict_schema={} compression={} row_group_rows={} log_retention_hours={}",
        st.checkpoint_interval, st.strict_schema, st.compression, st.row_group_rows, st.log_retention_hours
    );
    // The table's own maintenance policy, where it sets one (else the maintaining process's).
    let policy: Vec<String> = [
        st.merge_min_files.map(|n| format!("merge_min_files={n}")),
        st.merge_target_file_size
            .map(|b| format!("merge_target_file_size={}", bytes(b))),
        st.maintenance_interval_seconds
            .map(|s| format!("maintenance_interval={s}s")),
        st.gc_grace_seconds.map(|s| format!("gc_grace={s}s")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !policy.is_empty() {
        let _ = writeln!(o, "maintenance   {}", policy.join(" "));
    }
    if st.iceberg {
        let _ = writeln!(
            o,
            "iceberg       on: max_snapshots={} metrics={}",
            neve_core::iceberg::max_snapshots(st),
            st.iceberg_metrics.as_deref().unwrap_or("full")
        );
    }
    if s.metadata.schema.is_empty() {
        let _ = writeln!(o, "schema        (none yet: set by the first insert)");
    } else {
        let _ = writeln!(
            o,
            "schema        {} columns",
            s.metadata.schema.columns.len()
        );
        let w = s
            .metadata
            .schema
            .columns
            .iter()
            .map(|c| neve_core::schema::format_name(&c.name).len())
            .max()
            .unwrap_or(0);
        for c in &s.metadata.schema.columns {
            let null = if c.nullable { "" } else { " not null" };
            let name = neve_core::schema::format_name(&c.name);
            let _ = writeln!(o, "  {name:<w$}  {}{null}", c.column_type);
        }
    }
    o
}
