"""A local stand-in for Google Cloud Storage that TensorFlow's own `gs://` client talks to: the
gcp-storage-emulator package (PyPI) behind a small TLS proxy.

TensorFlow's own GCS client (compiled into libtensorflow_framework) has its endpoints built in:
`https://www.googleapis.com/storage/v1/`, `https://www.googleapis.com/upload/storage/v1/` and
`https://storage.googleapis.com/<bucket>/<object>` for reads; it reads no emulator variable
(no `STORAGE_EMULATOR_HOST`, no `CLOUD_STORAGE_TESTBENCH_ENDPOINT`). What it does read, and what
this module uses:

- `https_proxy` / `no_proxy`: its libcurl goes through a proxy. The proxy here (`_Proxy`)
  accepts CONNECT, presents a certificate for the two Google hosts signed by a throwaway CA, and
  hands each request, decrypted, to gcp-storage-emulator (PyPI) on 127.0.0.1.
- `CURL_CA_BUNDLE`: the CA file curl trusts (the throwaway CA, made with the `openssl` command).
- `GOOGLE_AUTH_TOKEN_FOR_TESTING`: a fixed bearer token, so no credentials file and no GCE
  metadata server are looked for (`NO_GCE_CHECK=true` as well).

These are read when a request is made, so setting them in this process after TensorFlow was
imported works. The `GCS_*` tuning variables (retries, caches, timeouts) are read when
TensorFlow is imported: tests/conftest.py sets the retries low, or a request the emulator cannot
serve would be retried 10 times with back-off (about 3 minutes) before it fails.

The proxy also smooths over what the emulator (gcp-storage-emulator 2026.7.19) does not do as
GCS does: TensorFlow's upload PUT carries both `Transfer-Encoding: chunked` and
`Content-Length` (the emulator would store the raw chunks), and `Expect: 100-continue` (the
emulator never answers it: a 1 s stall per upload). And the emulator fails an empty
`uploadType=media` upload, which is how TensorFlow makes a folder marker (`makedirs`): patched
in the emulator's process (`_serve`).

Emulator and proxy run in one subprocess (`python -m tests.gcs_emulator serve ...`), which imports
neither TensorFlow nor kerasbert; `serving` starts it and gives the environment that points
TensorFlow at it, and the fixture `gcs_bucket` gives a module's tests a bucket there.
"""

import contextlib
import os
import socket
import socketserver
import ssl
import subprocess
import sys

import pytest

BUCKET = "kerasbert-test"

# The emulator and its proxy.

_END = b"\r\n\r\n"
_REPLACED_HEADERS = (b"host", b"expect", b"transfer-encoding", b"content-length", b"connection",
                     b"proxy-connection")


class _Reader:
    """Buffered reads from a socket, plain or TLS."""

    def __init__(self, connection):
        self.connection, self.buffer = connection, b""

    def _more(self):
        data = self.connection.recv(65536)
        if not data:
            raise EOFError
        self.buffer += data

    def until(self, marker):
        while marker not in self.buffer:
            self._more()
        data, self.buffer = self.buffer.split(marker, 1)
        return data

    def exactly(self, size):
        while len(self.buffer) < size:
            self._more()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data


def _read_request(reader, on_expect_continue):
    """(request line, [(name, value)], body) of one HTTP/1.1 request; a chunked body joined."""
    lines = reader.until(_END).split(b"\r\n")
    headers = [tuple(part.strip() for part in line.split(b":", 1)) for line in lines[1:]]
    values = {name.lower(): value for name, value in headers}
    if values.get(b"expect", b"").lower() == b"100-continue":
        on_expect_continue()
    if values.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = b""
        while True:
            size = int(reader.until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                reader.until(b"\r\n")
                return lines[0], headers, body
            body += reader.exactly(size)
            reader.exactly(2)
    return lines[0], headers, reader.exactly(int(values.get(b"content-length", b"0")))


class _ProxyHandler(socketserver.BaseRequestHandler):
    """One request: through a CONNECT tunnel (TLS ends here) or plain (an upload session URL,
    which the emulator built from the `Host` this proxy sent)."""

    def handle(self):
        connection, reader = self.request, _Reader(self.request)
        try:
            head = reader.until(_END) + _END
            if head[:8].upper() == b"CONNECT ":
                connection.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                connection = self.server.tls.wrap_socket(connection, server_side=True)
                reader = _Reader(connection)
            else:
                reader.buffer = head + reader.buffer
            self._forward(connection, reader)
        except (EOFError, OSError, ValueError):
            pass
        finally:
            if connection is not self.request:
                connection.close()

    def _forward(self, connection, reader):
        line, headers, body = _read_request(
            reader, lambda: connection.sendall(b"HTTP/1.1 100 Continue\r\n\r\n"))
        lines = [line] + [b"%s: %s" % header for header in headers
                          if header[0].lower() not in _REPLACED_HEADERS]
        lines += [b"Host: 127.0.0.1:%d" % self.server.server_address[1],
                  b"Content-Length: %d" % len(body), b"Connection: close"]
        with socket.create_connection(("127.0.0.1", self.server.emulator_port)) as emulator:
            emulator.sendall(b"\r\n".join(lines) + _END + body)
            while data := emulator.recv(65536):
                connection.sendall(data)


class _Proxy(socketserver.ThreadingTCPServer):
    daemon_threads = True

    def __init__(self, certificate, key, emulator_port):
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.emulator_port = emulator_port
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(certificate, key)


def _serve(certificate, key, bucket):
    """Start the emulator (in memory, `bucket` made) and the proxy; print the proxy's port."""
    from gcp_storage_emulator import server as emulator

    read_body = emulator._read_data

    def read_body_allowing_empty_media(handler, query):
        body = read_body(handler, query)
        if body is None and query.get("uploadType") == ["media"]:
            return b""  # an empty object (a folder marker); the emulator would fail on None
        return body

    emulator._read_data = read_body_allowing_empty_media
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        emulator_port = probe.getsockname()[1]
    emulator.create_server("127.0.0.1", emulator_port, in_memory=True,
                           default_bucket=bucket).start()
    proxy = _Proxy(certificate, key, emulator_port)
    print(proxy.server_address[1], flush=True)
    proxy.serve_forever()


def _make_certificate(folder):
    """A throwaway CA and a certificate it signed for the Google storage hosts: (ca, cert, key)."""
    ca, ca_key = os.path.join(folder, "ca.pem"), os.path.join(folder, "ca.key")
    cert, key = os.path.join(folder, "host.pem"), os.path.join(folder, "host.key")
    request, extensions = os.path.join(folder, "host.csr"), os.path.join(folder, "host.ext")
    with open(extensions, "w") as file:
        file.write("subjectAltName=DNS:www.googleapis.com,DNS:storage.googleapis.com\n"
                   "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    for command in (
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-keyout", ca_key,
             "-out", ca, "-subj", "/CN=kerasbert test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", request,
             "-subj", "/CN=www.googleapis.com"],
            ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
             "-days", "2", "-out", cert, "-extfile", extensions]):
        subprocess.run(["openssl", *command], check=True, capture_output=True)
    return ca, cert, key




@contextlib.contextmanager
def serving(folder, bucket=BUCKET):
    """Start the emulator with `bucket` (certificates and log in `folder`); yields the
    environment variables that send TensorFlow's GCS client to it."""
    ca, cert, key = _make_certificate(str(folder))
    log_path = os.path.join(folder, "emulator.log")
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "tests.gcs_emulator", "serve", cert, key,
                                    bucket], stdout=subprocess.PIPE, stderr=log, text=True,
                                   cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        port = process.stdout.readline().strip()
        if not port.isdigit():
            process.wait(timeout=30)
            with open(log_path, errors="replace") as log:
                raise RuntimeError("the GCS emulator did not start:\n" + log.read()[-3000:])
        yield {"https_proxy": f"http://127.0.0.1:{port}", "no_proxy": "127.0.0.1,localhost",
               "CURL_CA_BUNDLE": ca, "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator",
               "NO_GCE_CHECK": "true"}
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def gcs_bucket(tmp_path_factory):
    """`gs://kerasbert-test`, served by the emulator, with the environment TensorFlow's GCS
    client reads pointed at it for the module's tests (restored after; processes the tests
    start inherit it)."""
    with serving(tmp_path_factory.mktemp("gcs-emulator")) as environment_variables:
        with pytest.MonkeyPatch.context() as environment:
            for name in ("HTTPS_PROXY", "ALL_PROXY", "all_proxy", "NO_PROXY"):
                environment.delenv(name, raising=False)
            for name, value in environment_variables.items():
                environment.setenv(name, value)
            yield f"gs://{BUCKET}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"] and len(sys.argv) == 5:
        _serve(*sys.argv[2:])
    sys.exit("usage: python -m tests.gcs_emulator serve CERTIFICATE KEY BUCKET")
