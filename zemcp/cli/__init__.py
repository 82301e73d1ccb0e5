"""The command line and what it serves: ``zemcp run`` (HTTP or stdio), the stdio transport,
the ``zemcp-test`` client, Click CLIs as tools and the reference server's commands."""
