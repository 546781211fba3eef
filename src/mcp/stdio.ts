import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpServer, type McpDeps } from './server';

/**
 * Serves MCP over stdin/stdout as the management principal (a local process that opened the data
 * directory may act for any key; every tool then needs `apiKeyId`). Resolves when the client
 * closes stdin (or `stop` is called), after which the caller closes its services.
 */
export async function serveStdio(deps: McpDeps): Promise<{ server: McpServer; closed: Promise<void> }> {
  const server = createMcpServer(deps, { kind: 'management' });
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    process.stdin.once('end', () => resolve());
    process.stdin.once('close', () => resolve());
  });
  process.stdin.on('error', () => undefined);
  process.stdout.on('error', () => undefined);
  await server.connect(transport);
  return { server, closed };
}
