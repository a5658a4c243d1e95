//! A local folder's PUT that is on disk before it is seen, and before it returns.
//!
//! `LocalFileSystem` writes a staging file and links (create-only) or renames (overwrite) it
//! into place, with no `fsync`: after a power cut or a kernel crash, a commit that was
//! acknowledged can be gone, and a log entry can survive empty while its data files do not
//! (a table that no longer opens). Here the staging file's data is flushed *before* it is
//! linked into place, so a visible object always has its bytes on disk (another process may
//! read it and commit on top of it at once), and the directories that gain an entry (the
//! object's, and any made for it) are flushed before the PUT returns, so an acknowledged
//! object survives. On this project's machines a 1M-row insert's data file flushes in about
//! 0.8 ms and a folder in 0.3, on the upload tasks while later parts encode (BENCHMARKS.md,
//! issue 15, "Fifty-ninth session").

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use object_store::path::Path;
use object_store::{PutMode, PutOptions, PutPayload, PutResult};

/// Staging names: `<name>#<digits>`, which `LocalFileSystem`'s listings skip (its own staging
/// form), unique within the process and, by the process id, across processes.
static STAGING: AtomicU64 = AtomicU64::new(0);

fn generic(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> object_store::Error {
    object_store::Error::Generic {
        store: "LocalFileSystem",
        source: e.into(),
    }
}

/// An I/O error as the store's error of its kind, naming the path: a missing or forbidden
/// path as `NotFound` or `PermissionDenied` (as `LocalFileSystem` reports them), for reads and
/// writes alike.
pub(super) fn io(path: &FsPath, e: std::io::Error) -> object_store::Error {
    let path_text = path.display().to_string();
    match e.kind() {
        ErrorKind::NotFound => object_store::Error::NotFound {
            path: path_text,
            source: Box::new(e),
        },
        ErrorKind::PermissionDenied => object_store::Error::PermissionDenied {
            path: path_text,
            source: Box::new(e),
        },
        _ => generic(format!("{path_text}: {e}")),
    }
}

/// Flushes a directory's entries (a file linked or a folder made in it). A file system that
/// cannot flush a directory (`EINVAL`, as some network and FUSE ones answer) is taken as it
/// is, as PostgreSQL does: refusing every write there would help no one.
fn sync_dir(dir: &FsPath) -> object_store::Result<()> {
    sync_open_dir(&File::open(dir).map_err(|e| io(dir, e))?, dir)
}

/// Makes `dir` and any missing parents, each flushed into its parent.
fn make_dirs(dir: &FsPath) -> object_store::Result<()> {
    // The missing ones, deepest first.
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at {
        if d.is_dir() {
            break;
        }
        missing.push(d);
        at = d.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    // Racing makers of the same folders are fine: `create_dir_all` takes an existing one.
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    for d in missing.iter().rev() {
        if let Some(parent) = d.parent() {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

/// A staging name for `name` (a path or a file name), unique within the process and, by the
/// process id, across processes.
fn staging_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let pid = u64::from(std::process::id());
    let n = (pid << 32) | (STAGING.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff);
    let mut staging = name.to_owned();
    staging.push(format!("#{n}"));
    staging
}

/// The error of linking a staged object into place at `path`: `AlreadyExists` (the
/// create-only PUT's answer) when an object is there.
fn link_error(location: &Path, path: &FsPath, e: std::io::Error) -> object_store::Error {
    if e.kind() == ErrorKind::AlreadyExists {
        object_store::Error::AlreadyExists {
            path: location.to_string(),
            source: Box::new(e),
        }
    } else {
        io(path, e)
    }
}

/// A fresh staging file beside `path`.
fn stage(path: &FsPath) -> object_store::Result<(File, PathBuf)> {
    // A folder made for it and removed at once by someone else (a gc) is made again, twice.
    let mut made = 0;
    loop {
        let staging = PathBuf::from(staging_name(path.as_os_str()));
        match File::options().write(true).create_new(true).open(&staging) {
            Ok(f) => return Ok((f, staging)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) if e.kind() == ErrorKind::NotFound && made < 3 => {
                made += 1;
                make_dirs(path.parent().unwrap_or(FsPath::new("/")))?
            }
            Err(e) => return Err(io(&staging, e)),
        }
    }
}

/// Writes `payload` at `path` (the file system path of `location`) as `opts.mode` says, on disk
/// before it is visible and before this returns. Blocking.
pub(super) fn put(
    location: &Path,
    path: &FsPath,
    payload: PutPayload,
    opts: &PutOptions,
) -> object_store::Result<PutResult> {
    let (mut file, staging) = stage(path)?;
    let placed = (|| {
        for chunk in payload.iter() {
            file.write_all(chunk).map_err(|e| io(&staging, e))?;
        }
        // The bytes (and the size) first: once linked, anyone may read it.
        file.sync_data().map_err(|e| io(&staging, e))?;
        crate::failpoint::hit("local-put:staged");
        match opts.mode {
            PutMode::Overwrite => std::fs::rename(&staging, path).map_err(|e| io(path, e)),
            PutMode::Create => {
                std::fs::hard_link(&staging, path).map_err(|e| link_error(location, path, e))
            }
            PutMode::Update(_) => Err(object_store::Error::NotImplemented {
                operation: "`put_opts` with mode `PutMode::Update`".into(),
                implementer: "LocalStore".into(),
            }),
        }
    })();
    // A link leaves the staging name behind; a failure leaves the whole file.
    if placed.is_err() || matches!(opts.mode, PutMode::Create) {
        let _ = std::fs::remove_file(&staging);
    }
    placed?;
    // The object's entry in its folder.
    sync_dir(path.parent().unwrap_or(FsPath::new("/")))?;
    let meta = file.metadata().map_err(|e| io(path, e))?;
    Ok(PutResult {
        e_tag: super::local::object_meta(&meta, location.clone()).e_tag,
        version: None,
    })
}

/// Writes each object at its path create-only, as [`put`] does, in one go, folder by folder:
/// the folder opened once, every staging file written and flushed, then each linked into place
/// and its staging name removed, all by name in the open folder (a full path walked three
/// times a file was most of the kernel's work), then the folder flushed once. Each object's
/// result is its own (`AlreadyExists` when one was there, left as it was). Blocking.
pub(super) fn put_new_all(
    objects: Vec<(Path, PathBuf, PutPayload)>,
) -> Vec<object_store::Result<()>> {
    let mut out: Vec<Option<object_store::Result<()>>> = objects.iter().map(|_| None).collect();
    // The objects of each folder, in order.
    let mut folders: Vec<(PathBuf, Vec<usize>)> = Vec::new();
    for (i, (_, path, _)) in objects.iter().enumerate() {
        let dir = path.parent().unwrap_or(FsPath::new("/"));
        match folders.iter_mut().find(|(d, _)| d == dir) {
            Some((_, at)) => at.push(i),
            None => folders.push((dir.to_path_buf(), vec![i])),
        }
    }
    let mut staged = Vec::with_capacity(objects.len());
    let mut open = Vec::with_capacity(folders.len());
    for (dir, at) in &folders {
        let folder = match open_folder(dir) {
            Ok(f) => f,
            Err(e) => {
                for &i in at {
                    out[i] = Some(Err(clone_error(&e)));
                }
                continue;
            }
        };
        for &i in at {
            let (_, path, payload) = &objects[i];
            match stage_in(&folder, path, payload) {
                Ok(name) => staged.push((i, open.len(), name)),
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        open.push((folder, dir, at));
    }
    crate::failpoint::hit("local-put:staged");
    for (i, f, staging) in staged {
        let (location, path, _) = &objects[i];
        let (folder, _, _) = &open[f];
        let name = path.file_name().unwrap_or_default();
        let linked = rustix::fs::linkat(
            folder,
            staging.as_os_str(),
            folder,
            name,
            rustix::fs::AtFlags::empty(),
        );
        let _ = rustix::fs::unlinkat(folder, staging.as_os_str(), rustix::fs::AtFlags::empty());
        out[i] = Some(linked.map_err(|e| link_error(location, path, e.into())));
    }
    // The objects' entries in their folders: until these are flushed, none is acknowledged.
    for (folder, dir, at) in &open {
        if let Err(e) = sync_open_dir(folder, dir) {
            for &i in *at {
                if let Some(Ok(())) = out[i] {
                    out[i] = Some(Err(clone_error(&e)));
                }
            }
        }
    }
    out.into_iter()
        .map(|r| r.expect("every object has its result"))
        .collect()
}

/// A folder opened to name files in, made (with its parents) if missing: a folder removed at
/// once by someone else (a gc) is made again, twice.
fn open_folder(dir: &FsPath) -> object_store::Result<File> {
    let mut made = 0;
    loop {
        match File::open(dir) {
            Ok(f) => return Ok(f),
            Err(e) if e.kind() == ErrorKind::NotFound && made < 3 => {
                made += 1;
                make_dirs(dir)?;
            }
            Err(e) => return Err(io(dir, e)),
        }
    }
}

/// Writes `payload` to a fresh staging file in `folder` beside `path`'s name, flushed; its
/// name.
fn stage_in(
    folder: &File,
    path: &FsPath,
    payload: &PutPayload,
) -> object_store::Result<std::ffi::OsString> {
    use rustix::fs::{Mode, OFlags};
    let name = path.file_name().unwrap_or_default();
    let (mut file, staging) = loop {
        let staging = staging_name(name);
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
        match rustix::fs::openat(folder, staging.as_os_str(), flags, Mode::from(0o666)) {
            Ok(fd) => break (File::from(fd), staging),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(io(&path.with_file_name(&staging), e.into())),
        }
    };
    let written = payload
        .iter()
        .try_for_each(|chunk| file.write_all(chunk))
        .and_then(|()| file.sync_data());
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(folder, staging.as_os_str(), rustix::fs::AtFlags::empty());
        return Err(io(&path.with_file_name(&staging), e));
    }
    Ok(staging)
}

/// Flushes an open folder's entries (see [`sync_dir`]).
fn sync_open_dir(folder: &File, dir: &FsPath) -> object_store::Result<()> {
    match folder.sync_all() {
        Err(e) if matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::Unsupported) => Ok(()),
        r => r.map_err(|e| io(dir, e)),
    }
}

/// A copy of a store error, for each object of a batch it stands for (`object_store::Error`
/// is not `Clone`): its kind and message.
fn clone_error(e: &object_store::Error) -> object_store::Error {
    match e {
        object_store::Error::NotFound { path, .. } => object_store::Error::NotFound {
            path: path.clone(),
            source: e.to_string().into(),
        },
        object_store::Error::PermissionDenied { path, .. } => {
            object_store::Error::PermissionDenied {
                path: path.clone(),
                source: e.to_string().into(),
            }
        }
        _ => generic(e.to_string()),
    }
}

/// Whether a file name is a staging name: digits, and nothing else, after its first `#`.
/// Exactly the names `LocalFileSystem` refuses as object keys and skips in listings, so no
/// object has one.
fn is_staging(name: &std::ffi::OsStr) -> bool {
    let name = name.as_encoded_bytes();
    name.iter().position(|&b| b == b'#').is_some_and(|at| {
        let digits = &name[at + 1..];
        !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
    })
}

/// The staging files under `dirs` (walked through, symbolic links not followed) last written
/// before `cutoff_ms` (Unix milliseconds), with their sizes: PUTs cut off by a crash or a
/// kill, which no listing shows and nothing else removes. A PUT takes seconds at most, so one
/// older than a gc's grace is not in flight. A folder or file gone meanwhile is skipped.
/// An error names the path it happened on.
pub(crate) fn stale_staging(
    dirs: &[PathBuf],
    cutoff_ms: i64,
) -> Result<Vec<(PathBuf, u64)>, (PathBuf, std::io::Error)> {
    let gone = |e: &std::io::Error| e.kind() == ErrorKind::NotFound;
    let mut out = Vec::new();
    let mut todo: Vec<PathBuf> = dirs.to_vec();
    while let Some(dir) = todo.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err((dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| (dir.clone(), e))?;
            let meta = match entry.metadata() {
                Ok(m) => m,
                Err(e) if gone(&e) => continue,
                Err(e) => return Err((entry.path(), e)),
            };
            if meta.is_dir() {
                todo.push(entry.path());
                continue;
            }
            if !meta.is_file() || !is_staging(&entry.file_name()) {
                continue;
            }
            let written = meta
                .modified()
                .map_err(|e| (entry.path(), e))?
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            if written < cutoff_ms {
                out.push((entry.path(), meta.len()));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_names() {
        for (name, staging) in [
            ("part-1.parquet#42", true),
            ("00000000000000000001.json#18446744073709551615", true),
            ("#12", true),
            // An object's name (a `#` followed by more than digits): never removed.
            ("a#b#7", false),
            ("part-1.parquet", false),
            ("part#", false),
            ("part#1a", false),
            ("part#12.parquet", false),
        ] {
            assert_eq!(is_staging(std::ffi::OsStr::new(name)), staging, "{name}");
        }
    }

    #[test]
    fn a_walk_names_where_it_failed_and_skips_what_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let not_a_folder = dir.path().join("_data");
        std::fs::write(&not_a_folder, b"x").unwrap();
        let (path, _) = stale_staging(std::slice::from_ref(&not_a_folder), i64::MAX).unwrap_err();
        assert_eq!(path, not_a_folder);
        let missing = dir.path().join("metadata");
        assert_eq!(stale_staging(&[missing], i64::MAX).unwrap(), vec![]);
    }
}
