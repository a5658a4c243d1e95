//! Variable-length integers as Avro and Parquet both write them: unsigned LEB128, and signed
//! numbers zig-zagged first (Avro's `int` and `long`; Parquet's delta and RLE headers).

/// `v` as unsigned LEB128: seven bits a byte, least significant first.
pub(crate) fn uvarint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `n` zig-zagged: small magnitudes, of either sign, to small unsigned numbers.
pub(crate) fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}
