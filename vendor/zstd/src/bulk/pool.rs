//! neve patch: per-thread pools of plain zstd contexts.
//!
//! The parquet crate makes a compressor and a decompressor for every column chunk it reads or
//! writes, and uses each only for the pages of that chunk. A merge of 13,200 files of 23
//! columns would create 303,600 decompression contexts (about 95 kB each, and on virtual
//! machines a CPUID trap per context), and keep one alive for every column of every open input.
//! A compressor or decompressor that has nothing but a level now borrows a context from its
//! thread's pool for the length of one call instead: a thread reuses a handful of contexts.
//!
//! A pooled context is always put back in its default state before use (parameters reset,
//! then the level set), so a call produces exactly the bytes a fresh context would.

use crate::map_error_code;
use std::cell::RefCell;
use std::io;

/// Contexts kept per thread, of each kind. One call uses one context; more than one is only
/// needed when a call nests in another (which zstd itself never does).
const KEEP: usize = 2;

thread_local! {
    static COMPRESSION: RefCell<Vec<zstd_safe::CCtx<'static>>> = const { RefCell::new(Vec::new()) };
    static DECOMPRESSION: RefCell<Vec<zstd_safe::DCtx<'static>>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with a pooled compression context set to `level` (zstd's default when `None`).
pub(crate) fn with_compression<R>(
    level: Option<i32>,
    f: impl FnOnce(&mut zstd_safe::CCtx<'static>) -> io::Result<R>,
) -> io::Result<R> {
    let mut context = COMPRESSION
        .try_with(|pool| pool.borrow_mut().pop())
        .ok()
        .flatten()
        .map(Ok)
        .unwrap_or_else(|| {
            zstd_safe::CCtx::try_create().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    "cannot create a zstd compression context",
                )
            })
        })?;
    context
        .reset(zstd_safe::ResetDirective::SessionAndParameters)
        .map_err(map_error_code)?;
    if let Some(level) = level {
        context
            .set_parameter(zstd_safe::CParameter::CompressionLevel(level))
            .map_err(map_error_code)?;
    }
    let result = f(&mut context);
    give_back(&COMPRESSION, context);
    result
}

/// Runs `f` with a pooled decompression context in its default state.
pub(crate) fn with_decompression<R>(
    f: impl FnOnce(&mut zstd_safe::DCtx<'static>) -> io::Result<R>,
) -> io::Result<R> {
    let mut context = DECOMPRESSION
        .try_with(|pool| pool.borrow_mut().pop())
        .ok()
        .flatten()
        .map(Ok)
        .unwrap_or_else(|| {
            zstd_safe::DCtx::try_create().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    "cannot create a zstd decompression context",
                )
            })
        })?;
    // Pooled contexts never get parameters or a dictionary; this only drops any frame an
    // earlier call left half-read.
    context
        .reset(zstd_safe::ResetDirective::SessionOnly)
        .map_err(map_error_code)?;
    let result = f(&mut context);
    give_back(&DECOMPRESSION, context);
    result
}

fn give_back<T: 'static>(
    pool: &'static std::thread::LocalKey<RefCell<Vec<T>>>,
    context: T,
) {
    // During thread teardown the pool may be gone: the context is then simply freed.
    let _ = pool.try_with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.len() < KEEP {
            pool.push(context);
        }
    });
}

#[cfg(test)]
pub(crate) fn pooled() -> (usize, usize) {
    (
        COMPRESSION.with(|pool| pool.borrow().len()),
        DECOMPRESSION.with(|pool| pool.borrow().len()),
    )
}
