"""A real S3 API server for the tests: moto's server mode, started on 127.0.0.1 as its own process
(so a test can pause it with SIGSTOP), and a proxy in front of it that drops ``If-None-Match``, which
makes it an S3-compatible store without conditional writes (what an old MinIO or a plain gateway
is), for the refusal test."""
from __future__ import annotations

import http.client
import http.server
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

ACCESS_KEY, SECRET_KEY, REGION = "testing", "testing", "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    def __init__(self):
        self.port = _free_port()
        command = shutil.which("moto_server")
        argv = [command] if command else [sys.executable, "-m", "moto.server"]
        self.proc = subprocess.Popen([*argv, "-H", "127.0.0.1", "-p", str(self.port)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start (pip install 'moto[server]')") from None
                time.sleep(0.1)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def options(self, endpoint: str | None = None) -> dict[str, str]:
        """delta-rs storage options for this server (or a proxy of it at ``endpoint``)."""
        return {"AWS_ENDPOINT_URL": endpoint or self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true"}

    def create_bucket(self, name: str) -> None:
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                     region_name=REGION).create_bucket(Bucket=name)

    @contextmanager
    def paused(self):
        """The server stopped (SIGSTOP) for the block: connections hang, as when a store is unreachable."""
        self.proc.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        self.proc.send_signal(signal.SIGCONT)
        self.proc.kill()
        self.proc.wait(10)


class NoConditionalWritesProxy:
    """Forwards every request to the server without its ``If-None-Match`` header."""

    def __init__(self, target_port: int):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("if-none-match", "host")}
                upstream = http.client.HTTPConnection("127.0.0.1", target_port, timeout=30)
                upstream.request(self.command, self.path, body=body, headers=headers)
                reply = upstream.getresponse()
                data = reply.read()
                self.send_response(reply.status)
                for k, v in reply.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                # a HEAD answer names the object's length without a body
                self.send_header("Content-Length", reply.getheader("Content-Length", "0")
                                 if self.command == "HEAD" else str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                upstream.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
