"""The official MCP conformance suite against zemcp: the fixtures server and its runner."""
