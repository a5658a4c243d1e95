//! One function per subcommand.

mod files;
mod insert;
mod maintenance;
mod serve;
mod sql;

use std::io::Write;

use neve_core::log::TableSettings;
use neve_core::partition::parse_spec;
use neve_core::{AsOf, CreateOptions, Table};

use crate::cli::{AlterArgs, Cli, Command, CreateArgs, HistoryArgs, InfoArgs, LayoutArgs};
use crate::error::{CliError, Result};
use crate::output;

pub async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Create(a) => create(a).await,
        Command::Alter(a) => alter(a).await,
        Command::Insert(a) => insert::run(a).await,
        Command::Info(a) => info(a).await,
        Command::Files(a) => files::run(a).await,
        Command::History(a) => history(a).await,
        Command::Sql(a) => sql::run(a).await,
        Command::Merge(a) => maintenance::merge(a).await,
        Command::Gc(a) => maintenance::gc(a).await,
        Command::DropPartition(a) => maintenance::drop_partition(a).await,
        Command::Delete(a) => maintenance::delete(a).await,
        Command::Quickstart(a) => crate::bench::quickstart(a).await,
        Command::Bench(b) => crate::bench::run(b).await,
        Command::Serve(a) => serve::run(a).await,
        Command::Proxy(a) => serve::proxy(a).await,
        Command::HashToken(a) => serve::hash_token(a),
        Command::Maintain(a) => serve::maintain(a).await,
        Command::Iceberg(c) => maintenance::iceberg(c).await,
    }
}

/// Table layout from command-line flags.
pub fn create_options(layout: &LayoutArgs, strict: bool) -> Result<CreateOptions> {
    let mut settings = TableSettings {
        strict_schema: strict,
        ..Default::default()
    };
    apply_settings(&mut settings, &layout.settings)?;
    Ok(CreateOptions {
        partition_by: parse_spec(&layout.partition_by)?,
        sort_by: layout
            .sort_by
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        settings,
        schema: Default::default(),
        merge: layout.merge.as_deref().map(str::parse).transpose()?,
    })
}

/// `--set KEY=VALUE` flags applied to `settings`.
pub fn apply_settings(settings: &mut TableSettings, flags: &[String]) -> Result<()> {
    for kv in flags {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| CliError::Usage(format!("--set expects KEY=VALUE, got '{kv}'")))?;
        settings.set(k.trim(), v.trim())?;
    }
    Ok(())
}

pub fn parse_as_of(s: &Option<String>) -> Result<AsOf> {
    Ok(match s {
        Some(s) => s.parse()?,
        None => AsOf::Latest,
    })
}

async fn create(a: CreateArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    // A flag and a `--set` of the same setting: which one wins would be a guess.
    for (flag, given, key) in [
        ("--strict-schema", a.strict_schema, "strict_schema"),
        ("--iceberg", a.iceberg, "iceberg"),
    ] {
        let set = a
            .layout
            .settings
            .iter()
            .any(|kv| kv.split_once('=').is_some_and(|(k, _)| k.trim() == key));
        if given && set {
            return Err(CliError::Usage(format!(
                "{flag} and --set {key}=... both set {key}: give one"
            )));
        }
    }
    let mut opts = create_options(&a.layout, a.strict_schema)?;
    if let Some(schema) = &a.schema {
        opts.schema = neve_core::schema::parse_schema(schema)?;
    }
    opts.settings.iceberg |= a.iceberg;
    let s = table.create(opts).await?;
    println!("created table {} (version {})", a.table, s.version);
    Ok(())
}

async fn alter(a: AlterArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    let op = neve_core::schema::AlterOp::parse(&a.change)?;
    let version = table.alter(&op).await?;
    let s = table.snapshot().await?;
    println!(
        "altered {} as version {version}: {}",
        a.table, s.metadata.schema
    );
    Ok(())
}

async fn info(a: InfoArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    let s = table.snapshot_as_of(parse_as_of(&a.as_of)?).await?;
    let mut out = std::io::stdout().lock();
    if a.json {
        writeln!(out, "{}", output::info_json(&a.table, &s))?;
    } else {
        write!(out, "{}", output::info_text(&a.table, &s))?;
    }
    Ok(())
}

async fn history(a: HistoryArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    let commits = table.history(a.limit).await?;
    let mut out = std::io::stdout().lock();
    if !a.json {
        writeln!(
            out,
            "{:>8}  {:<24}  {:<14} {:>8} {:>8} {:>12} {:>12}  writer",
            "version", "time", "operation", "+files", "-files", "+rows", "-rows"
        )?;
    }
    for c in commits {
        let s = &c.info.summary;
        if a.json {
            let line = neve_core::describe::commit(&c);
            writeln!(out, "{line}")?;
        } else {
            writeln!(
                out,
                "{:>8}  {:<24}  {:<14} {:>8} {:>8} {:>12} {:>12}  {}",
                c.version,
                neve_core::clock::format_millis(c.info.timestamp),
                c.info.operation,
                format!("+{}", s.files_added),
                format!("-{}", s.files_removed),
                format!("+{}", s.rows_added),
                format!("-{}", s.rows_removed),
                c.info.writer
            )?;
        }
    }
    Ok(())
}
