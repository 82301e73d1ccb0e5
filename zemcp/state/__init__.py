"""What a session shares across requests: its record, the table of waiting server-to-client
requests, the streams' event logs and the fan-out of notifications, each behind one small
interface."""
