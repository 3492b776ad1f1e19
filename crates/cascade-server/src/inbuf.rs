//! A connection's input buffer: the bytes received and not yet dropped, followed by
//! room that reads land in.
//!
//! Why not a plain `Vec<u8>` resized before each read: safe code must initialize the
//! room a read writes into, and zero-filling a 16 KiB chunk before every `read` (twice
//! per request: the read that returns the request and the one that says `WouldBlock`)
//! was the largest user-space cost of a worker on `redis-benchmark -P 1` (4.5 % of the
//! server's CPU samples, docs/benchmarks.md session 12). Here the room is zeroed once,
//! when the buffer grows, and reused: bytes past the end are stale but initialized.
//!
//! Invariant: `end <= buf.len()`; `buf[..end]` is the received input. Owned by one
//! connection on one worker thread; no sharing.

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct InBuf {
    /// Initialized bytes: the input, then room.
    buf: Vec<u8>,
    /// Where the input ends.
    end: usize,
}

impl InBuf {
    /// Bytes received.
    pub(crate) fn len(&self) -> usize {
        self.end
    }

    /// Bytes allocated (CLIENT LIST `qbuf-free` counts from this).
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The input.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[..self.end]
    }

    /// Room already allocated after the input.
    pub(crate) fn spare(&self) -> usize {
        self.buf.capacity() - self.end
    }

    /// `want` bytes of room after the input for a read to fill (zeroed only where the
    /// buffer grows); [`InBuf::filled`] then adds what the read returned.
    pub(crate) fn room(&mut self, want: usize) -> &mut [u8] {
        let need = self.end + want;
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        &mut self.buf[self.end..need]
    }

    /// A read put `n` bytes into the room.
    pub(crate) fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Drops the first `n` bytes of input (parsed ones).
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.end);
        self.buf.copy_within(n..self.end, 0);
        self.end -= n;
    }

    /// Drops all input, keeping the room.
    pub(crate) fn clear(&mut self) {
        self.end = 0;
    }

    /// Drops all input and gives back memory beyond `cap` bytes.
    pub(crate) fn clear_and_shrink(&mut self, cap: usize) {
        self.end = 0;
        self.buf.truncate(cap);
        self.buf.shrink_to(cap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_into(b: &mut InBuf, data: &[u8], want: usize) {
        let room = b.room(want);
        let n = data.len().min(room.len());
        room[..n].copy_from_slice(&data[..n]);
        b.filled(n);
    }

    #[test]
    fn input_survives_reads_consumes_and_reuse_of_stale_room() {
        let mut b = InBuf::default();
        read_into(&mut b, b"hello ", 16);
        read_into(&mut b, b"world", 16);
        assert_eq!(b.bytes(), b"hello world");
        assert!(b.spare() >= 16 - 11 && b.capacity() >= 22);
        b.consume(6);
        assert_eq!(b.bytes(), b"world");
        // The room after the input holds stale bytes; a read overwrites what it fills.
        read_into(&mut b, b"!", 4);
        assert_eq!(b.bytes(), b"world!");
        b.clear();
        assert_eq!(b.len(), 0);
        read_into(&mut b, b"again", 8);
        assert_eq!(b.bytes(), b"again");
        b.consume(100);
        assert_eq!(b.bytes(), b"");
        read_into(&mut b, &[7u8; 40], 64);
        assert_eq!(b.len(), 40);
        b.clear_and_shrink(8);
        assert_eq!(b.len(), 0);
        assert!(b.capacity() >= 8);
        read_into(&mut b, b"xyz", 4);
        assert_eq!(b.bytes(), b"xyz");
    }
}
