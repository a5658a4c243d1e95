//! What a request's decoded batches cost the server's memory budget.

use std::collections::HashSet;

use arrow::array::{ArrayData, RecordBatch};

/// Memory `batches` hold: each buffer's allocation once, however many arrays and batches
/// share it. Not `get_array_memory_size`, which counts an allocation once per array using it:
/// the columns of a batch decoded from one IPC message all point into that message, so a
/// 35 MB Arrow request of 20 columns was counted as hundreds of MB (a server refused it).
pub fn held_bytes(batches: &[RecordBatch]) -> u64 {
    fn walk(d: &ArrayData, seen: &mut HashSet<usize>, total: &mut u64) {
        let nulls = d.nulls().map(|n| n.buffer());
        for b in d.buffers().iter().chain(nulls) {
            // A foreign allocation reports no capacity: its referenced bytes stand for it.
            if seen.insert(b.data_ptr().as_ptr() as usize) {
                *total += b.capacity().max(b.len()) as u64;
            }
        }
        for c in d.child_data() {
            walk(c, seen, total);
        }
    }
    let (mut seen, mut total) = (HashSet::new(), 0u64);
    for b in batches {
        for c in b.columns() {
            walk(&c.to_data(), &mut seen, &mut total);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::ipc::reader::StreamReader;
    use arrow::ipc::writer::StreamWriter;

    use super::*;

    fn wide(rows: i64, columns: usize) -> RecordBatch {
        let mut fields = Vec::new();
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for c in 0..columns {
            fields.push(Field::new(format!("n{c}"), DataType::Int64, true));
            arrays.push(Arc::new(Int64Array::from_iter(
                (0..rows).map(|i| (i % 7 != 0).then_some(i * c as i64)),
            )));
        }
        fields.push(Field::new("s", DataType::Utf8, false));
        arrays.push(Arc::new(StringArray::from_iter_values(
            (0..rows).map(|i| format!("row {i}")),
        )));
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap()
    }

    /// Buffer bytes counted array by array, as `get_array_memory_size` does (less the arrays'
    /// structs).
    fn buffers(b: &RecordBatch) -> usize {
        b.columns().iter().map(|c| c.get_buffer_memory_size()).sum()
    }

    #[test]
    fn batches_decoded_from_one_message_count_its_bytes_once() {
        let batch = wide(20_000, 20);
        let mut body = Vec::new();
        let mut w = StreamWriter::try_new(&mut body, &batch.schema()).unwrap();
        w.write(&batch).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        drop(w);
        let decoded: Vec<RecordBatch> = StreamReader::try_new(std::io::Cursor::new(&body), None)
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        assert_eq!(decoded.len(), 2);
        let held = held_bytes(&decoded);
        let counted: usize = decoded.iter().map(buffers).sum();
        // Each message's columns share its one allocation: the body's size, give or take the
        // framing, where counting per array makes it many times that.
        assert!(
            held <= body.len() as u64 + 4096 && held * 2 >= body.len() as u64,
            "held {held}, body {}",
            body.len()
        );
        assert!(counted as u64 > 10 * held, "counted {counted}, held {held}");
    }

    #[test]
    fn batches_of_their_own_buffers_count_every_buffer_and_a_shared_column_once() {
        let a = wide(1_000, 3);
        // Built array by array: no allocation shared, so the two counts agree.
        assert_eq!(held_bytes(std::slice::from_ref(&a)), buffers(&a) as u64);
        // The same batch twice, and a slice of it, hold no more than it does.
        let again = [a.clone(), a.clone(), a.slice(10, 100)];
        assert_eq!(held_bytes(&again), buffers(&a) as u64);
        // Another batch's buffers add theirs.
        let b = wide(1_000, 3);
        assert_eq!(
            held_bytes(&[a.clone(), b.clone()]),
            (buffers(&a) + buffers(&b)) as u64
        );
    }
}
