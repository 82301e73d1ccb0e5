"""The ``zemcp-test`` client: the other side of the wire, for functional tests of a running server.

It speaks Streamable HTTP itself (with ``requests``, the ``client`` extra) and imports nothing of
the server, only :mod:`zemcp.version`; an import-linter contract checks it. Its console script is
:func:`zemcp.testclient.mcptest.main`; the scripted session is
:class:`zemcp.testclient.client.McpTestClient`.
"""
