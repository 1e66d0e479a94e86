// The official TypeScript MCP client (@modelcontextprotocol/sdk) against a
// Tollgate node's /mcp (e2e/mcp_test.go). It prints one JSON object with
// what it saw; the Go test judges it.
//
// Environment: MCP_URL, MCP_KEY; CALLS: comma-separated steps among
// list, echo, sum, stdio, progress, cancel, refused.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const out = {};
const client = new Client({ name: "tollgate-e2e", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_KEY}` } },
});
await client.connect(transport);
out.protocol = transport.protocolVersion ?? "";
const text = (r) => r.content.map((c) => c.text ?? "").join("");
const errText = (e) => `${e.code ?? e.name}: ${e.message}`;
const long = "everything__trigger-long-running-operation";

for (const step of (process.env.CALLS ?? "").split(",").filter(Boolean)) {
  try {
    switch (step) {
      case "list":
        out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
        break;
      case "echo":
        out.echo = text(await client.callTool({ name: "everything__echo", arguments: { message: "hello" } }));
        break;
      case "sum":
        out.sum = text(await client.callTool({ name: "everything__get-sum", arguments: { a: 2, b: 3 } }));
        break;
      case "stdio":
        out.stdio = text(await client.callTool({ name: "evstdio__echo", arguments: { message: "via stdio" } }));
        break;
      case "progress": {
        const seen = [];
        const r = await client.callTool({ name: long, arguments: { duration: 0.6, steps: 3 } }, undefined, {
          onprogress: (p) => seen.push(p.progress),
          timeout: 30000,
        });
        out.progress = seen;
        out.long = text(r);
        break;
      }
      case "cancel": {
        const ac = new AbortController();
        const started = Date.now();
        const call = client.callTool({ name: long, arguments: { duration: 20, steps: 20 } }, undefined, {
          signal: ac.signal,
          onprogress: () => ac.abort("the test cancels"),
          timeout: 30000,
        });
        try {
          await call;
          out.cancel = "completed";
        } catch (e) {
          out.cancel = `aborted after ${Date.now() - started} ms: ${errText(e)}`;
        }
        // The SDK sends notifications/cancelled without waiting for it:
        // give it a moment before the next step or close.
        await new Promise((r) => setTimeout(r, 500));
        break;
      }
      case "refused":
        try {
          await client.callTool({ name: "everything__get-sum", arguments: { a: 1, b: 1 } });
          out.refused = "allowed";
        } catch (e) {
          out.refused = errText(e);
        }
        break;
      default:
        throw new Error(`unknown step ${step}`);
    }
  } catch (e) {
    out[step] = `error: ${errText(e)}`;
  }
}
await client.close();
console.log(JSON.stringify(out));
