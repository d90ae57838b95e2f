"""A TCP proxy in front of a database server that a test can cut: every open connection is dropped and new
ones are refused until :meth:`CuttableProxy.restore` — a database outage, as workers see one, without
touching the server other tests share."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


class CuttableProxy:
    """Forwards 127.0.0.1:``port`` to ``target``; :meth:`cut` drops and refuses, :meth:`restore` forwards again."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True, name="db-proxy-accept").start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                client.close()  # the "server" is down
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True, name="db-proxy-pump").start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        selector.register(a, selectors.EVENT_READ, b)
        selector.register(b, selectors.EVENT_READ, a)
        try:
            while not self._closed.is_set() and not self._cut.is_set():
                for key, _ in selector.select(timeout=0.1):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except OSError:
            return
        finally:
            selector.close()
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            with self._lock:
                if (a, b) in self._pairs:
                    self._pairs.remove((a, b))

    def cut(self) -> None:
        """Drop every connection and refuse new ones."""
        self.cuts += 1
        self._cut.set()
        with self._lock:
            pairs = list(self._pairs)
        for a, b in pairs:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def restore(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed.set()
        self._cut.set()
        with contextlib.suppress(OSError):
            self._listener.close()
