// The official TypeScript MCP client (@modelcontextprotocol/client 2.x) against a zemcp server,
// pinned to the 2026-07-28 era: list the tools, call ze_execute without a command, answer the
// elicitation with {"command": "session show"}, print what happened as one JSON object.
//
// Usage: node modern_client.cjs <node_modules folder holding @modelcontextprotocol/client> <url>
// Run by tests/integration/test_http_modern_clients.py, which installs Node 22 and the package.
// Exit code 0 with the JSON on stdout; on any failure the error goes to stderr, exit code 1.
'use strict';

const path = require('node:path');
const { createRequire } = require('node:module');

const [modulesDir, url] = process.argv.slice(2);
if (!modulesDir || !url) {
    console.error('usage: node modern_client.cjs <node_modules dir> <url>');
    process.exit(2);
}
// Resolve the package from the install folder, not from this script's folder.
const load = createRequire(path.join(path.resolve(modulesDir), 'resolver.cjs'));
const { Client, StreamableHTTPClientTransport } = load('@modelcontextprotocol/client');
const fs = require('node:fs');
const clientVersion = JSON.parse(fs.readFileSync(
    path.join(path.resolve(modulesDir), '@modelcontextprotocol', 'client', 'package.json'), 'utf8')).version;

async function main() {
    const client = new Client(
        { name: 'zemcp-ts-check', version: '7.1' },
        {
            capabilities: { elicitation: {} },
            versionNegotiation: { mode: { pin: '2026-07-28' } },
        },
    );
    const elicitations = [];
    client.setRequestHandler('elicitation/create', async request => {
        elicitations.push(request.params);
        return { action: 'accept', content: { command: 'session show' } };
    });
    const transport = new StreamableHTTPClientTransport(new URL(url));
    await client.connect(transport, { timeout: 15000 });
    try {
        const era = client.getProtocolEra();
        const protocolVersion = client.getNegotiatedProtocolVersion();
        const discover = client.getDiscoverResult();
        const tools = await client.listTools(undefined, { timeout: 15000 });
        const result = await client.callTool({ name: 'ze_execute', arguments: {} }, { timeout: 15000 });
        process.stdout.write(JSON.stringify({
            sdkVersion: clientVersion,
            nodeVersion: process.version,
            era,
            protocolVersion,
            sessionId: transport.sessionId ?? null,
            discoverVersions: discover ? discover.supportedVersions : null,
            tools: tools.tools.map(tool => tool.name),
            elicitations,
            result,
        }) + '\n');
    } finally {
        await client.close();
    }
}

main().then(
    () => process.exit(0),
    error => {
        console.error(error && error.stack ? error.stack : String(error));
        process.exit(1);
    },
);
