"""moto's S3 server (moto[server]) on loopback, signatures enforced after the first
requests: what tests/interop/test_s3.py and bench/s3_bench.py read s3:// datasets from."""

import os
import socket
import subprocess
import sys
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
