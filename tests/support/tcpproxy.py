"""A TCP proxy for tests that can black-hole its traffic, as a network that drops packets without a FIN.

``with TcpProxy(("127.0.0.1", port)) as proxy:`` listens on ``proxy.address``. :meth:`black_hole`
makes every open connection and every new one swallow what is sent either way (the sockets stay
open; nothing is answered, nothing is closed); :meth:`restore` lets *new* connections through again
(a black-holed one stays dead, as a TCP connection whose peer vanished). One thread, ``select``.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading


class TcpProxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.address = self._listener.getsockname()[:2]
        self._pairs: dict[socket.socket, socket.socket] = {}
        self._dead: set[socket.socket] = set()
        self._holing = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="tcp-proxy", daemon=True)
        self.connections = 0

    @property
    def url(self) -> str:
        return f"http://{self.address[0]}:{self.address[1]}"

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        with self._lock:
            for sock in [self._listener, *self._pairs]:
                with contextlib.suppress(OSError):
                    sock.close()

    def black_hole(self) -> None:
        with self._lock:
            self._holing = True
            self._dead.update(self._pairs)

    def restore(self) -> None:
        with self._lock:
            self._holing = False

    def _accept(self) -> None:
        client, _ = self._listener.accept()
        self.connections += 1
        upstream = socket.create_connection(self.target)
        with self._lock:
            self._pairs[client] = upstream
            self._pairs[upstream] = client
            if self._holing:
                self._dead.update((client, upstream))

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                socks = [self._listener, *self._pairs]
            readable, _, _ = select.select(socks, [], [], 0.05)
            for sock in readable:
                if sock is self._listener:
                    with contextlib.suppress(OSError):
                        self._accept()
                    continue
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                with self._lock:
                    peer = self._pairs.get(sock)
                    dead = sock in self._dead
                if peer is None:
                    continue
                if not data:
                    self._close(sock, peer)
                elif not dead:
                    with contextlib.suppress(OSError):
                        peer.sendall(data)

    def _close(self, sock: socket.socket, peer: socket.socket) -> None:
        with self._lock:
            for s in (sock, peer):
                self._pairs.pop(s, None)
                self._dead.discard(s)
                with contextlib.suppress(OSError):
                    s.close()
