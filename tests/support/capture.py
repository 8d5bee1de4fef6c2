"""A TLS + HTTP/2 server on loopback that records how each client connects.

For every connection it keeps the ClientHello's JA4 and, over HTTP/2, the Akamai fingerprint
(SETTINGS, WINDOW_UPDATE, PRIORITY frames and the pseudo-header order), and every request's
headers in the order they came. A browser and trawl are compared by these, on the wire.

The ClientHello is read with MSG_PEEK before the socket is handed to Python's TLS, and the
client's first HTTP/2 frames are parsed from the decrypted bytes before h2 serves them. It runs
in threads (one per connection), so a test's event loop is free to drive the client.

Certificates come from ``make_ca``: a throwaway CA and a leaf for ``localhost`` / 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import ipaddress
import socket
import ssl
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import hpack
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# The handler's answer: status, headers, body.
Reply = tuple[int, list[tuple[str, str]], bytes]
Handler = Callable[["Request"], Reply]


@dataclass
class Request:
    path: str
    headers: list[tuple[str, str]]  # in the order sent; HTTP/2 pseudo-headers included
    connection: int  # index into CaptureServer.connections

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


@dataclass
class Connection:
    ja4: str | None = None
    alpn: str | None = None
    akamai: str | None = None
    requests: list[Request] = field(default_factory=list)


# -- JA4 (FoxIO's spec: https://github.com/FoxIO-LLC/ja4/blob/main/technical_details/JA4.md) --
def _grease(value: int) -> bool:
    return value & 0x0F0F == 0x0A0A and value >> 8 == value & 0xFF


def ja4(hello: bytes) -> str:
    """JA4 of a TLS record holding a ClientHello (TCP)."""
    pos = 5 + 4 + 2 + 32  # record header, handshake header, legacy version, random
    pos += 1 + hello[pos]  # session id
    (length,) = struct.unpack_from("!H", hello, pos)
    ciphers = [c for (c,) in struct.iter_unpack("!H", hello[pos + 2 : pos + 2 + length])]
    pos += 2 + length
    pos += 1 + hello[pos]  # compression methods
    (ext_total,) = struct.unpack_from("!H", hello, pos)
    pos += 2
    end = pos + ext_total
    extensions: list[int] = []
    alpn, sigalgs, version = "00", [], 0
    while pos < end:
        kind, size = struct.unpack_from("!HH", hello, pos)
        data = hello[pos + 4 : pos + 4 + size]
        pos += 4 + size
        if _grease(kind):
            continue
        extensions.append(kind)
        if kind == 16 and len(data) > 3:  # ALPN: list length, first protocol
            first = data[3 : 3 + data[2]].decode("latin-1")
            alpn = first[0] + first[-1]
        elif kind == 13:
            sigalgs = [a for (a,) in struct.iter_unpack("!H", data[2:]) if not _grease(a)]
        elif kind == 43:
            versions = [v for (v,) in struct.iter_unpack("!H", data[1:]) if not _grease(v)]
            version = max(versions)
    if not version:
        (version,) = struct.unpack_from("!H", hello, 9)
    tls = {0x0304: "13", 0x0303: "12", 0x0302: "11", 0x0301: "10"}.get(version, "00")
    ciphers = [c for c in ciphers if not _grease(c)]
    sni = "d" if 0 in extensions else "i"
    head = f"t{tls}{sni}{min(len(ciphers), 99):02d}{min(len(extensions), 99):02d}{alpn}"

    def digest(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()[:12] if text else "000000000000"

    b = digest(",".join(f"{c:04x}" for c in sorted(ciphers)))
    rest = ",".join(f"{e:04x}" for e in sorted(e for e in extensions if e not in (0, 16)))
    if sigalgs:
        rest += "_" + ",".join(f"{a:04x}" for a in sigalgs)
    return f"{head}_{b}_{digest(rest)}"


def _peek_hello(sock: socket.socket) -> bytes:
    """The first TLS record, left in the socket for the handshake."""
    data = b""
    while True:
        data = sock.recv(65536, socket.MSG_PEEK)
        if len(data) >= 5 and len(data) >= 5 + struct.unpack_from("!H", data, 3)[0]:
            return data[: 5 + struct.unpack_from("!H", data, 3)[0]]
        if not data:
            raise ConnectionError("closed before a ClientHello")


class _H2Frames:
    """Reads the client's first frames for the Akamai fingerprint."""

    def __init__(self) -> None:
        self.buffer = b""
        self.settings: list[str] | None = None
        self.window: int | None = None
        self.priorities: list[str] = []
        self.pseudo: str | None = None
        self._decoder = hpack.Decoder()

    def feed(self, data: bytes) -> None:
        if self.pseudo is not None:
            return  # the fingerprint ends with the first request's headers
        self.buffer += data
        if self.buffer.startswith(PREFACE):
            self.buffer = self.buffer[len(PREFACE) :]
        while len(self.buffer) >= 9 and self.pseudo is None:
            length = int.from_bytes(self.buffer[:3], "big")
            kind, flags = self.buffer[3], self.buffer[4]
            stream = int.from_bytes(self.buffer[5:9], "big") & 0x7FFFFFFF
            if len(self.buffer) < 9 + length:
                return
            payload = self.buffer[9 : 9 + length]
            self.buffer = self.buffer[9 + length :]
            if kind == 0x4 and not flags & 0x1 and self.settings is None:
                self.settings = [
                    f"{k}:{v}" for k, v in struct.iter_unpack("!HI", payload[: length // 6 * 6])
                ]
            elif kind == 0x8 and stream == 0 and self.window is None:
                self.window = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
            elif kind == 0x2:
                dep = int.from_bytes(payload[:4], "big")
                self.priorities.append(f"{stream}:{dep >> 31}:{dep & 0x7FFFFFFF}:{payload[4] + 1}")
            elif kind == 0x1:
                block = payload
                if flags & 0x8:  # PADDED
                    block = block[1 : len(block) - payload[0]]
                if flags & 0x20:  # PRIORITY
                    block = block[5:]
                names = [
                    n if isinstance(n, str) else n.decode() for n, _ in self._decoder.decode(block)
                ]
                self.pseudo = ",".join(n[1] for n in names if n.startswith(":"))

    def fingerprint(self) -> str:
        return "|".join(
            (
                ";".join(self.settings or []),
                str(self.window or "00"),
                ",".join(self.priorities) or "0",
                self.pseudo or "",
            )
        )


class CaptureServer:
    """``with CaptureServer(cert) as server:`` serves https://localhost:{server.port}/."""

    def __init__(
        self, cert: Path, key: Path, handler: Handler | None = None, host: str = "127.0.0.1"
    ) -> None:
        self.handler = handler or (lambda request: (200, [("content-type", "text/html")], b"ok"))
        self.host = host
        self.connections: list[Connection] = []
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(cert, key)
        self._context.set_alpn_protocols(["h2", "http/1.1"])
        self._sock = socket.create_server((host, 0))
        self.port = self._sock.getsockname()[1]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._live: set[socket.socket] = set()

    def __enter__(self) -> CaptureServer:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes accept(); close() alone does not
        self._sock.close()
        with self._lock:
            live = list(self._live)
        for sock in live:  # wakes the threads blocked in recv()
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=10)

    @property
    def requests(self) -> list[Request]:
        return [r for c in self.connections for r in c.requests]

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                raw, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections.append(Connection())
                index = len(self.connections) - 1
                self._live.add(raw)
                thread = threading.Thread(target=self._serve, args=(raw, index), daemon=True)
                self._threads.append(thread)
            thread.start()

    def _serve(self, raw: socket.socket, index: int) -> None:
        conn = self.connections[index]
        tls: ssl.SSLSocket | None = None
        try:
            raw.settimeout(30)
            conn.ja4 = ja4(_peek_hello(raw))
            tls = self._context.wrap_socket(raw, server_side=True)
            with self._lock:
                self._live.add(tls)
            conn.alpn = tls.selected_alpn_protocol()
            if conn.alpn == "h2":
                self._serve_h2(tls, conn, index)
            else:
                self._serve_h1(tls, conn, index)
        except (OSError, ConnectionError, ValueError, h2.exceptions.H2Error):
            pass  # the client went away or gave up on our certificate: recorded so far
        finally:
            with self._lock:
                self._live.discard(raw)
                if tls is not None:
                    self._live.discard(tls)
            if tls is not None:
                tls.close()
            raw.close()

    def _serve_h2(self, tls: ssl.SSLSocket, conn: Connection, index: int) -> None:
        frames = _H2Frames()
        h2conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        h2conn.initiate_connection()
        tls.sendall(h2conn.data_to_send())
        while True:
            data = tls.recv(65536)
            if not data:
                return
            frames.feed(data)
            for event in h2conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    headers = [(str(k), str(v)) for k, v in event.headers]
                    if conn.akamai is None and frames.pseudo is not None:
                        conn.akamai = frames.fingerprint()
                    request = Request(dict(headers).get(":path", "/"), headers, index)
                    conn.requests.append(request)
                    status, out, body = self.handler(request)
                    h2conn.send_headers(
                        event.stream_id,
                        [(":status", str(status)), *out, ("content-length", str(len(body)))],
                    )
                    h2conn.send_data(event.stream_id, body, end_stream=True)
                elif isinstance(event, h2.events.ConnectionTerminated):
                    tls.sendall(h2conn.data_to_send())
                    return
            tls.sendall(h2conn.data_to_send())

    def _serve_h1(self, tls: ssl.SSLSocket, conn: Connection, index: int) -> None:
        buffer = b""
        while True:
            while b"\r\n\r\n" not in buffer:
                data = tls.recv(65536)
                if not data:
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            headers = [(k, v.strip()) for k, _, v in (line.partition(":") for line in lines[1:])]
            request = Request(path, headers, index)
            conn.requests.append(request)
            status, out, body = self.handler(request)
            lines = [f"HTTP/1.1 {status} X", *(f"{k}: {v}" for k, v in out)]
            lines.append(f"Content-Length: {len(body)}")
            tls.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)


def make_ca(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a leaf for localhost / 127.0.0.1: (ca.pem, leaf.pem, leaf.key)."""
    now = datetime.datetime.now(datetime.UTC)

    def build(
        subject: str,
        issuer: x509.Name | None,
        key: ec.EllipticCurvePrivateKey,
        signer: ec.EllipticCurvePrivateKey,
        ca: bool,
    ) -> x509.Certificate:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(issuer or name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = build("trawl test CA", None, ca_key, ca_key, True)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = build("localhost", ca.subject, leaf_key, ca_key, False)
    paths = (directory / "ca.pem", directory / "leaf.pem", directory / "leaf.key")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths
