"""A TCP proxy a test can cut, as a network blip or a restarting server cuts connections."""

from __future__ import annotations

import socket
import threading
from typing import Any

__all__ = ["CuttableProxy"]


class CuttableProxy:
    """Forwards TCP on 127.0.0.1 to a server's ``port`` (threads, so sync and async tests alike
    can use it). :meth:`cut` closes every open link and refuses new ones until :meth:`mend`,
    which may lead them to another server (a restart). ``http``/``url``: its addresses;
    ``accepted``: connections it forwarded."""

    def __init__(self, port: int) -> None:
        self.target, self.up, self.links, self.accepted = port, True, [], 0
        self._lock = threading.Lock()
        self._srv = socket.create_server(("127.0.0.1", 0))
        where = f"127.0.0.1:{self._srv.getsockname()[1]}"
        self.http, self.url = f"http://{where}", f"ws://{where}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._srv.accept()
            except OSError:
                return
            try:
                if not self.up:
                    raise OSError("down")
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            with self._lock:
                self.accepted += 1
                self.links += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: Any, b: Any) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self) -> None:
        with self._lock:
            links, self.links, self.up = self.links, [], False
        for s in links:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def mend(self, port: int | None = None) -> None:
        """Take connections again (to ``port``: another server, as after a restart)."""
        self.target = port or self.target
        self.up = True

    def close(self) -> None:
        self.cut()
        self._srv.close()
