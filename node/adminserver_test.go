package node

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// HTTP/2 frame types and flags (RFC 9113) the test writes and reads.
const (
	h2Data     = 0x0
	h2Headers  = 0x1
	h2Settings = 0x4
	h2Ping     = 0x6
	h2EndStrm  = 0x1
	h2EndHdrs  = 0x4
	h2Ack      = 0x1
)

func writeFrame(t *testing.T, w io.Writer, typ, flags byte, stream uint32, payload []byte) {
	t.Helper()
	h := make([]byte, 9, 9+len(payload))
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], stream)
	if _, err := w.Write(append(h, payload...)); err != nil {
		t.Fatalf("write frame: %v", err)
	}
}

// hpackLiteral encodes one header as a literal without indexing, not
// Huffman coded (RFC 7541 6.2.2): short names and values only.
func hpackLiteral(name, value string) []byte {
	b := []byte{0, byte(len(name))}
	b = append(b, name...)
	b = append(b, byte(len(value)))
	return append(b, value...)
}

// A unary admin call costs the server one read and one write of the
// connection, not more: the server sends no PING of its own to estimate
// the bandwidth-delay product (gRPC's dynamic window, which the fixed
// window turns off), whose ack it would then read as well.
func TestAdminServerSendsNoPingsOfItsOwnOnAUnaryCall(t *testing.T) {
	srv := grpc.NewServer(adminServerOptions()...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	writeFrame(t, conn, h2Settings, 0, 0, nil)
	var hdrs []byte
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Check"},
		{":authority", "tollgate"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		hdrs = append(hdrs, hpackLiteral(kv[0], kv[1])...)
	}
	for i := uint32(1); i <= 5; i += 2 { // three calls, each with a DATA frame
		writeFrame(t, conn, h2Headers, h2EndHdrs, i, hdrs)
		writeFrame(t, conn, h2Data, h2EndStrm, i, []byte{0, 0, 0, 0, 0}) // an empty HealthCheckRequest
	}

	r := bufio.NewReader(conn)
	done := 0
	for done < 3 {
		var h [9]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			t.Fatalf("read frame: %v (after %d answers)", err, done)
		}
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		if _, err := r.Discard(n); err != nil {
			t.Fatal(err)
		}
		typ, flags := h[3], h[4]
		switch {
		case typ == h2Settings && flags&h2Ack == 0:
			writeFrame(t, conn, h2Settings, h2Ack, 0, nil)
		case typ == h2Ping && flags&h2Ack == 0:
			t.Fatalf("the server sent a PING of its own (after %d answers): a BDP probe, one more write and read per call", done)
		case typ == h2Headers && flags&h2EndStrm != 0:
			done++
		}
	}
}
