package raftstore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// The audit log: every command that carries an Actor (an admin write)
// leaves one AuditRecord, written by the state machine itself, so every
// replica holds the same records at the same index. Records are never
// changed; they expire by age and by count, both counted on the commands'
// own times, so every replica forgets the same ones at the same entry.
var (
	// AuditMaxAge is how long a record is kept.
	AuditMaxAge = 90 * 24 * time.Hour
	// auditMaxRecords bounds the log's length (a variable for tests).
	auditMaxRecords = 50_000
)

const (
	// auditPruneStep bounds the records one entry forgets.
	auditPruneStep = 8
	// auditSummaryMax bounds a record's summary (an import of thousands
	// of keys is summarised, not copied).
	auditSummaryMax = 1024
)

func auditLess(a, b *pb.AuditRecord) bool { return a.GetIndex() < b.GetIndex() }

// appendAudit records cmd, applied at index with result res, in s, which
// must not be published yet, and forgets the records beyond the bounds.
func (s *State) appendAudit(index uint64, cmd *pb.Command, res *applyResult) {
	a := cmd.GetActor()
	rec := &pb.AuditRecord{
		Index: index, Time: timestamppb.New(timeOf(cmd.GetUnixNanos())),
		User: a.GetUser(), Role: a.GetRole(), Address: a.GetAddress(), Rpc: a.GetRpc(),
		Command: CommandName(cmd), Summary: summarizeCommand(cmd),
	}
	if res.err != nil {
		rec.Error = res.err.Error()
	}
	t := s.audit.txn()
	t.put(rec)
	oldest := cmd.GetUnixNanos() - AuditMaxAge.Nanoseconds()
	for range auditPruneStep {
		first, ok := t.min()
		if !ok || (t.Len() <= auditMaxRecords && first.GetTime().AsTime().UnixNano() >= oldest) {
			break
		}
		t.delete(first)
	}
	s.audit = t.commit()
}

// AuditFilter selects audit records.
type AuditFilter struct {
	// User: only this user's records; empty for all.
	User string
	// Since and Until bound the records' times (Unix seconds); zero for
	// no bound.
	Since, Until int64
	// Limit: at most this many records.
	Limit int
}

// AuditRecords returns the records f selects, newest first. The records
// must not be modified.
func (s *State) AuditRecords(f AuditFilter) []*pb.AuditRecord {
	var out []*pb.AuditRecord
	if s.audit.t == nil || f.Limit <= 0 {
		return out
	}
	s.audit.t.Descend(func(r *pb.AuditRecord) bool {
		sec := r.GetTime().GetSeconds()
		if f.Since != 0 && sec < f.Since {
			return false // older ones follow
		}
		if (f.Until == 0 || sec <= f.Until) && (f.User == "" || r.GetUser() == f.User) {
			out = append(out, r)
		}
		return len(out) < f.Limit
	})
	return out
}

// AuditCount returns how many audit records the state holds.
func (s *State) AuditCount() int { return s.audit.Len() }

// summarizeCommand describes what cmd changes, deterministically (the
// same text on every replica and release: no protojson, whose spacing
// varies), leaving out every secret: bytes fields (secret and token
// hashes, seeds) and fields that hold a secret or credential value.
func summarizeCommand(cmd *pb.Command) string {
	if r, ok := cmd.GetOp().(*pb.Command_Restore); ok {
		snap := r.Restore.GetSnapshot()
		return fmt.Sprintf("snapshot of index %d: %d keys, %d routes, %d credentials, %d teams, %d users",
			snap.GetIndex(), len(snap.GetKeys()), len(snap.GetRoutes()), len(snap.GetCredentials()),
			len(snap.GetTeams()), len(snap.GetUsers()))
	}
	fd := cmd.ProtoReflect().WhichOneof(commandOneof)
	if fd == nil {
		return ""
	}
	var b strings.Builder
	writeMessage(&b, cmd.ProtoReflect().Get(fd).Message())
	s := b.String()
	if len(s) > auditSummaryMax {
		n := auditSummaryMax
		for n > 0 && !utf8.RuneStart(s[n]) { // a proto string must stay valid UTF-8
			n--
		}
		s = s[:n] + fmt.Sprintf("… (%d more bytes)", len(s)-n)
	}
	return s
}

// redactedField reports whether a field may hold a secret: every bytes
// field, and fields whose name says secret, token, password or value
// (a credential's), except the display prefixes the API shows anyway.
func redactedField(fd protoreflect.FieldDescriptor) bool {
	if fd.Kind() == protoreflect.BytesKind {
		return true
	}
	name := string(fd.Name())
	if strings.HasSuffix(name, "_prefix") {
		return false
	}
	for _, w := range []string{"secret", "token", "password", "value", "reseal_of"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

func writeMessage(b *strings.Builder, m protoreflect.Message) {
	if ts, ok := m.Interface().(*timestamppb.Timestamp); ok {
		b.WriteString(ts.AsTime().UTC().Format(time.RFC3339Nano))
		return
	}
	b.WriteByte('{')
	fields := m.Descriptor().Fields()
	first := true
	for i := range fields.Len() { // field declaration order: deterministic
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		if !first {
			b.WriteByte(' ')
		}
		first = false
		b.WriteString(string(fd.Name()))
		b.WriteByte(':')
		if redactedField(fd) {
			b.WriteString("[redacted]")
			continue
		}
		writeField(b, fd, m.Get(fd))
	}
	b.WriteByte('}')
}

func writeField(b *strings.Builder, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch {
	case fd.IsList():
		l := v.List()
		b.WriteByte('[')
		for i := range l.Len() {
			if i > 0 {
				b.WriteByte(' ')
			}
			writeScalar(b, fd, l.Get(i))
		}
		b.WriteByte(']')
	case fd.IsMap():
		mp := v.Map()
		var keys []protoreflect.MapKey
		mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys = append(keys, k)
			return true
		})
		slices.SortFunc(keys, func(a, b protoreflect.MapKey) int { return strings.Compare(a.String(), b.String()) })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.Quote(k.String()) + ":")
			writeScalar(b, fd.MapValue(), mp.Get(k))
		}
		b.WriteByte('}')
	default:
		writeScalar(b, fd, v)
	}
}

func writeScalar(b *strings.Builder, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		writeMessage(b, v.Message())
	case protoreflect.StringKind:
		b.WriteString(strconv.Quote(v.String()))
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			b.WriteString(string(ev.Name()))
		} else {
			b.WriteString(strconv.Itoa(int(v.Enum())))
		}
	default:
		b.WriteString(v.String())
	}
}

// auditCommand is a command type of the release that brought the audit
// log: a leader stamps actors (and so writes audit records) only once
// every member applies it.
const auditCommand = "create_user"
