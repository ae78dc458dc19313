"""moto's S3 server (moto[server]) on loopback, signatures enforced after the first
requests: what tests/interop/test_s3.py and bench/s3_bench.py read s3:// datasets from;
and a TCP proxy in front of it, whose subclasses inject faults, delays or a rate."""

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3

# An IAM policy document allowing the actions %s (a JSON string or list).
ALLOW = ('{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": %s, '
         '"Resource": "*"}]}')


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _await_port(port, proc, seconds=30):
    """moto_server takes a second or two to import; poll until it accepts connections."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"moto_server did not listen on {port} in {seconds} s")


class Moto:
    """moto_server on a free loopback port, logging to TMP/moto.log. The first
    `unauthenticated` requests need no signature (moto's INITIAL_NO_AUTH_ACTION_COUNT: the
    set-up of users and keys); every later one must be signed."""

    def __init__(self, tmp, unauthenticated=4):
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        server = Path(sys.executable).parent / "moto_server"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(unauthenticated)
        self.log = open(tmp / "moto.log", "w")
        self.proc = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(self.port)],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT)
        _await_port(self.port, self.proc)

    def client(self, service, key_id="setup", secret="setup", token=None):
        return boto3.client(service, endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=key_id, aws_secret_access_key=secret,
                            aws_session_token=token)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()

    def reader(self, bucket, user="reader"):
        """Four unauthenticated requests: an IAM user allowed s3:*, its access key, and
        `bucket`. Returns (access key id, secret access key)."""
        iam = self.client("iam")
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="s3-all", PolicyDocument=ALLOW % '"s3:*"')
        key = iam.create_access_key(UserName=user)["AccessKey"]
        self.client("s3").create_bucket(Bucket=bucket)
        return key["AccessKeyId"], key["SecretAccessKey"]


class Proxy:
    """Relays 127.0.0.1:port to moto, a thread per connection (moto closes each after one
    response); a subclass's serve(client, first) decides what each connection gets."""

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.connections = 0
        self.faults = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            first = self.connections == 1
            threading.Thread(target=self.serve, args=(client, first), daemon=True).start()

    @staticmethod
    def read_head(client):
        """The request's line and headers (and whatever body bytes came with them)."""
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(65536)
            if not chunk:
                break
            head += chunk
        return head

    def answer_error(self, client, status, code, message):
        """Answers with S3's error body of `code`, without reaching moto."""
        body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code>'
                b'<Message>%s</Message></Error>' % (code.encode(), message.encode()))
        client.sendall(b"HTTP/1.1 %s\r\nContent-Type: application/xml\r\n"
                       b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                       % (status.encode(), len(body)) + body)
        with self.lock:
            self.faults += 1
        client.close()

    def relay(self, client, head=b"", cut_at=None, rate=None):
        """Relays the connection (after sending `head` upstream); with `cut_at`, the first
        response of the proxy's life that reaches that many bytes is cut there; with
        `rate`, responses go at most that many bytes/s."""
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        upstream.sendall(head)

        def up():
            try:
                while data := client.recv(65536):
                    upstream.sendall(data)
            except OSError:
                pass
            finally:
                try:
                    upstream.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

        threading.Thread(target=up, daemon=True).start()
        sent, start = 0, time.monotonic()
        try:
            while data := upstream.recv(65536):
                if cut_at is not None and sent + len(data) >= cut_at:
                    with self.lock:
                        cut = self.faults == 0
                        self.faults += cut
                    if cut:
                        client.sendall(data[:cut_at - sent])
                        break
                    cut_at = None
                client.sendall(data)
                sent += len(data)
                if rate and (ahead := sent / rate - (time.monotonic() - start)) > 0:
                    time.sleep(ahead)
        except OSError:
            pass
        finally:
            # shutdown, not only close: the other thread's recv keeps the socket open.
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def close(self):
        self.listener.close()
