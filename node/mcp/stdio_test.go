package mcp

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// stdioServerEnv makes the test binary an MCP server on its stdin and
// stdout, with a tool "pid" that returns its process id.
const stdioServerEnv = "TOLLGATE_TEST_STDIO_MCP"

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) == "1" {
		s := sdk.NewServer(&sdk.Implementation{Name: "stdio-test", Version: "1"}, nil)
		s.AddTool(&sdk.Tool{Name: "pid", InputSchema: objectSchema},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil
			})
		_ = s.Run(context.Background(), &sdk.StdioTransport{})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A stdio server runs as a child of the node, with the configured
// environment; when it exits, the node starts it again after the cooldown.
func TestStdioServerRestartedWhenItExits(t *testing.T) {
	e := newEnv(t, nil)
	e.apply(&pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{Server: &pb.McpServer{
		Name: "local", Transport: "stdio", Command: []string{os.Args[0], "-test.run=^$"}, Env: map[string]string{stdioServerEnv: "1"}}}}})
	e.waitState("local", stateConnected)
	cs := e.connect("/mcp", e.addKey("k1", []string{"local__*"}, nil), "", nil)
	pid := func() int { // 0 when the call fails
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "local__pid"})
		if err != nil {
			return 0
		}
		n, _ := strconv.Atoi(res.Content[0].(*sdk.TextContent).Text)
		return n
	}
	first := pid()
	if first <= 0 || first == os.Getpid() {
		t.Fatalf("pid %d", first)
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st := e.gw.Status("local"); st.GetState() == stateConnected {
			if second := pid(); second != 0 && second != first {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stdio server was not restarted: %v", e.gw.Status("local"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
