// The official TypeScript MCP SDK 1.x (@modelcontextprotocol/sdk) against a zemcp server, in
// the handshake era: an elicitation answered after the server stopped waiting for it must not
// cost the client its session. One session (initialize with the elicitation capability); then
// ze_execute without a command, whose elicitation/create handler holds the event loop for
// <hold seconds> (longer than the server's elicitation timeout) before it answers, as a
// synchronous prompt would. The SDK reads nothing meanwhile, so it sends the answer before it
// reads the server's notifications/cancelled for the question: the late answer goes out
// through the SDK's own code, and the call ends with the server's timeout result. Then
// ze_execute {"command": "session show"} in the same session.
//
// Usage: node late_answer_client.cjs <node_modules dir> <url> <hold seconds> <timeout seconds>
// <node_modules dir> holds @modelcontextprotocol/sdk 1.x (tests/support/tsclient1.py installs it).
// Prints one JSON line, the summary (see `summary` below); exit code 0 when the run finished
// (whatever the server answered: the test judges the summary), 1 when it failed or ran past
// <timeout seconds>, 2 for bad arguments.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { createRequire } = require('node:module');

const [modulesDir, url, holdArg, timeoutArg] = process.argv.slice(2);
const holdSeconds = Number(holdArg);
const timeoutSeconds = Number(timeoutArg);
if (!modulesDir || !url || !(holdSeconds >= 0) || !(timeoutSeconds > 0)) {
    console.error('usage: node late_answer_client.cjs <node_modules dir> <url> <hold seconds> <timeout seconds>');
    process.exit(2);
}
const load = createRequire(path.join(path.resolve(modulesDir), 'resolver.cjs'));
const { Client } = load('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = load('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ElicitRequestSchema } = load('@modelcontextprotocol/sdk/types.js');
const sdkVersion = JSON.parse(fs.readFileSync(
    path.join(path.resolve(modulesDir), '@modelcontextprotocol', 'sdk', 'package.json'), 'utf8')).version;

const started = Date.now();
const remaining = () => Math.max(1, timeoutSeconds * 1000 - (Date.now() - started));

const summary = {
    sdkVersion,
    // The transport's session id after initialize, and after the second call.
    sessionIds: [],
    // initialize requests the SDK sent: 1 unless it started a new session.
    initializes: 0,
    // The id of the elicitation/create the handler answered late.
    askedId: null,
    // Each POST that carried an answer (a JSON-RPC response): {id, status}.
    answers: [],
    // What the SDK reported through Client.onerror, as {message}.
    errors: [],
    // The CallToolResult of the timed-out call and of the session show call.
    results: [],
    failure: null,
};

function finish(code) {
    process.stdout.write(JSON.stringify(summary) + '\n');
    process.exit(code);
}

// Records what the SDK sends: initialize requests, and the status of every answer it POSTs.
async function recordingFetch(input, init) {
    let message = null;
    try {
        message = typeof init?.body === 'string' ? JSON.parse(init.body) : null;
    } catch {
        message = null;
    }
    if (message && message.method === 'initialize') {
        summary.initializes += 1;
    }
    const response = await fetch(input, init);
    if (message && !('method' in message) && ('result' in message || 'error' in message)) {
        summary.answers.push({ id: message.id, status: response.status });
    }
    return response;
}

function holdEventLoop(seconds) {
    const until = Date.now() + seconds * 1000;
    while (Date.now() < until) {
        // Busy on purpose: nothing else of the process runs meanwhile.
    }
}

async function main() {
    const client = new Client({ name: 'zemcp-ts-late', version: '1.0' }, { capabilities: { elicitation: {} } });
    client.onerror = error => {
        summary.errors.push({ message: String(error && error.message ? error.message : error) });
    };
    client.setRequestHandler(ElicitRequestSchema, async (_request, extra) => {
        summary.askedId = extra.requestId ?? null;
        holdEventLoop(holdSeconds);
        return { action: 'accept', content: { command: 'session show' } };
    });
    const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
    await client.connect(transport, { timeout: remaining() });
    summary.sessionIds.push(transport.sessionId ?? null);
    summary.results.push(await client.callTool({ name: 'ze_execute', arguments: {} }, undefined, { timeout: remaining() }));
    summary.results.push(await client.callTool(
        { name: 'ze_execute', arguments: { command: 'session show' } }, undefined, { timeout: remaining() }));
    summary.sessionIds.push(transport.sessionId ?? null);
    await transport.terminateSession();
    await client.close();
}

setTimeout(() => {
    summary.failure = `the run did not finish within ${timeoutSeconds} s`;
    finish(1);
}, timeoutSeconds * 1000).unref();

main().then(
    () => finish(0),
    error => {
        summary.failure = String(error && error.stack ? error.stack : error);
        finish(1);
    },
);
