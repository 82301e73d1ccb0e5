// The official TypeScript MCP SDK 1.x (@modelcontextprotocol/sdk) against a zemcp server, in
// the handshake era: initialize with the elicitation capability, then call ze_execute without
// a command <calls> times, <concurrency> at a time, in that one session; every elicitation/create
// is answered with {"command": "session show"}, and every result must be that command's output
// for this client's session. Every HTTP request goes on a TCP connection of its own (undici
// with keep-alive off), so with several workers behind one socket the kernel spreads a
// session's requests, and an elicitation's answer, over the workers.
//
// Usage: node legacy_client.cjs <node_modules dir> <url> <calls> <concurrency> <timeout seconds>
// <node_modules dir> holds @modelcontextprotocol/sdk 1.x and undici (tests/support/tsclient1.py
// installs them). Prints one JSON line, the summary (see `summary` below); exit code 0 when
// every call succeeded and no connection carried two requests, else 1 (2 for bad arguments).
// The whole run is bounded by <timeout seconds>: at the deadline the summary is printed with
// what was done and the process exits 1.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { createRequire } = require('node:module');

const [modulesDir, url, callsArg, concurrencyArg, timeoutArg] = process.argv.slice(2);
const calls = Number(callsArg);
const concurrency = Number(concurrencyArg);
const timeoutSeconds = Number(timeoutArg);
if (!modulesDir || !url || !(calls >= 1) || !(concurrency >= 1) || !(timeoutSeconds > 0)) {
    console.error('usage: node legacy_client.cjs <node_modules dir> <url> <calls> <concurrency> <timeout seconds>');
    process.exit(2);
}
// Resolve the packages from the install folder, not from this script's folder.
const load = createRequire(path.join(path.resolve(modulesDir), 'resolver.cjs'));
const { Client } = load('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = load('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ElicitRequestSchema } = load('@modelcontextprotocol/sdk/types.js');
const undici = load('undici');
const sdkVersion = JSON.parse(fs.readFileSync(
    path.join(path.resolve(modulesDir), '@modelcontextprotocol', 'sdk', 'package.json'), 'utf8')).version;

const CLIENT_NAME = 'zemcp-ts-sdk1';
const CLIENT_VERSION = '1.0';
const started = Date.now();
// [milliseconds] left until the global deadline, for the SDK's per-request timeouts.
const remaining = () => Math.max(1, timeoutSeconds * 1000 - (Date.now() - started));

const summary = {
    sdkVersion,
    nodeVersion: process.version,
    protocolVersion: null,
    sessionId: null,
    calls,
    concurrency,
    ok: 0,
    failures: [],
    elicitations: 0,
    // What the SDK reported through Client.onerror while the calls ran (a refused standalone
    // GET stream, for one), as {message}; its errors after the calls (the DELETE) are not kept.
    transportErrors: [],
    requests: 0,
    connections: 0,
    seconds: 0,
};

function finish(code) {
    summary.seconds = (Date.now() - started) / 1000;
    process.stdout.write(JSON.stringify(summary) + '\n');
    process.exit(code);
}

// pipelining 0 turns keep-alive off: undici closes each connection after its one response,
// and the next request dials again. The connector counts the dials, so the summary shows
// that connections and requests are one to one.
const connect = undici.buildConnector({});
const agent = new undici.Agent({
    pipelining: 0,
    connect(options, callback) {
        summary.connections += 1;
        return connect(options, callback);
    },
});
function newConnectionFetch(input, init) {
    summary.requests += 1;
    return undici.fetch(input, { ...init, dispatcher: agent });
}

function checkResult(result, protocolVersion) {
    const text = (result.content || []).filter(c => c.type === 'text').map(c => c.text).join('\n');
    const expected = [
        `client: ${CLIENT_NAME} ${CLIENT_VERSION}`,
        `protocol version: ${protocolVersion}`,
        'elicitation: yes',
        'age: ',
    ];
    const missing = expected.filter(line => !text.includes(line));
    if (result.isError || missing.length) {
        throw new Error(`not the session show output of this session (missing ${JSON.stringify(missing)}): ${text}`);
    }
}

async function main() {
    const client = new Client(
        { name: CLIENT_NAME, version: CLIENT_VERSION },
        { capabilities: { elicitation: {} } },
    );
    let callsDone = false;
    client.onerror = error => {
        if (!callsDone) {
            summary.transportErrors.push({ message: String(error && error.message ? error.message : error) });
        }
    };
    client.setRequestHandler(ElicitRequestSchema, async () => {
        summary.elicitations += 1;
        return { action: 'accept', content: { command: 'session show' } };
    });
    const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: newConnectionFetch });
    await client.connect(transport, { timeout: remaining() });
    summary.protocolVersion = transport.protocolVersion ?? null;
    summary.sessionId = transport.sessionId ?? null;
    let next = 0;
    async function worker() {
        while (next < calls) {
            const call = next++;
            try {
                const result = await client.callTool({ name: 'ze_execute', arguments: {} }, undefined, { timeout: remaining() });
                checkResult(result, summary.protocolVersion);
                summary.ok += 1;
            } catch (error) {
                summary.failures.push({ call, message: String(error && error.message ? error.message : error) });
            }
        }
    }
    try {
        await Promise.all(Array.from({ length: Math.min(concurrency, calls) }, worker));
    } finally {
        callsDone = true;
        // DELETE the session, then drop the standalone GET stream.
        await transport.terminateSession().catch(error => {
            summary.failures.push({ call: null, message: `DELETE of the session: ${error.message}` });
        });
        await client.close();
    }
    if (summary.elicitations !== calls) {
        summary.failures.push({ call: null, message: `${summary.elicitations} elicitations for ${calls} calls` });
    }
    if (summary.connections !== summary.requests) {
        summary.failures.push({
            call: null,
            message: `${summary.requests} requests went over ${summary.connections} connections`,
        });
    }
}

setTimeout(() => {
    summary.failures.push({ call: null, message: `the run did not finish within ${timeoutSeconds} s` });
    finish(1);
}, timeoutSeconds * 1000).unref();

main().then(
    () => finish(summary.failures.length === 0 && summary.ok === calls ? 0 : 1),
    error => {
        summary.failures.push({ call: null, message: String(error && error.stack ? error.stack : error) });
        finish(1);
    },
);
