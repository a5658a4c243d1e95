use super::{compress, decompress, Compressor, Decompressor};

const TEXT: &str = include_str!("../../assets/example.txt");

#[test]
fn test_direct() {
    // Can we include_str!("assets/example.txt")?
    // It's excluded from the packaging step, so maybe not.
    crate::test_cycle_unwrap(
        TEXT.as_bytes(),
        |data| compress(data, 1),
        |data| decompress(data, TEXT.len()),
    );
}

#[test]
fn test_stream_compat() {
    // We can bulk-compress and stream-decode
    crate::test_cycle_unwrap(
        TEXT.as_bytes(),
        |data| compress(data, 1),
        |data| crate::decode_all(data),
    );

    // We can stream-encode and bulk-decompress
    crate::test_cycle_unwrap(
        TEXT.as_bytes(),
        |data| crate::encode_all(data, 1),
        |data| decompress(data, TEXT.len()),
    );
}

#[test]
fn has_content_size() {
    let compressed = compress(TEXT.as_bytes(), 1).unwrap();

    // Bulk functions by default include the content size.
    assert_eq!(
        zstd_safe::get_frame_content_size(&compressed).unwrap(),
        Some(TEXT.len() as u64)
    );
}

// neve patch: compressors and decompressors with nothing but a level borrow a pooled context
// per call, and produce exactly what a context of their own produces.
#[test]
fn plain_compressors_borrow_pooled_contexts() {
    let mut plain = Compressor::new(19).unwrap();
    let packed = plain.compress(TEXT.as_bytes()).unwrap();
    assert!(!plain.has_context());

    // A compressor with its own context (forced by `context_mut`) at the same level.
    let mut own = Compressor::new(19).unwrap();
    own.context_mut();
    assert!(own.has_context());
    assert_eq!(packed, own.compress(TEXT.as_bytes()).unwrap());

    // Levels interleave on one thread's pooled contexts without leaking into each other.
    let fast = compress(TEXT.as_bytes(), 1).unwrap();
    assert_ne!(packed, fast);
    assert_eq!(plain.compress(TEXT.as_bytes()).unwrap(), packed);
    let mut default = Compressor::default();
    let mut own_default = Compressor::default();
    own_default.context_mut();
    assert_eq!(
        default.compress(TEXT.as_bytes()).unwrap(),
        own_default.compress(TEXT.as_bytes()).unwrap()
    );

    let mut d = Decompressor::new().unwrap();
    assert_eq!(d.decompress(&packed, TEXT.len()).unwrap(), TEXT.as_bytes());
    assert_eq!(d.decompress(&fast, TEXT.len()).unwrap(), TEXT.as_bytes());
    assert!(!d.has_context());

    let (compression, decompression) = super::pool::pooled();
    assert!((1..=2).contains(&compression), "{compression}");
    assert!((1..=2).contains(&decompression), "{decompression}");
}

#[test]
fn pooled_contexts_recover_from_errors() {
    let packed = compress(TEXT.as_bytes(), 3).unwrap();
    let mut d = Decompressor::new().unwrap();
    // A truncated frame fails, and so does a destination that is too small.
    assert!(d.decompress(&packed[..packed.len() / 2], TEXT.len()).is_err());
    assert!(d.decompress(&packed, 10).is_err());
    assert_eq!(d.decompress(&packed, TEXT.len()).unwrap(), TEXT.as_bytes());

    let mut c = Compressor::new(3).unwrap();
    let mut small = [0u8; 8];
    assert!(c.compress_to_buffer(TEXT.as_bytes(), &mut small[..]).is_err());
    assert_eq!(c.compress(TEXT.as_bytes()).unwrap(), packed);
}

#[test]
fn dictionaries_and_parameters_get_a_context_of_their_own() {
    let dictionary = &TEXT.as_bytes()[..512];
    let mut c = Compressor::with_dictionary(3, dictionary).unwrap();
    assert!(c.has_context());
    let packed = c.compress(TEXT.as_bytes()).unwrap();

    let mut d = Decompressor::with_dictionary(dictionary).unwrap();
    assert!(d.has_context());
    assert_eq!(d.decompress(&packed, TEXT.len()).unwrap(), TEXT.as_bytes());
    // Without the dictionary the frame cannot be read, and the pool is not affected.
    assert!(decompress(&packed, TEXT.len()).is_err());

    let mut p = Decompressor::new().unwrap();
    p.window_log_max(20).unwrap();
    assert!(p.has_context());
    let mut q = Compressor::new(3).unwrap();
    q.include_checksum(true).unwrap();
    assert!(q.has_context());
    let checked = q.compress(TEXT.as_bytes()).unwrap();
    assert_eq!(checked.len(), compress(TEXT.as_bytes(), 3).unwrap().len() + 4);
}
