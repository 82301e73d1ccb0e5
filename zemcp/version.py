"""The version of zemcp (``serverInfo.version`` of the reference server, ``zemcp --version``)."""

__version__ = "0.1.0"
