//! Where each CSV record starts, so an error names the line a person finds in an editor.
//!
//! arrow-csv numbers records, not lines: the blank lines its parser (csv-core) skips and the
//! line breaks inside quoted fields shifted every line named below them. [`LineTracker`] sits
//! between the input and the parser and follows csv-core's rules for where a record starts
//! (its default terminator: `\n`, `\r` or `\r\n`; quotes only at the start of a field, `""`
//! inside one), one pass over bytes the parser reads anyway.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between records: terminators here are blank lines.
    StartRecord,
    /// At the start of a field, where a quote opens a quoted field.
    StartField,
    /// In an unquoted field.
    InField,
    InQuoted,
    /// After a quote inside a quoted field: another quote is a literal one.
    AfterQuote,
}

/// The first line (1-based) of each record the parser has been given and not yet claimed.
#[derive(Debug, Default)]
struct Starts {
    lines: VecDeque<u64>,
    /// Records claimed so far.
    claimed: u64,
}

/// A handle on the record starts a [`LineTracker`] finds.
#[derive(Debug, Clone, Default)]
pub(super) struct RecordLines(Arc<Mutex<Starts>>);

impl RecordLines {
    /// The lines of the next `n` records, in order (records are decoded in input order).
    pub(super) fn claim(&self, n: usize) -> Vec<u64> {
        let mut s = self.0.lock().expect("record lines poisoned");
        let n = n.min(s.lines.len());
        s.claimed += n as u64;
        s.lines.drain(..n).collect()
    }

    /// The line of record `record` (1-based, counting every record the parser read, a header
    /// too), if it has not been claimed.
    pub(super) fn line_of(&self, record: u64) -> Option<u64> {
        let s = self.0.lock().expect("record lines poisoned");
        let i = record.checked_sub(1)?.checked_sub(s.claimed)?;
        s.lines.get(usize::try_from(i).ok()?).copied()
    }
}

/// Passes the input through unchanged, noting the line each record starts on.
pub(super) struct LineTracker<R> {
    inner: R,
    delimiter: u8,
    state: State,
    /// The current line, 1-based.
    line: u64,
    /// The last byte was a `\r`: a `\n` now ends the same line.
    after_cr: bool,
    starts: RecordLines,
}

impl<R: Read> LineTracker<R> {
    pub(super) fn new(inner: R, delimiter: u8) -> (Self, RecordLines) {
        let starts = RecordLines::default();
        let tracker = Self {
            inner,
            delimiter,
            state: State::StartRecord,
            line: 1,
            after_cr: false,
            starts: starts.clone(),
        };
        (tracker, starts)
    }

    fn scan(&mut self, bytes: &[u8]) {
        let mut found = Vec::new();
        for &b in bytes {
            let term = b == b'\n' || b == b'\r';
            if self.state == State::StartRecord && !term {
                found.push(self.line);
                self.state = State::StartField;
            }
            self.state = match (self.state, b) {
                (State::StartRecord, _) => State::StartRecord,
                (State::InQuoted, b'"') => State::AfterQuote,
                (State::InQuoted, _) => State::InQuoted,
                (State::AfterQuote, b'"') => State::InQuoted,
                (State::StartField, b'"') => State::InQuoted,
                (_, _) if term => State::StartRecord,
                (_, d) if d == self.delimiter => State::StartField,
                (_, _) => State::InField,
            };
            if term {
                // `\r\n` is one line break; a lone `\r` or `\n` is one too.
                if !(b == b'\n' && self.after_cr) {
                    self.line += 1;
                }
            }
            self.after_cr = b == b'\r';
        }
        if !found.is_empty() {
            self.starts
                .0
                .lock()
                .expect("record lines poisoned")
                .lines
                .extend(found);
        }
    }
}

/// The first line of each record of `text`.
pub(super) fn record_starts(text: &[u8], delimiter: u8) -> Vec<u64> {
    let (mut tracker, lines) = LineTracker::new(std::io::empty(), delimiter);
    tracker.scan(text);
    lines.claim(usize::MAX)
}

impl<R: Read> Read for LineTracker<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.scan(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn starts(text: &[u8], chunk: usize) -> Vec<u64> {
        let (mut t, lines) = LineTracker::new(text, b',');
        let mut buf = vec![0; chunk.max(1)];
        while t.read(&mut buf).unwrap() > 0 {}
        lines.claim(usize::MAX)
    }

    /// Records as csv-core (arrow-csv's parser) splits them: how many there are.
    fn csv_core_records(text: &[u8]) -> usize {
        let mut rdr = csv_core::Reader::new();
        let (mut out, mut ends) = (vec![0; text.len() + 1], vec![0; text.len() + 1]);
        let mut input = text;
        let mut records = 0;
        loop {
            let (res, nin, _, _) = rdr.read_record(input, &mut out, &mut ends);
            input = &input[nin..];
            match res {
                csv_core::ReadRecordResult::Record => records += 1,
                csv_core::ReadRecordResult::End => return records,
                csv_core::ReadRecordResult::InputEmpty => {}
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn blank_lines_and_quoted_breaks_are_counted() {
        let text = b"a,b\n\n1,x\r\n\r\n2,\"two\nlines\"\n3,\"say \"\"hi\"\"\"\r4,ab\"c\n\n";
        assert_eq!(starts(text, 1), [1, 3, 5, 7, 8]);
        assert_eq!(starts(text, 3), [1, 3, 5, 7, 8]);
        assert_eq!(csv_core_records(text), 5);
    }

    #[test]
    fn claimed_records_are_found_by_number_no_more() {
        let (mut t, lines) = LineTracker::new(&b"h\n\na\nb\n\n\nc"[..], b',');
        std::io::copy(&mut t, &mut std::io::sink()).unwrap();
        assert_eq!(lines.line_of(3), Some(4));
        assert_eq!(lines.claim(2), [1, 3]);
        assert_eq!(lines.line_of(2), None);
        assert_eq!(lines.line_of(4), Some(7));
        assert_eq!(lines.claim(5), [4, 7]);
    }

    proptest! {
        /// As many records as csv-core finds, whatever the bytes and however they are read.
        #[test]
        fn records_match_csv_core(
            text in proptest::collection::vec(
                prop_oneof![Just(b'a'), Just(b','), Just(b'"'), Just(b'\n'), Just(b'\r'), Just(b' ')],
                0..60,
            ),
            chunk in 1usize..8,
        ) {
            prop_assert_eq!(starts(&text, chunk).len(), csv_core_records(&text));
        }
    }
}
