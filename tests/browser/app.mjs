// The View of the MCP Apps test host (tests/support/apphost.py), bundled into app.html with
// ext-apps' App. It shows the tool input and result the host delivers, and its button calls
// the app-only tool named in body[data-refresh-tool] through the host with the same arguments.
import { App } from '@modelcontextprotocol/ext-apps';

function textOf(result) {
    return (result.content || []).filter((item) => item.type === 'text').map((item) => item.text).join('\n');
}

function show(id, text) {
    document.getElementById(id).textContent = text;
}

const button = document.getElementById('refresh');
const app = new App({ name: 'zemcp-test-app', version: '1.0.0' }, {});
let input = {};

app.ontoolinput = (params) => {
    input = params.arguments || {};
    show('tool-input', JSON.stringify(input));
};
app.ontoolresult = (result) => {
    show('tool-result', textOf(result));
    button.disabled = false;
};
button.addEventListener('click', async () => {
    button.disabled = true;
    try {
        const result = await app.callServerTool({ name: document.body.dataset.refreshTool, arguments: input });
        show(result.isError ? 'refresh-error' : 'refresh-result', textOf(result));
    } catch (error) {
        show('refresh-error', String((error && error.message) || error));
    } finally {
        button.disabled = false;
    }
});
app.connect().then(
    () => { document.body.dataset.connected = 'true'; },
    (error) => show('refresh-error', `connect: ${(error && error.message) || error}`),
);
