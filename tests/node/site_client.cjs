// The official TypeScript MCP SDK 1.x (@modelcontextprotocol/sdk) against a site's MCP endpoint
// with a token the site issued: initialize with the elicitation capability and an
// Authorization header, call <tool> with no arguments, answer its elicitation/create with
// {"text": <answer>}, print what happened as one JSON line.
//
// Usage: node site_client.cjs <node_modules dir> <url> <authorization header> <tool> <answer>
// <node_modules dir> holds @modelcontextprotocol/sdk 1.x (tests/support/tsclient1.py installs
// it). Exit code 0 when the call completed without an error, else 1 (2 for bad arguments).
'use strict';

const path = require('node:path');
const { createRequire } = require('node:module');

const [modulesDir, url, authorization, tool, answer] = process.argv.slice(2);
if (!modulesDir || !url || !authorization || !tool || answer === undefined) {
    console.error('usage: node site_client.cjs <node_modules dir> <url> <authorization header> <tool> <answer>');
    process.exit(2);
}
const load = createRequire(path.join(path.resolve(modulesDir), 'resolver.cjs'));
const { Client } = load('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = load('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ElicitRequestSchema } = load('@modelcontextprotocol/sdk/types.js');

async function main() {
    const report = { protocolVersion: null, elicitations: [], tools: [], result: null };
    const client = new Client({ name: 'zemcp-site-ts-sdk1', version: '1.0' }, { capabilities: { elicitation: {} } });
    client.setRequestHandler(ElicitRequestSchema, async request => {
        report.elicitations.push(request.params.message);
        return { action: 'accept', content: { text: answer } };
    });
    const transport = new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: authorization } },
    });
    await client.connect(transport);
    report.protocolVersion = transport.protocolVersion ?? null;
    report.tools = (await client.listTools()).tools.map(t => t.name);
    report.result = await client.callTool({ name: tool, arguments: {} });
    await transport.terminateSession().catch(() => {});
    await client.close();
    return report;
}

main().then(
    report => {
        process.stdout.write(JSON.stringify(report) + '\n');
        process.exit(report.result && !report.result.isError ? 0 : 1);
    },
    error => {
        process.stdout.write(JSON.stringify({ error: String(error && error.stack ? error.stack : error) }) + '\n');
        process.exit(1);
    },
);
