package raftstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Snapshot formats a member reads. Every release reads
// SingleMessageSnapshotFormat (the whole state as one pb.Snapshot);
// releases from the one that began to advertise their command types in
// gossip on also read StreamedSnapshotFormat, which this release writes.
const (
	SingleMessageSnapshotFormat = 1
	StreamedSnapshotFormat      = snapshotFormat
)

// SetPeerSnapshotFormat sets a function that returns the newest snapshot
// format every other member reads. While it returns less than
// StreamedSnapshotFormat, a snapshot opened from this node's store — to
// send to a follower that needs one, or to restore it here — is rewritten
// on the fly into the single-message form. Nil (the default): snapshots
// go as they were written.
func (s *Store) SetPeerSnapshotFormat(f func() int) { s.snaps.peerFormat.Store(&f) }

// formatSnapshots is the Raft snapshot store with the rewriting of
// SetPeerSnapshotFormat. Raft opens snapshots only to send them and to
// restore them; both take either form here.
type formatSnapshots struct {
	raft.SnapshotStore
	peerFormat atomic.Pointer[func() int]
}

func (s *formatSnapshots) singleMessage() bool {
	f := s.peerFormat.Load()
	return f != nil && *f != nil && (*f)() < StreamedSnapshotFormat
}

// Open opens snapshot id, rewritten into a single message when some
// member reads nothing newer.
func (s *formatSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil || !s.singleMessage() {
		return meta, rc, err
	}
	br := bufio.NewReaderSize(rc, 64<<10)
	if head, _ := br.Peek(len(snapshotMagic)); string(head) != snapshotMagic {
		return meta, readCloser{br, rc}, nil // already one message
	}
	_, _ = br.Discard(len(snapshotMagic))
	size, err := singleMessageSize(br)
	_ = rc.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	// The size goes ahead of the bytes, so the stream is read twice.
	meta, rc, err = s.SnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	br = bufio.NewReaderSize(rc, 64<<10)
	if _, err := br.Discard(len(snapshotMagic)); err != nil {
		_ = rc.Close()
		return nil, nil, fmt.Errorf("snapshot %s: %w", id, noEOF(err))
	}
	m := *meta
	m.Size = size
	return &m, readCloser{&singleMessageReader{r: br}, rc}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// A streamed snapshot's parts are pb.Snapshot messages, and protobuf
// parses concatenated messages as their merge, which is what Restore
// makes of the parts: so the parts' bytes, without the record framing,
// followed by a message holding the header's index, are the same state
// as one pb.Snapshot. No record is held in memory.

// indexTrailer is the encoded pb.Snapshot{Index: index}.
func indexTrailer(index uint64) []byte {
	b, _ := proto.Marshal(&pb.Snapshot{Index: index})
	return b
}

// recordHead reads a record's kind and length (not its bytes).
func recordHead(r *bufio.Reader) (byte, uint64, error) {
	kind, err := r.ReadByte()
	if err != nil {
		return 0, 0, noEOF(err)
	}
	size, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, 0, noEOF(err)
	}
	if size > maxRecordBytes {
		return 0, 0, fmt.Errorf("record of %d bytes: %w", size, ErrInvalid)
	}
	return kind, size, nil
}

// headerIndex reads a header record of size bytes and returns its index.
func headerIndex(r *bufio.Reader, size uint64) (uint64, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return 0, noEOF(err)
	}
	return decodeHeader(data)
}

// singleMessageSize reads a streamed snapshot (after its magic) to its
// end record and returns the size of its single-message form.
func singleMessageSize(r *bufio.Reader) (int64, error) {
	var total int64
	for n := 0; ; n++ {
		kind, size, err := recordHead(r)
		if err != nil {
			return 0, fmt.Errorf("read snapshot record %d: %w", n, err)
		}
		switch {
		case n == 0 && kind == recordHeader:
			idx, err := headerIndex(r, size)
			if err != nil {
				return 0, err
			}
			total += int64(len(indexTrailer(idx)))
		case n > 0 && kind == recordPart:
			if _, err := r.Discard(int(size)); err != nil {
				return 0, fmt.Errorf("read snapshot record %d: %w", n, noEOF(err))
			}
			total += int64(size)
		case n > 0 && kind == recordEnd:
			return total, nil
		default:
			return 0, fmt.Errorf("snapshot record %d has kind %q: %w", n, kind, ErrInvalid)
		}
	}
}

// singleMessageReader reads a streamed snapshot (after its magic) as its
// single-message form: each part's bytes, then the index.
type singleMessageReader struct {
	r     *bufio.Reader
	cur   io.Reader // what is left of the current part, or the trailer
	n     int       // records read
	index uint64
	done  bool
}

func (s *singleMessageReader) Read(p []byte) (int, error) {
	for {
		if s.cur != nil {
			n, err := s.cur.Read(p)
			if n > 0 || !errors.Is(err, io.EOF) {
				return n, err
			}
			s.cur = nil
		}
		if s.done {
			return 0, io.EOF
		}
		if err := s.next(); err != nil {
			return 0, err
		}
	}
}

// next reads the next record's head and sets what to read from it.
func (s *singleMessageReader) next() error {
	kind, size, err := recordHead(s.r)
	if err != nil {
		return fmt.Errorf("read snapshot record %d: %w", s.n, err)
	}
	n := s.n
	s.n++
	switch {
	case n == 0 && kind == recordHeader:
		s.index, err = headerIndex(s.r, size)
		return err
	case n > 0 && kind == recordPart:
		s.cur = &exactReader{r: s.r, left: int64(size)}
	case n > 0 && kind == recordEnd:
		s.cur, s.done = bytes.NewReader(indexTrailer(s.index)), true
	default:
		return fmt.Errorf("snapshot record %d has kind %q: %w", n, kind, ErrInvalid)
	}
	return nil
}

// exactReader reads left bytes of r; a stream that ends sooner is
// truncated.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if errors.Is(err, io.EOF) && e.left > 0 {
		err = io.ErrUnexpectedEOF
	} else if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}
