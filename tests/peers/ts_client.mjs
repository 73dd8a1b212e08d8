// The TypeScript SDK's client against `zuno mcp` over stdio: it validates structuredContent against
// each tool's outputSchema, on error results too. Prints one JSON object with what it saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [python, root] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: python,
  args: ["-m", "zuno", "mcp", "--root", root],
  env: process.env,
  stderr: "inherit",
});
const client = new Client({ name: "zuno-ts-test", version: "1.0.0" });
await client.connect(transport);
const tools = (await client.listTools()).tools;
const out = { tools: tools.map((t) => ({ name: t.name, annotations: t.annotations })), calls: {} };
const calls = {
  ok: ["read", { path: "a.txt" }],
  error: ["read", { path: "missing.txt" }],
  blocked: ["read", { nope: 1 }],
  unavailable: ["no_such_tool", {}],
  write: ["write", { path: "b.txt", content: "beta\n" }],
};
for (const [key, [name, args]] of Object.entries(calls)) {
  try {
    const r = await client.callTool({ name, arguments: args });
    out.calls[key] = { isError: r.isError ?? false, outcome: r.structuredContent?.outcome, text: r.content[0]?.text };
  } catch (e) {
    out.calls[key] = { thrown: String(e) };
  }
}
await client.close();
console.log(JSON.stringify(out));
