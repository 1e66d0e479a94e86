package proxy

import "testing"

// A buffer asked for n bytes holds n and less than twice n (1 KiB at
// least); a buffer grown past its class goes back to the class it fills, so
// a 1 KB body never gets the 64 KiB an answer grew; a request body is sized
// by its Content-Length within the limit, and a Content-Length over the
// limit (refused unread) allocates nothing for it.
func TestBuffersComeSizedAndGoBackToTheirClass(t *testing.T) {
	for _, n := range []int{1, 1000, 1024, 1025, 8 << 10, 100_000, 1 << 20, 1<<20 + 1} {
		b := getBufFor(n)
		if c := cap(b.b); c < n || c >= 2*max(n, 1<<10) || len(b.b) != 0 {
			t.Errorf("getBufFor(%d): len %d, cap %d", n, len(b.b), c)
		}
		putBuf(b)
	}
	if c := cap(getBuf().b); c != 8<<10 {
		t.Errorf("getBuf: cap %d, want 8 KiB", c)
	}
	grown := getBufFor(1000)
	grown.b = append(grown.b, make([]byte, 64<<10)...)
	putBuf(grown)
	for range 10 {
		if c := cap(getBufFor(1001).b); c != 1<<10 {
			t.Fatalf("getBufFor(1001) after a grown buffer went back: cap %d, want 1 KiB", c)
		}
	}
	for _, tc := range []struct{ contentLength, limit int64 }{{-1, 8 << 20}, {1 << 40, 8 << 20}, {9 << 20, 8 << 20}} {
		if c := cap(bodyBuf(tc.contentLength, tc.limit).b); c != 8<<10 {
			t.Errorf("bodyBuf(%d, %d): cap %d, want the 8 KiB of a size not known", tc.contentLength, tc.limit, c)
		}
	}
	if c := cap(bodyBuf(1000, 8<<20).b); c != 1<<10 {
		t.Errorf("bodyBuf(1000): cap %d, want 1 KiB", c)
	}
}
