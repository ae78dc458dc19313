"""s3:// datasets against a real S3 server on loopback: moto's (moto[server]), with
signatures enforced. The first six requests moto takes unauthenticated
(INITIAL_NO_AUTH_ACTION_COUNT=6) create an IAM user, give it s3:* and sts:AssumeRole
through an inline policy, create its access key and the bucket, and a role allowed s3:*
(for temporary credentials with a session token); from then on every request must be
signed. A converted dataset is uploaded with boto3, then read with the shardpack CLI, the C++
samples (Dataset and Loader) and the Python binding, through AWS_ENDPOINT_URL (path-style
addressing), with the credentials in the environment.

A small TCP proxy in front of moto drops a connection mid-download, or answers a request
with S3's 503 SlowDown, to show that both are retried and the files still checksummed.
Every stdout and stderr of these runs (run()), and every file of the caches they fill, is
checked for the secret keys and session tokens in use, the wrong ones included."""

import os
import re
import socket
import subprocess
import threading
from pathlib import Path

import pytest

pytest.importorskip("boto3", reason="moto[server] is not installed here: run bash "
                    "scripts/install-interop.sh")
from moto_s3 import ALLOW, Moto  # noqa: E402

BUCKET = "shardpack-data"
SECRET_MARKERS = []  # secret keys and session tokens used here: never in any output
ROLE = {}  # the ARN of the role for temporary credentials


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    m = Moto(tmp_path_factory.mktemp("moto"), unauthenticated=6)
    yield m
    m.stop()



@pytest.fixture(scope="module")
def keys(moto):
    """The six unauthenticated requests; from here on moto checks signatures."""
    iam = moto.client("iam")
    iam.create_user(UserName="reader")
    iam.put_user_policy(UserName="reader", PolicyName="s3-all",
                        PolicyDocument=ALLOW % '["s3:*", "sts:AssumeRole"]')
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    moto.client("s3").create_bucket(Bucket=BUCKET)
    ROLE["arn"] = iam.create_role(RoleName="trainer", AssumeRolePolicyDocument=(
        '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", '
        '"Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}'))["Role"]["Arn"]
    iam.put_role_policy(RoleName="trainer", PolicyName="s3-all", PolicyDocument=ALLOW % '"s3:*"')
    SECRET_MARKERS.append(key["SecretAccessKey"])
    return key["AccessKeyId"], key["SecretAccessKey"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, cli, image_tree, moto, keys):
    """image_tree converted (3 shards), uploaded to s3://BUCKET/ds. Returns the local copy."""
    local = tmp_path_factory.mktemp("local") / "ds"
    cli("convert", image_tree.root, local, "--size", "16x16", "--shard-records", "4", "--quiet")
    s3 = moto.client("s3", *keys)
    for f in sorted(local.iterdir()):
        if f.name != ".lock":
            s3.upload_file(str(f), BUCKET, f"ds/{f.name}")
    # Signatures are enforced: a wrong secret is refused.
    with pytest.raises(Exception, match="SignatureDoesNotMatch"):
        moto.client("s3", keys[0], "wrong").list_objects_v2(Bucket=BUCKET)
    return local


@pytest.fixture
def env(tmp_path, moto, keys):
    """The environment of a shardpack run: credentials in AWS_*, no ~/.aws (HOME is
    empty), moto as the endpoint, a fresh cache."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("AWS_") and k.lower() not in ("http_proxy", "https_proxy")}
    (tmp_path / "home").mkdir()
    e.update(HOME=str(tmp_path / "home"), AWS_ENDPOINT_URL=moto.endpoint,
             AWS_ACCESS_KEY_ID=keys[0], AWS_SECRET_ACCESS_KEY=keys[1], AWS_REGION="us-east-1",
             SHARDPACK_CACHE_DIR=str(tmp_path / "cache"), NO_PROXY="127.0.0.1")
    return e


def run(program, *args, env, expect=0):
    """Runs a program, asserts its exit code and that no secret is in its output."""
    p = subprocess.run([str(program), *map(str, args)], capture_output=True, text=True, env=env)
    for secret in SECRET_MARKERS:
        assert secret not in p.stdout and secret not in p.stderr, f"{program} {args}"
    assert p.returncode == expect, (
        f"{program} {' '.join(map(str, args))}: exit {p.returncode}, expected {expect}\n"
        f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def assert_no_secret_in(cache_dir):
    for f in Path(cache_dir).rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            for secret in SECRET_MARKERS:
                assert secret.encode() not in data, f


URL = f"s3://{BUCKET}/ds"


def test_info_verify_and_bench_read_the_dataset_from_s3(cli, dataset, env):
    info = run(cli.binary, "info", URL, env=env)
    assert f"dataset      {URL}" in info.stdout
    assert "12" in info.stdout
    verify = run(cli.binary, "verify", URL, env=env)
    assert verify.stdout.startswith(f"{URL}: OK: ")
    bench = run(cli.binary, "bench", URL, "--threads", "1", "--epochs", "1", "--batch-size", "4",
                env=env)
    assert bench.stdout.strip()
    cached = list(Path(env["SHARDPACK_CACHE_DIR"]).rglob("url"))
    assert [p.read_text() for p in cached] == [URL + "\n"]  # keyed by the s3:// URL
    assert_no_secret_in(env["SHARDPACK_CACHE_DIR"])


def test_every_sample_read_from_s3_equals_the_local_dataset(cli, samples_dir, dataset, env):
    remote = run(samples_dir / "read_dataset", URL, env=env).stdout
    local = run(samples_dir / "read_dataset", dataset, env=env).stdout
    # Per-class counts and mean pixels; the first line is a timing.
    classes = [line for line in remote.splitlines() if line.lstrip().startswith("class ")]
    assert len(classes) == 3
    assert classes == [line for line in local.splitlines() if line.lstrip().startswith("class ")]
    args = ["--epochs", "1", "--batch-size", "4"]
    remote = run(samples_dir / "train_loop", URL, *args, env=env).stdout
    local = run(samples_dir / "train_loop", dataset, *args, env=env).stdout
    checksum = re.search(r"checksum \d+", local)
    assert checksum and checksum.group(0) in remote


def test_a_wrong_secret_is_signature_does_not_match_naming_the_object(cli, dataset, env):
    env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret-0123456789"
    SECRET_MARKERS.append(env["AWS_SECRET_ACCESS_KEY"])
    for command in ("info", "verify"):
        p = run(cli.binary, command, URL, env=env, expect=2)
        assert (f"{URL}/manifest.json: HTTP 403 SignatureDoesNotMatch (the secret key does not "
                "match the access key)") in p.stderr, p.stderr


def test_an_unknown_access_key_is_named(cli, dataset, env):
    env["AWS_ACCESS_KEY_ID"] = "AKIANOSUCHKEY0000000"
    p = run(cli.binary, "info", URL, env=env, expect=2)
    assert f"{URL}/manifest.json: HTTP 403 InvalidAccessKeyId" in p.stderr, p.stderr


def test_temporary_credentials_with_a_session_token_read_and_a_wrong_token_is_named(
        cli, dataset, env, moto, keys):
    sts = moto.client("sts", *keys)
    c = sts.assume_role(RoleArn=ROLE["arn"], RoleSessionName="shardpack-test")["Credentials"]
    SECRET_MARKERS.extend([c["SecretAccessKey"], c["SessionToken"]])
    env.update(AWS_ACCESS_KEY_ID=c["AccessKeyId"], AWS_SECRET_ACCESS_KEY=c["SecretAccessKey"],
               AWS_SESSION_TOKEN=c["SessionToken"])
    assert run(cli.binary, "verify", URL, env=env).stdout.startswith(f"{URL}: OK: ")
    env["AWS_SESSION_TOKEN"] = "not-the-session-token"
    p = run(cli.binary, "info", URL, env=env, expect=2)
    assert f"{URL}/manifest.json: HTTP 400 InvalidToken (the session token is not valid)" \
        in p.stderr, p.stderr
    assert_no_secret_in(env["SHARDPACK_CACHE_DIR"])


def test_a_missing_bucket_and_a_missing_key_are_named(cli, dataset, env):
    p = run(cli.binary, "info", "s3://no-such-bucket/ds", env=env, expect=2)
    assert "s3://no-such-bucket/ds/manifest.json: HTTP 404 NoSuchBucket (the bucket does not " \
           "exist)" in p.stderr, p.stderr
    p = run(cli.binary, "verify", f"s3://{BUCKET}/elsewhere", env=env, expect=2)
    assert f"s3://{BUCKET}/elsewhere/manifest.json: HTTP 404 NoSuchKey (no object has this " \
           "key)" in p.stderr, p.stderr


def test_writing_to_s3_is_refused_saying_how_to_upload(cli, image_tree, env, tmp_path):
    p = run(cli.binary, "convert", image_tree.root, f"s3://{BUCKET}/new", "--size", "8x8",
            "--quiet", env=env, expect=2)
    assert "writing to S3 is not supported yet" in p.stderr, p.stderr
    assert f"aws s3 sync DIR s3://{BUCKET}/new" in p.stderr, p.stderr


class FaultyProxy:
    """Relays 127.0.0.1:port to moto, with one fault: either the first connection whose
    responses reach `drop_after` bytes is cut there (moto closes each connection after
    one response, so this picks the first response that long), or the first connection
    is answered with S3's 503 SlowDown without reaching moto (`slow_down`)."""

    def __init__(self, upstream_port, drop_after=None, slow_down=False):
        self.upstream_port = upstream_port
        self.drop_after = drop_after
        self.slow_down = slow_down
        self.connections = 0
        self.faults = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            first = self.connections == 1
            threading.Thread(target=self._serve, args=(client, first), daemon=True).start()

    def _serve(self, client, first):
        if first and self.slow_down:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = client.recv(65536)
                if not chunk:
                    break
                request += chunk
            body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                    b'<Message>Please reduce your request rate.</Message></Error>')
            client.sendall(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                           b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
            self.faults += 1
            client.close()
            return
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        limit = self.drop_after

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
        sent = 0
        try:
            while data := upstream.recv(65536):
                if limit is not None and sent + len(data) >= limit:
                    with self.lock:
                        cut = self.faults == 0
                        self.faults += cut
                    if cut:
                        client.sendall(data[:limit - sent])
                        break
                    limit = None
                client.sendall(data)
                sent += len(data)
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


@pytest.mark.parametrize("fault", ["dropped", "slow_down"])
def test_a_dropped_connection_or_slow_down_is_retried_and_every_file_checksummed(
        cli, dataset, env, moto, fault):
    # Longer than the manifest's response, shorter than a shard's: cut inside a shard.
    manifest_bytes = (dataset / "manifest.json").stat().st_size
    shard_bytes = (dataset / "shard-00000-of-00003.tfrecord").stat().st_size
    assert shard_bytes > manifest_bytes + 1500
    proxy = FaultyProxy(moto.port, drop_after=manifest_bytes + 1500 if fault == "dropped" else None,
                        slow_down=fault == "slow_down")
    try:
        env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{proxy.port}"
        p = run(cli.binary, "verify", URL, env=env)
        assert p.stdout.startswith(f"{URL}: OK: "), p.stdout  # every file's XXH3-128 matched
        assert proxy.faults == 1
        assert proxy.connections >= 2
    finally:
        proxy.close()
    assert_no_secret_in(env["SHARDPACK_CACHE_DIR"])


def test_the_python_loader_reads_s3_and_delivers_the_local_batches(dataset, env, monkeypatch):
    shardpack = pytest.importorskip(
        "shardpack", reason="the binding is not installed here: run bash "
        "scripts/install-python.sh, then bash scripts/install-interop.sh")
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    for k, v in env.items():
        if k.startswith(("AWS_", "SHARDPACK_", "HOME", "NO_PROXY")):
            monkeypatch.setenv(k, v)

    def batches(path):
        loader = shardpack.Loader(str(path), batch_size=4, framework="numpy", shuffle="none")
        return [(b[0].copy(), b[1].copy()) for b in loader]

    remote, local = batches(URL), batches(dataset)
    assert len(remote) == len(local) == 3
    for (ri, rl), (li, ll) in zip(remote, local):
        assert (ri == li).all() and (rl == ll).all()
    with pytest.raises(shardpack.NotFoundError, match="NoSuchKey") as e:
        shardpack.Loader(f"s3://{BUCKET}/elsewhere", batch_size=4, framework="numpy")
    assert f"s3://{BUCKET}/elsewhere/manifest.json: HTTP 404 NoSuchKey" in str(e.value)
    assert not any(secret in str(e.value) for secret in SECRET_MARKERS)
    assert_no_secret_in(env["SHARDPACK_CACHE_DIR"])
