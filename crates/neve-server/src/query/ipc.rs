//! An Arrow IPC stream as pieces of an HTTP body, the arrays' own buffers among them.
//!
//! `StreamWriter` copies every buffer of a batch into one message, and then into the
//! response's chunk: twice the result's bytes through memory before the kernel copies them
//! once more into the socket. arrow's `StreamEncoder` gives the message as a list of buffers
//! that point into the batch, so large buffers go to the socket as they are (hyper writes the
//! pieces with one vectored write). Small pieces (the framing, message headers, padding, short
//! buffers) are gathered into one, so a wide batch is not a hundred tiny chunks. The bytes on
//! the wire are exactly `StreamWriter`'s.

use std::collections::VecDeque;

use arrow::array::RecordBatch;
use arrow::buffer::Buffer;
use arrow::datatypes::Schema;
use arrow::error::ArrowError;
use arrow::ipc::writer::StreamEncoder;
use bytes::Bytes;

/// Pieces shorter than this are copied together; longer ones are sent without a copy.
const GATHER_BELOW: usize = 64 << 10;

pub(crate) struct IpcPieces {
    encoder: StreamEncoder,
}

impl IpcPieces {
    pub(crate) fn try_new(schema: &Schema) -> Result<Self, ArrowError> {
        Ok(Self {
            encoder: StreamEncoder::try_new(schema)?,
        })
    }

    /// The pieces of `batch`'s messages (the schema's too, the first time).
    pub(crate) fn encode(
        &mut self,
        batch: &RecordBatch,
        out: &mut VecDeque<Bytes>,
    ) -> Result<(), ArrowError> {
        gather(self.encoder.encode(batch)?, out);
        Ok(())
    }

    /// The end of the stream (and the schema, if no batch came).
    pub(crate) fn finish(self, out: &mut VecDeque<Bytes>) -> Result<(), ArrowError> {
        gather(self.encoder.finish()?, out);
        Ok(())
    }
}

/// A buffer of the batch, lent to the body until it is written.
struct Lent(Buffer);

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        self.0.as_slice()
    }
}

fn gather(buffers: Vec<Buffer>, out: &mut VecDeque<Bytes>) {
    let mut small = Vec::new();
    for b in buffers {
        if b.len() < GATHER_BELOW {
            small.extend_from_slice(b.as_slice());
            continue;
        }
        if !small.is_empty() {
            out.push_back(Bytes::from(std::mem::take(&mut small)));
        }
        out.push_back(Bytes::from_owner(Lent(b)));
    }
    if !small.is_empty() {
        out.push_back(Bytes::from(small));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        ArrayRef, DictionaryArray, Int64Array, StringArray, StringViewArray, StructArray,
    };
    use arrow::datatypes::{DataType, Field, Int32Type};
    use arrow::ipc::writer::StreamWriter;

    use super::*;

    fn batch(n: usize) -> RecordBatch {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter(
            (0..n as i64).map(|i| (i % 7 != 0).then_some(i)),
        ));
        let names: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("name-{i}")),
        ));
        let views: ArrayRef = Arc::new(StringViewArray::from_iter_values(
            (0..n).map(|i| format!("a longer value than twelve bytes {i}")),
        ));
        let kinds: ArrayRef = Arc::new(
            (0..n)
                .map(|i| ["a", "b", "c"][i % 3])
                .collect::<DictionaryArray<Int32Type>>(),
        );
        let nested: ArrayRef = Arc::new(StructArray::from(vec![(
            Arc::new(Field::new("x", DataType::Int64, true)),
            ids.clone(),
        )]));
        RecordBatch::try_from_iter([
            ("id", ids),
            ("name", names),
            ("view", views),
            ("kind", kinds),
            ("s", nested),
        ])
        .unwrap()
    }

    /// Batches large enough that some buffers are sent as they are, and sliced ones whose
    /// offsets and bitmaps must be rewritten: the same bytes as `StreamWriter`.
    #[test]
    fn the_pieces_are_the_stream_writers_bytes() {
        let big = batch(50_000);
        let batches = [
            big.clone(),
            big.slice(3, 20_000),
            batch(10),
            big.slice(49_990, 10),
        ];
        let mut expected = Vec::new();
        let mut w = StreamWriter::try_new(&mut expected, &big.schema()).unwrap();
        for b in &batches {
            w.write(b).unwrap();
        }
        w.finish().unwrap();

        let mut p = IpcPieces::try_new(&big.schema()).unwrap();
        let mut out = VecDeque::new();
        for b in &batches {
            p.encode(b, &mut out).unwrap();
        }
        p.finish(&mut out).unwrap();
        let got: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "the bytes differ from StreamWriter's");
        assert!(
            out.iter().any(|b| b.len() >= GATHER_BELOW),
            "large buffers are sent as pieces of their own"
        );
        let read: Vec<RecordBatch> = arrow::ipc::reader::StreamReader::try_new(&got[..], None)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(read, batches);
    }

    #[test]
    fn a_result_without_batches_is_a_schema_and_the_end() {
        let schema = batch(1).schema();
        let mut expected = Vec::new();
        StreamWriter::try_new(&mut expected, &schema)
            .unwrap()
            .finish()
            .unwrap();
        let mut out = VecDeque::new();
        IpcPieces::try_new(&schema)
            .unwrap()
            .finish(&mut out)
            .unwrap();
        let got: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
        assert!(got == expected);
    }
}
