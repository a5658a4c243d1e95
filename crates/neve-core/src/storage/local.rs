//! A local folder as an object store, with small reads done on the calling task.
//!
//! `object_store`'s `LocalFileSystem` hands every read to tokio's blocking pool, and a ranged
//! GET twice (open, then read). A query over 1,320 small files makes about 4,000 such reads:
//! the thread hand-offs cost more CPU than the reads (a third of a `count(*) ... GROUP BY`
//! was the kernel switching threads). Reading a few MB from the page cache takes
//! microseconds, so reads up to [`INLINE_MAX`] bytes are done in place; bigger ones, lists and
//! deletes go to `LocalFileSystem` unchanged. Results are the same as its own: same metadata,
//! same e-tags, same errors. A PUT is its own (`durable.rs`): on disk before it is visible and
//! before it returns, where `LocalFileSystem` never flushes.

use std::fs::{File, Metadata};
use std::io::ErrorKind;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::time::SystemTime;

use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    Attributes, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use super::durable::io;

/// Reads up to this many bytes happen on the calling task.
pub const INLINE_MAX: u64 = 8 << 20;

/// [`LocalFileSystem`] with small reads done in place (see the module docs).
#[derive(Debug, Default)]
pub struct LocalStore {
    inner: LocalFileSystem,
}

impl LocalStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// The file at `location`, as `LocalFileSystem` finds it. Its own way goes through a URL
    /// (each part percent-encoded, then decoded): a millisecond of a worst-case Iceberg sync,
    /// for its 132 delete files (BENCHMARKS.md, "Seventy-eighth session"). A location of
    /// plain parts (letters, digits, `-_.=`, no `.` or `..` part), which every table's own
    /// files are, comes out of it unchanged, so it is taken as is; any other goes its way.
    fn fs_path(&self, location: &Path) -> object_store::Result<std::path::PathBuf> {
        let raw = location.as_ref();
        let plain = !raw.is_empty()
            && raw.split('/').all(|part| {
                !matches!(part, "" | "." | "..")
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.=".contains(&b))
            });
        if plain {
            return Ok(std::path::PathBuf::from(format!("/{raw}")));
        }
        self.inner.path_to_filesystem(location)
    }

    /// Objects that must not exist yet, written in one blocking task with one flush of each
    /// folder (`durable::put_new_all`): a sync's hundred-odd small metadata files, each PUT
    /// handed to a thread of its own and flushing the same folder, cost more CPU than writing
    /// them.
    pub(super) async fn put_new_all(
        &self,
        objects: Vec<(Path, PutPayload)>,
    ) -> object_store::Result<Vec<object_store::Result<()>>> {
        let mut paths = Vec::with_capacity(objects.len());
        for (location, payload) in objects {
            let path = self.fs_path(&location)?;
            paths.push((location, path, payload));
        }
        tokio::task::spawn_blocking(move || super::durable::put_new_all(paths))
            .await
            .map_err(|e| object_store::Error::JoinError { source: e })
    }
}

/// The local store every local location shares: a batch of PUTs goes around the
/// `ObjectStore` trait only for a location whose store is this very one, never a store that
/// wraps it (tests and embedders wrap stores to count or fail requests).
pub(super) fn shared() -> &'static std::sync::Arc<LocalStore> {
    static SHARED: std::sync::OnceLock<std::sync::Arc<LocalStore>> = std::sync::OnceLock::new();
    SHARED.get_or_init(Default::default)
}

impl std::fmt::Display for LocalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LocalStore({})", self.inner)
    }
}

fn open(path: &std::path::Path) -> object_store::Result<(File, Metadata)> {
    let file = File::open(path).map_err(|e| io(path, e))?;
    let meta = file.metadata().map_err(|e| io(path, e))?;
    if meta.is_dir() {
        return Err(io(
            path,
            std::io::Error::new(ErrorKind::NotFound, "is directory"),
        ));
    }
    Ok((file, meta))
}

/// The object's metadata, spelled as `LocalFileSystem` spells it (its e-tag is
/// inode-mtime-size in hex), so a caller mixing both sees the same values.
pub(super) fn object_meta(meta: &Metadata, location: Path) -> ObjectMeta {
    use std::os::unix::fs::MetadataExt;
    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    let mtime = modified
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    ObjectMeta {
        location,
        last_modified: modified.into(),
        size: meta.len(),
        e_tag: Some(format!("{:x}-{mtime:x}-{:x}", meta.ino(), meta.len())),
        version: None,
    }
}

fn read_range(file: &File, path: &std::path::Path, r: Range<u64>) -> object_store::Result<Bytes> {
    let mut buf = vec![0u8; (r.end - r.start) as usize];
    file.read_exact_at(&mut buf, r.start).map_err(|e| {
        if e.kind() == ErrorKind::UnexpectedEof {
            object_store::Error::Generic {
                store: "LocalFileSystem",
                source: format!(
                    "{}: range {}..{} is past the end of the file",
                    path.display(),
                    r.start,
                    r.end
                )
                .into(),
            }
        } else {
            io(path, e)
        }
    })?;
    Ok(buf.into())
}

#[async_trait::async_trait]
impl ObjectStore for LocalStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if !opts.attributes.is_empty() {
            return Err(object_store::Error::NotImplemented {
                operation: "`put_opts` with `opts.attributes` specified".into(),
                implementer: self.to_string(),
            });
        }
        let path = self.fs_path(location)?;
        let location = location.clone();
        tokio::task::spawn_blocking(move || super::durable::put(&location, &path, payload, &opts))
            .await
            .map_err(|e| object_store::Error::JoinError { source: e })?
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let path = self.fs_path(location)?;
        let (file, meta) = open(&path)?;
        let meta = object_meta(&meta, location.clone());
        options.check_preconditions(&meta)?;
        let range = match &options.range {
            Some(r) => r
                .as_range(meta.size)
                .map_err(|e| object_store::Error::Generic {
                    store: "LocalFileSystem",
                    source: Box::new(e),
                })?,
            None => 0..meta.size,
        };
        let payload = if options.head || range.end - range.start > INLINE_MAX {
            // Streamed by the caller, through the blocking pool, as `LocalFileSystem` does.
            GetResultPayload::File(file, path)
        } else {
            let bytes = read_range(&file, &path, range.clone())?;
            GetResultPayload::Stream(Box::pin(futures::stream::once(async { Ok(bytes) })))
        };
        Ok(GetResult {
            payload,
            meta,
            range,
            attributes: Attributes::default(),
        })
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let total: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
        if total > INLINE_MAX {
            return self.inner.get_ranges(location, ranges).await;
        }
        let path = self.fs_path(location)?;
        let file = File::open(&path).map_err(|e| io(&path, e))?;
        ranges
            .iter()
            .map(|r| read_range(&file, &path, r.clone()))
            .collect()
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
// One range of many is what these calls mean, not a mistyped array of numbers.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use object_store::{GetRange, ObjectStoreExt};

    use super::*;

    /// Both stores over one folder holding `a` (small) and `big` (over `INLINE_MAX`).
    async fn stores() -> (tempfile::TempDir, LocalStore, LocalFileSystem, Path, Path) {
        let dir = tempfile::tempdir().unwrap();
        let ours = LocalStore::new();
        let theirs = LocalFileSystem::new();
        let root = Path::from_absolute_path(dir.path()).unwrap();
        let small = root.clone().join("a");
        let big = root.clone().join("big");
        let data: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        theirs.put(&small, data.into()).await.unwrap();
        let data: Vec<u8> = (0..INLINE_MAX + 10).map(|i| (i % 241) as u8).collect();
        theirs.put(&big, data.into()).await.unwrap();
        (dir, ours, theirs, small, big)
    }

    proptest::proptest! {
        /// A location's file is the one `LocalFileSystem` finds, for plain parts and for any
        /// other (percent signs, dots, spaces, `#`, `:`, backslashes), as `Path` keeps them
        /// raw (`from_url_path`) or encodes them (`from_iter`).
        #[test]
        fn files_are_those_local_file_system_finds(
            parts in proptest::collection::vec("[a-zA-Z0-9=._%# :~\\\\-]{1,6}|\\.|\\.\\.|%2e%2e|%2E", 1..6),
        ) {
            let ours = LocalStore::new();
            let joined = parts.join("/");
            let located = [Path::from_url_path(&joined).ok(), Some(Path::from_iter(parts.iter().map(String::as_str)))];
            for location in located.into_iter().flatten() {
                let a = ours.fs_path(&location).map_err(|e| e.to_string());
                let b = ours.inner.path_to_filesystem(&location).map_err(|e| e.to_string());
                proptest::prop_assert_eq!(a, b, "{:?}", location);
            }
        }
    }

    #[tokio::test]
    async fn reads_match_local_file_system() {
        let (_dir, ours, theirs, small, big) = stores().await;
        let ranges = [
            None,
            Some(GetRange::Bounded(10..20)),
            Some(GetRange::Offset(990)),
            Some(GetRange::Suffix(7)),
            Some(GetRange::Bounded(995..2000)),
        ];
        for path in [&small, &big] {
            for range in &ranges {
                let opts = || GetOptions {
                    range: range.clone(),
                    ..Default::default()
                };
                let a = ours.get_opts(path, opts()).await.unwrap();
                let b = theirs.get_opts(path, opts()).await.unwrap();
                assert_eq!(a.meta, b.meta, "{path} {range:?}");
                assert_eq!(a.range, b.range, "{path} {range:?}");
                let inline = matches!(a.payload, GetResultPayload::Stream(_));
                assert_eq!(inline, a.range.end - a.range.start <= INLINE_MAX);
                assert_eq!(a.bytes().await.unwrap(), b.bytes().await.unwrap());
            }
            let rs = [0..3, 500..900, 2..4];
            assert_eq!(
                ours.get_ranges(path, &rs).await.unwrap(),
                theirs.get_ranges(path, &rs).await.unwrap()
            );
            assert_eq!(
                ours.head(path).await.unwrap(),
                theirs.head(path).await.unwrap()
            );
        }
        let all = [0..INLINE_MAX + 10];
        assert_eq!(
            ours.get_ranges(&big, &all).await.unwrap(),
            theirs.get_ranges(&big, &all).await.unwrap()
        );
    }

    #[tokio::test]
    async fn errors_match_local_file_system() {
        let (dir, ours, _theirs, small, _big) = stores().await;
        let root = Path::from_absolute_path(dir.path()).unwrap();
        let missing = root.clone().join("nope");
        assert!(matches!(
            ours.get(&missing).await,
            Err(object_store::Error::NotFound { .. })
        ));
        assert!(matches!(
            ours.get_ranges(&missing, &[0..1]).await,
            Err(object_store::Error::NotFound { .. })
        ));
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(matches!(
            ours.get(&root.clone().join("sub")).await,
            Err(object_store::Error::NotFound { .. })
        ));
        let stale = GetOptions {
            if_match: Some("not-the-etag".into()),
            ..Default::default()
        };
        assert!(matches!(
            ours.get_opts(&small, stale).await,
            Err(object_store::Error::Precondition { .. })
        ));
        let etag = ours.head(&small).await.unwrap().e_tag;
        let unchanged = GetOptions {
            if_none_match: etag,
            ..Default::default()
        };
        assert!(matches!(
            ours.get_opts(&small, unchanged).await,
            Err(object_store::Error::NotModified { .. })
        ));
        assert!(ours.get_ranges(&small, &[990..1010]).await.is_err());
        assert!(ours.get_range(&small, 2000..2001).await.is_err());
    }

    /// Every file name under `dir`, recursively.
    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                out.extend(names(&e.path()));
            } else {
                out.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        out
    }

    /// The durable PUT does what `LocalFileSystem`'s does: folders made as needed, create-only
    /// refused over an existing object with `AlreadyExists` (the commit protocol's answer), an
    /// overwrite replacing it, the e-tag the object's own, no staging file left behind.
    #[tokio::test]
    async fn puts_match_local_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let ours = LocalStore::new();
        let root = Path::from_absolute_path(dir.path()).unwrap();
        let deep = root
            .clone()
            .join("t")
            .join("_data")
            .join("d=2021-08")
            .join("a.parquet");
        let create = || PutOptions::from(object_store::PutMode::Create);
        let put = ours
            .put_opts(&deep, b"one".to_vec().into(), create())
            .await
            .unwrap();
        assert_eq!(put.e_tag, ours.head(&deep).await.unwrap().e_tag);
        let again = ours.put_opts(&deep, b"two".to_vec().into(), create()).await;
        assert!(
            matches!(again, Err(object_store::Error::AlreadyExists { .. })),
            "{again:?}"
        );
        assert_eq!(ours.get(&deep).await.unwrap().bytes().await.unwrap(), "one");
        let put = ours.put(&deep, b"three".to_vec().into()).await.unwrap();
        assert_eq!(put.e_tag, ours.head(&deep).await.unwrap().e_tag);
        assert_eq!(
            ours.get(&deep).await.unwrap().bytes().await.unwrap(),
            "three"
        );
        let attrs = PutOptions {
            attributes: [(
                object_store::Attribute::ContentType,
                object_store::AttributeValue::from("x/y"),
            )]
            .into_iter()
            .collect(),
            ..Default::default()
        };
        assert!(matches!(
            ours.put_opts(&deep, b"four".to_vec().into(), attrs).await,
            Err(object_store::Error::NotImplemented { .. })
        ));
        assert_eq!(names(dir.path()), ["a.parquet"]);
    }

    /// Many writers racing to create one object (a commit's log entry): exactly one wins, the
    /// object holds its bytes, and no staging file is left.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn racing_creates_one_winner() {
        let dir = tempfile::tempdir().unwrap();
        let ours = std::sync::Arc::new(LocalStore::new());
        let path = Path::from_absolute_path(dir.path())
            .unwrap()
            .join("_log")
            .join("7.json");
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let (ours, path) = (ours.clone(), path.clone());
                tokio::spawn(async move {
                    let body = format!("writer {i}").into_bytes();
                    let opts = PutOptions::from(object_store::PutMode::Create);
                    (i, ours.put_opts(&path, body.into(), opts).await)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                (i, Ok(_)) => winners.push(i),
                (_, Err(object_store::Error::AlreadyExists { .. })) => {}
                (_, Err(e)) => panic!("{e}"),
            }
        }
        assert_eq!(winners.len(), 1, "{winners:?}");
        let got = ours.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(got, format!("writer {}", winners[0]).into_bytes());
        assert_eq!(names(dir.path()), ["7.json"]);
    }

    /// A batch of new objects on a local folder: each written unless one is there (left as
    /// it was), subfolders made, no staging file left; through a store that wraps the local
    /// one, the wrapper's own PUTs answer the same (here, under its prefix).
    #[tokio::test]
    async fn a_batch_of_new_objects_writes_each_once() {
        let dir = tempfile::tempdir().unwrap();
        let table = crate::TableLocation::local("t", dir.path()).unwrap();
        let prefixed = crate::TableLocation {
            store: std::sync::Arc::new(object_store::prefix::PrefixStore::new(
                table.store.clone(),
                table.child("wrapped"),
            )),
            root: Path::default(),
            ..table.clone()
        };
        for (location, at) in [
            (&table, dir.path().to_path_buf()),
            (&prefixed, dir.path().join("wrapped")),
        ] {
            let old = location.child("metadata/a");
            location.store.put(&old, "old".into()).await.unwrap();
            let written = location
                .put_new(vec![
                    ("metadata/a".into(), "new".into()),
                    ("metadata/b".into(), "bb".into()),
                    ("metadata/sub/c".into(), "ccc".into()),
                ])
                .await
                .unwrap();
            assert_eq!(written, vec![None, Some(2), Some(3)]);
            for (file, want) in [
                ("metadata/a", "old"),
                ("metadata/b", "bb"),
                ("metadata/sub/c", "ccc"),
            ] {
                assert_eq!(
                    std::fs::read_to_string(at.join(file)).unwrap(),
                    want,
                    "{file}"
                );
            }
            let staging = super::super::stale_staging(std::slice::from_ref(&at), i64::MAX).unwrap();
            assert_eq!(staging, vec![]);
        }
    }
}
