"""What goes back to the client: reply sinks, JSON bodies and event streams."""
