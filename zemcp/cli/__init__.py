"""The command line and what it serves: ``zemcp run`` (HTTP or stdio), the stdio transport,
Click CLIs as tools and the reference server's commands. The ``zemcp-test`` client is
:mod:`zemcp.testclient`, apart from the serving code."""
