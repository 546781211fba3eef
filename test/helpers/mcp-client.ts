import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CLI } from './processes';

/** The official MCP client over streamable HTTP, with a bearer token (or none). */
export async function httpMcpClient(url: string, token: string | null): Promise<Client> {
  const client = new Client({ name: 'engram-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: token ? { headers: { authorization: `Bearer ${token}` } } : undefined });
  await client.connect(transport);
  return client;
}

/** The official MCP client over stdio to a spawned `engram mcp` (the built CLI). */
export async function stdioMcpClient(env: NodeJS.ProcessEnv): Promise<{ client: Client; stderr: () => string }> {
  const client = new Client({ name: 'engram-test', version: '1.0.0' });
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp'], env: env as Record<string, string>, stderr: 'pipe' });
  let err = '';
  transport.stderr?.on('data', (d) => (err += String(d)));
  await client.connect(transport);
  return { client, stderr: () => err };
}

/** A tool's text result parsed as the pretty-printed JSON it is, plus whether it is an error. */
export async function callTool(client: Client, name: string, args: Record<string, unknown>): Promise<{ isError: boolean; text: string; json: unknown }> {
  const r = (await client.callTool({ name, arguments: args })) as { isError?: boolean; content: { type: string; text: string }[] };
  const text = r.content[0]?.text ?? '';
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { isError: r.isError === true, text, json };
}
