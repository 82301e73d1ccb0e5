// The host side of the MCP Apps test host (tests/support/apphost.py), bundled for the browser.
//
// Query string: server (the MCP endpoint), sandbox (the sandbox proxy's URL, on another origin),
// tool (a tool with a UI), args (its arguments, JSON), era ("legacy", the default: initialize
// and a session; or a protocol version to pin, such as "2026-07-28").
//
// It connects with the official TypeScript MCP client, lists the tools, calls the tool, reads
// its ui:// resource, loads it through the sandbox proxy with ext-apps' AppBridge, delivers the
// tool's input and result to the View, and relays the View's tools/call requests to the server
// for tools whose visibility includes "app". What happened is kept as JSON in #host-state and
// the progress in body[data-phase]: connected, listed, called, read, initialized, delivered,
// or failed (with #host-error).
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import {
    AppBridge,
    PostMessageTransport,
    RESOURCE_MIME_TYPE,
    buildAllowAttribute,
    getToolUiResourceUri,
} from '@modelcontextprotocol/ext-apps/app-bridge';

const EXTENSION_ID = 'io.modelcontextprotocol/ui';
const query = new URLSearchParams(location.search);
const state = { phase: 'loading', relayed: [], refused: [] };

function record(changes) {
    Object.assign(state, changes);
    document.getElementById('host-state').textContent = JSON.stringify(state);
    document.body.dataset.phase = state.phase;
}

function textOf(result) {
    return (result.content || []).filter((item) => item.type === 'text').map((item) => item.text).join('\n');
}

function visibility(tool) {
    return (tool._meta && tool._meta.ui && tool._meta.ui.visibility) || ['model', 'app'];
}

async function main() {
    const server = query.get('server');
    const toolName = query.get('tool');
    const args = JSON.parse(query.get('args') || '{}');
    const era = query.get('era') || 'legacy';
    document.getElementById('server-url').textContent = server;
    document.getElementById('tool-name').textContent = toolName;

    const options = { capabilities: { extensions: { [EXTENSION_ID]: { mimeTypes: [RESOURCE_MIME_TYPE] } } } };
    if (era !== 'legacy') options.versionNegotiation = { mode: { pin: era } };
    const client = new Client({ name: 'zemcp-test-host', version: '1.0.0' }, options);
    const transport = new StreamableHTTPClientTransport(new URL(server));
    await client.connect(transport);
    const protocolVersion = client.getNegotiatedProtocolVersion();
    document.getElementById('protocol').textContent = `MCP ${protocolVersion}`;
    record({ phase: 'connected', era: client.getProtocolEra(), protocolVersion, sessionId: transport.sessionId || null });

    const { tools } = await client.listTools();
    record({ phase: 'listed', tools: tools.map((tool) => ({ name: tool.name, _meta: tool._meta || null })) });
    const tool = tools.find((candidate) => candidate.name === toolName);
    if (!tool) throw new Error(`the server lists no tool ${toolName}`);
    const uri = getToolUiResourceUri(tool);
    if (!uri) throw new Error(`tool ${toolName} names no UI resource in _meta.ui.resourceUri`);

    const result = await client.callTool({ name: toolName, arguments: args });
    document.getElementById('tool-text').textContent = textOf(result);
    record({ phase: 'called', result });

    const { contents } = await client.readResource({ uri });
    const content = contents.find((item) => item.uri === uri) || contents[0];
    if (!content || content.mimeType !== RESOURCE_MIME_TYPE) {
        throw new Error(`resource ${uri} is not ${RESOURCE_MIME_TYPE}: ${JSON.stringify(content && content.mimeType)}`);
    }
    const html = content.text !== undefined ? content.text : new TextDecoder().decode(
        Uint8Array.from(atob(content.blob), (c) => c.charCodeAt(0)));
    const ui = (content._meta && content._meta.ui) || {};
    record({ phase: 'read', resource: { uri, mimeType: content.mimeType, _meta: content._meta || null } });

    const box = document.getElementById('frame-box');
    if (ui.prefersBorder !== false) box.classList.add('bordered');
    const frame = document.createElement('iframe');
    frame.id = 'sandbox';
    // The spec's permissions for the sandbox proxy; the View inside it gets only allow-scripts.
    frame.setAttribute('sandbox', 'allow-scripts allow-same-origin');
    const allow = buildAllowAttribute(ui.permissions);
    if (allow) frame.setAttribute('allow', allow);
    box.appendChild(frame);

    const bridge = new AppBridge(
        null,
        { name: 'zemcp-test-host', version: '1.0.0' },
        { serverTools: {}, logging: {}, sandbox: { csp: ui.csp, permissions: ui.permissions } },
        { hostContext: { toolInfo: { tool }, theme: 'light', displayMode: 'inline', platform: 'web' } },
    );
    // The View's calls reach the server as ordinary tools/call, but only for tools it may use.
    bridge.oncalltool = async (params) => {
        const target = tools.find((candidate) => candidate.name === params.name);
        if (!target || !visibility(target).includes('app')) {
            state.refused.push(params.name);
            record({});
            throw new Error(`tool ${params.name} is not callable by the app`);
        }
        const answer = await client.callTool(params);
        state.relayed.push({ name: params.name, arguments: params.arguments || {}, result: answer });
        record({});
        return answer;
    };
    bridge.onsizechange = ({ height }) => {
        if (height) frame.style.height = `${height}px`;
    };
    bridge.addEventListener('sandboxready', () => {
        bridge.sendSandboxResourceReady({ html, csp: ui.csp, permissions: ui.permissions });
    });
    bridge.addEventListener('initialized', async () => {
        try {
            record({ phase: 'initialized', appInfo: bridge.getAppVersion() || null });
            await bridge.sendToolInput({ arguments: args });
            await bridge.sendToolResult(result);
            record({ phase: 'delivered' });
        } catch (error) {
            fail(error);
        }
    });
    await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
    frame.src = query.get('sandbox');
}

function fail(error) {
    document.getElementById('host-error').textContent = String((error && error.stack) || error);
    record({ phase: 'failed', error: String((error && error.message) || error) });
}

main().catch(fail);
