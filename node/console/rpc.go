package console

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// bridged lists the services the RPC bridge reaches, and for each the
// methods it does not (the nodes' own plumbing); ClusterService offers
// Status only.
var bridged = map[string]func(method string) bool{
	pb.KeyService_ServiceDesc.ServiceName:        all,
	pb.ModelService_ServiceDesc.ServiceName:      all,
	pb.CredentialService_ServiceDesc.ServiceName: all,
	pb.TeamService_ServiceDesc.ServiceName:       all,
	pb.UserService_ServiceDesc.ServiceName:       all,
	pb.AuditService_ServiceDesc.ServiceName:      all,
	pb.McpService_ServiceDesc.ServiceName:        all,
	pb.SpendService_ServiceDesc.ServiceName:      func(m string) bool { return m != "NodeLogs" },
	pb.ClusterService_ServiceDesc.ServiceName:    func(m string) bool { return m == "Status" },
}

func all(string) bool { return true }

// bridgeMethod returns the unary method service/method the bridge may
// call, or nil.
func bridgeMethod(service, method string) protoreflect.MethodDescriptor {
	ok := bridged[service]
	if ok == nil || !ok(method) {
		return nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return nil
	}
	sd, isService := d.(protoreflect.ServiceDescriptor)
	if !isService {
		return nil
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil || md.IsStreamingClient() || md.IsStreamingServer() {
		return nil
	}
	return md
}

func newMessage(d protoreflect.MessageDescriptor) (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	if err != nil {
		return nil, err
	}
	return mt.New().Interface(), nil
}

// jsonOut is how every answer is written: snake_case names, every field.
var jsonOut = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// serveRPC calls one admin RPC as the session's user: the body is the
// request in protojson, the answer the response.
func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request, session string) {
	service, method := r.PathValue("service"), r.PathValue("method")
	md := bridgeMethod(service, method)
	if md == nil {
		writeError(w, codes.NotFound, fmt.Sprintf("no RPC %s/%s in the console API", service, method))
		return
	}
	req, err := newMessage(md.Input())
	if err != nil {
		writeError(w, codes.Internal, "internal error: "+err.Error())
		return
	}
	resp, err := newMessage(md.Output())
	if err != nil {
		writeError(w, codes.Internal, "internal error: "+err.Error())
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeStatus(w, err)
		return
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := protojson.Unmarshal(body, req); err != nil {
			writeError(w, codes.InvalidArgument, fmt.Sprintf("the body is not a %s in JSON: %v", md.Input().FullName(), err))
			return
		}
	}
	full := "/" + service + "/" + method
	if err := s.cfg.Admin.Invoke(adminCtx(r.Context(), session), full, req, resp); err != nil {
		writeStatus(w, err)
		return
	}
	b, err := jsonOut.Marshal(resp)
	if err != nil {
		writeError(w, codes.Internal, "internal error: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// serveSpendCSV answers a SpendReport as CSV.
func (s *Server) serveSpendCSV(w http.ResponseWriter, r *http.Request, session string) {
	q := r.URL.Query()
	req := &pb.SpendReportRequest{By: q.Get("by"), TeamId: q.Get("team_id"), KeyId: q.Get("key_id")}
	for name, p := range map[string]*int64{"since": &req.Since, "until": &req.Until} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				writeError(w, codes.InvalidArgument, name+" must be Unix seconds")
				return
			}
			*p = n
		}
	}
	rep, err := pb.NewSpendServiceClient(s.cfg.Admin).SpendReport(adminCtx(r.Context(), session), req)
	if err != nil {
		writeStatus(w, err)
		return
	}
	by := req.GetBy()
	if by == "" {
		by = "model"
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="tollgate-spend-by-`+by+`.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{by, "requests", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens",
		"cost_usd", "unpriced_requests"})
	for _, row := range append(rep.GetRows(), rep.GetTotal()) {
		if row == nil {
			continue
		}
		_ = cw.Write([]string{csvCell(row.GetGroup()), itoa(row.GetRequests()), itoa(row.GetPromptTokens()),
			itoa(row.GetCompletionTokens()), itoa(row.GetCachedTokens()), itoa(row.GetCacheWriteTokens()),
			dollars(row.GetCostNanos()), itoa(row.GetUnpricedRequests())})
	}
	cw.Flush()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// dollars formats nano-dollars as dollars with 6 decimals (rounded down
// to the micro-dollar).
func dollars(nanos int64) string {
	sign := ""
	if nanos < 0 {
		sign, nanos = "-", -nanos
	}
	return fmt.Sprintf("%s%d.%06d", sign, nanos/1e9, nanos%1e9/1e3)
}

// csvCell keeps a spreadsheet from reading a cell as a formula.
func csvCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
