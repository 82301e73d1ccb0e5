"""The live figures of a process: what its servers hold now, summed for the gauges.

Every server of the process adds a source (:meth:`LiveFigures.watch`) that reads its own
figures, or None once the server is gone: the exporters live as long as the process and
must not keep a server alive. :data:`PROCESS` is the one both exporters read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from zemcp.observe import instruments

#: A server's figures (gauge name -> a number, ``zemcp.streams.open`` kind -> number), or None.
Source = Callable[[], dict[str, Any] | None]


class LiveFigures:
    """The sources of the gauges' figures, summed when read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: list[Source] = []

    def watch(self, source: Source) -> None:
        """Add a server's figures to the sums."""
        with self._lock:
            self._sources.append(source)

    def read(self) -> dict[str, Any]:
        """The sums over every live source: each name of :data:`instruments.GAUGES` -> a
        number, and ``zemcp.streams.open`` -> {kind: number}."""
        with self._lock:
            sources = list(self._sources)
        totals: dict[str, Any] = {name: 0 for name in instruments.GAUGES}
        totals["zemcp.streams.open"] = dict.fromkeys(instruments.STREAM_KINDS, 0)
        gone = []
        for source in sources:
            reading = source()
            if reading is None:
                gone.append(source)
                continue
            for name, value in reading.items():
                if isinstance(value, dict):
                    for kind, n in value.items():
                        totals[name][kind] += n
                else:
                    totals[name] += value
        if gone:
            with self._lock:
                self._sources = [s for s in self._sources if s not in gone]
        return totals


#: The figures of this process's servers.
PROCESS = LiveFigures()
