"""What goes back to the client, one module per concept; read the one for what you look for:

- ``responses``: the answer to a request: JSON and error bodies, challenges, ``reply`` (JSON or an event stream, decided late), ``new_sink`` (which sink a request gets).
- ``sinks``: ``ReplySink``, a request's output handed from a handler on zemcp's pool to the request's thread.
- ``resumable``: ``ResumableReplySink``, a session's pool-fed sink, its events kept in an ``EventLog`` for resumption.
- ``direct``: ``DirectSink`` and its WSGI response: the handler on the request's own thread under gunicorn, writing through PEP 3333 ``write``.
- ``streams``: the event-stream bodies (a sink's events, a resumable stream's log), keep-alives, a client that left.
- ``encoding``: the JSON of a reply; a result JSON cannot carry becomes error -32603.
"""
