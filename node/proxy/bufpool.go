package proxy

import (
	"math/bits"
	"sync"
)

// The gateway's byte buffers (request bodies, upstream requests, buffered
// answers) come from pools by size class, powers of two from 1 KiB to
// 1 MiB, and go back to the class their capacity fills: a body of 1 KB
// held while its upstream thinks holds 1 KiB, not the 8 KiB one pool for
// every size gave it, nor a 64 KiB buffer an earlier answer grew. Larger
// buffers are not kept.
const (
	minBufShift = 10 // 1 KiB
	maxBufShift = 20 // 1 MiB
	defaultBuf  = 8 << 10
)

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

type buffer struct{ b []byte }

// getBuf returns an empty buffer of at least 8 KiB, for bytes of a size
// not known beforehand.
func getBuf() *buffer { return getBufFor(defaultBuf) }

// getBufFor returns an empty buffer of at least n bytes; of 8 KiB when n
// is not above 0 (a size not known).
func getBufFor(n int) *buffer {
	if n <= 0 {
		n = defaultBuf
	}
	if n > 1<<maxBufShift {
		return &buffer{b: make([]byte, 0, n)}
	}
	k := max(bits.Len(uint(n-1)), minBufShift) - minBufShift // the class of 2^ceil(log2 n)
	if b, ok := bufPools[k].Get().(*buffer); ok {
		return b
	}
	return &buffer{b: make([]byte, 0, 1<<(k+minBufShift))}
}

// putBuf gives b back to the class its capacity fills.
func putBuf(b *buffer) {
	c := cap(b.b)
	if c < 1<<minBufShift || c > 1<<maxBufShift {
		return // let odd sizes go
	}
	b.b = b.b[:0]
	bufPools[bits.Len(uint(c))-1-minBufShift].Put(b)
}

// claimTrust is the most of a buffer a client's or an upstream's
// Content-Length alone sizes (bodyBuf, readBody): past it, buffers grow
// with the bytes that arrive.
const claimTrust = 1 << maxBufShift

// bodyBuf returns a buffer for a body of contentLength bytes (negative:
// not known): sized to it, with room for the read that meets its end, when
// it is within limit (a larger one is refused unread) and within the
// pooled classes. A Content-Length is a claim, not bytes: beyond the
// classes the buffer grows as the bytes arrive, so a peer that claims
// 60 MB and stalls does not hold 60 MB.
func bodyBuf(contentLength, limit int64) *buffer {
	if contentLength < 0 || contentLength > limit || contentLength >= claimTrust {
		return getBuf()
	}
	return getBufFor(int(contentLength) + 1)
}
