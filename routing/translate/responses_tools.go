package translate

// The tools of a Responses request on a translated route.
//
// Namespace tools ({"type":"namespace","name":NS,"tools":[function tools]},
// as Codex declares its multi_agent_v1 tools) are flattened: each function
// inside becomes a function tool named NS + "__" + NAME, its description
// preceded by the namespace's. A call the model makes to a flattened tool
// goes back to the client under its own name with "namespace": NS, in
// answers and in streams; a function_call input item with a namespace
// (the client replaying such a call) is flattened the same way, and so is
// a tool_choice naming a function of a namespace. A flattened name that
// clashes with another tool's is refused.
//
// Hosted tools, which the Responses API runs itself and a chat upstream
// cannot (web_search and its dated variants, file_search,
// code_interpreter, image_generation, mcp, tool_search), are left out of
// the upstream request: an agent declares them by default and works
// without them. The proxy names them in the x-tollgate-dropped-tools
// header. A tool_choice that forces one, and tools the client runs in a
// shape chat has no place for (custom, local_shell, computer_use_preview,
// apply_patch, shell), are still refused: losing them would change what
// the answer means.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// NamespacedName is a function of a Responses namespace tool.
type NamespacedName struct {
	Namespace, Name string
}

// respNamespaceSep joins a namespace and a function name into the name of
// the flattened function tool.
const respNamespaceSep = "__"

// respFlatName is the name a namespaced function goes upstream with.
func respFlatName(namespace, name string) string {
	return namespace + respNamespaceSep + name
}

// respHostedTool reports whether a tool type is one the Responses API
// runs itself, so that a chat upstream can do without it.
func respHostedTool(typ string) bool {
	switch {
	case strings.HasPrefix(typ, "web_search"):
		return true
	}
	switch typ {
	case "file_search", "code_interpreter", "image_generation", "mcp", "tool_search":
		return true
	}
	return false
}

// respNamespaceTool is a namespace entry of "tools".
type respNamespaceTool struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Tools       []json.RawMessage `json:"tools"`
}

// respDecodeTools reads "tools": function tools, namespaces of function
// tools (flattened, see the file comment), and hosted tools (left out, and
// named in req.DroppedTools). It sets req.Tools and req.ToolNamespaces.
func respDecodeTools(raws []json.RawMessage, req *ChatRequest) error {
	seen := map[string]bool{}
	add := func(param string, t responsesTool, ns *respNamespaceTool) error {
		if t.Type != "function" {
			return Invalid(param+".type", "Tools of type %q are not supported by this gateway: it offers function tools (type 'function') only.", t.Type)
		}
		if t.Name == "" {
			return Invalid(param+".name", "'name' is required for a function tool.")
		}
		name, desc := t.Name, t.Description
		if ns != nil {
			name = respFlatName(ns.Name, t.Name)
			if ns.Description != "" {
				desc = strings.TrimSpace(ns.Description + "\n\n" + desc)
			}
			if req.ToolNamespaces == nil {
				req.ToolNamespaces = map[string]NamespacedName{}
			}
			req.ToolNamespaces[name] = NamespacedName{ns.Name, t.Name}
		}
		if seen[name] {
			return Invalid(param+".name", "The tool name %q is used twice (a namespace's function goes upstream as NAMESPACE__NAME).", name)
		}
		seen[name] = true
		var params json.RawMessage
		if !respIsNull(t.Parameters) {
			params = t.Parameters
		}
		req.Tools = append(req.Tools, Tool{Type: "function", Function: FunctionDecl{
			Name: name, Description: desc, Parameters: params, Strict: t.Strict,
		}})
		return nil
	}
	for i, raw := range raws {
		param := fmt.Sprintf("tools[%d]", i)
		var t responsesTool
		if err := respUnmarshal(raw, param, &t); err != nil {
			return err
		}
		switch {
		case t.Type == "namespace":
			var ns respNamespaceTool
			if err := respUnmarshal(raw, param, &ns); err != nil {
				return err
			}
			if ns.Name == "" {
				return Invalid(param+".name", "'name' is required for a namespace tool.")
			}
			for j, inner := range ns.Tools {
				ip := fmt.Sprintf("%s.tools[%d]", param, j)
				var it responsesTool
				if err := respUnmarshal(inner, ip, &it); err != nil {
					return err
				}
				if err := add(ip, it, &ns); err != nil {
					return err
				}
			}
		case respHostedTool(t.Type):
			if !slices.Contains(req.DroppedTools, t.Type) {
				req.DroppedTools = append(req.DroppedTools, t.Type)
			}
		default:
			if err := add(param, t, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// callName returns the name and namespace a call of the upstream's goes
// back to the client with.
func (e *responsesEcho) callName(upstream string) (name, namespace string) {
	if n, ok := e.namespaces[upstream]; ok {
		return n.Name, n.Namespace
	}
	return upstream, ""
}
