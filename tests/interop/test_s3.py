"""s3:// datasets against a real S3 server on loopback: moto's (moto[server]), with
signatures enforced. The first nine requests moto takes unauthenticated
(INITIAL_NO_AUTH_ACTION_COUNT=9) create an IAM user, give it s3:* and sts:AssumeRole
through an inline policy, create its access key and the bucket, a role allowed s3:*
(for temporary credentials with a session token), and a second user allowed only to list
buckets (AccessDenied for reading); from then on every request must be signed. A
converted dataset is uploaded with boto3, then read with the shardpack CLI, the C++
samples (Dataset and Loader) and the Python binding, through AWS_ENDPOINT_URL (path-style
addressing), with the credentials in the environment (or from a credential_process, a
container endpoint or an instance metadata service served here). shardpack's own writing
to S3 (convert's DST s3://...: staging, uploads and parts over several connections, the
manifest last, multipart, a failed upload resumed, an overwrite) is tested against the
same server.

A small TCP proxy in front of moto drops a connection mid-download, or answers a request
with S3's 503 SlowDown, to show that both are retried and the files still checksummed.
Every stdout and stderr of these runs (run()), and every file of the caches they fill, is
checked for the secret keys and session tokens in use, the wrong ones included."""

import http.server
import json
import os
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("boto3", reason="moto[server] is not installed here: run bash "
                    "scripts/install-interop.sh")
from moto_s3 import ALLOW, Moto, Proxy  # noqa: E402

BUCKET = "shardpack-data"
SECRET_MARKERS = []  # secret keys and session tokens used here: never in any output
ROLE = {}  # the ARN of the role for temporary credentials
LISTER = {}  # the keys of a user allowed s3:ListBucket only


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    m = Moto(tmp_path_factory.mktemp("moto"), unauthenticated=9)
    yield m
    m.stop()



@pytest.fixture(scope="module")
def keys(moto):
    """The nine unauthenticated requests; from here on moto checks signatures."""
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
    iam.create_user(UserName="lister")
    iam.put_user_policy(UserName="lister", PolicyName="list-only",
                        PolicyDocument=ALLOW % '"s3:ListBucket"')
    lister = iam.create_access_key(UserName="lister")["AccessKey"]
    LISTER.update(id=lister["AccessKeyId"], secret=lister["SecretAccessKey"])
    SECRET_MARKERS.extend([key["SecretAccessKey"], lister["SecretAccessKey"]])
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
             SHARDPACK_CACHE_DIR=str(tmp_path / "cache"), NO_PROXY="127.0.0.1",
             # A machine running these tests may be an EC2 instance with a role.
             AWS_EC2_METADATA_DISABLED="true")
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


def test_credentials_without_the_right_to_read_are_access_denied_a_permission_error(
        cli, dataset, env, monkeypatch):
    env.update(AWS_ACCESS_KEY_ID=LISTER["id"], AWS_SECRET_ACCESS_KEY=LISTER["secret"])
    for command in ("info", "verify"):
        p = run(cli.binary, command, URL, env=env, expect=2)
        assert (f"{URL}/manifest.json: HTTP 403 AccessDenied (these credentials may not read "
                "this object)") in p.stderr, p.stderr
    shardpack = binding_in(env, monkeypatch)
    with pytest.raises(shardpack.PermissionDeniedError, match="HTTP 403 AccessDenied") as e:
        shardpack.Dataset(URL)
    assert isinstance(e.value, PermissionError) and e.value.code == "PermissionDenied"
    assert_no_secret_in(env["SHARDPACK_CACHE_DIR"])


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


class CredentialsServer:
    """An instance metadata service (IMDSv2: a session token first) and a container
    credentials endpoint (an Authorization token) on loopback, answering with `creds`
    (moto's temporary credentials, which moto then checks); every request logged."""

    def __init__(self, creds):
        body = json.dumps({"Code": "Success", "AccessKeyId": creds["AccessKeyId"],
                           "SecretAccessKey": creds["SecretAccessKey"],
                           "Token": creds["SessionToken"],
                           "Expiration": "2999-01-01T00:00:00Z"}).encode()
        self.requests = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self, status, data=b""):
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self):
                server.requests.append(f"PUT {self.path}")
                ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
                ok = self.path == "/latest/api/token" and ttl
                self.answer(200, b"imds-session") if ok else self.answer(400)

            def do_GET(self):
                server.requests.append(f"GET {self.path}")
                roles = "/latest/meta-data/iam/security-credentials/"
                if self.path.startswith(roles):
                    if self.headers.get("X-aws-ec2-metadata-token") != "imds-session":
                        return self.answer(401)
                    return self.answer(200, b"trainer\n" if self.path == roles else body)
                if self.path == "/container/credentials":
                    if self.headers.get("Authorization") != "container-secret":
                        return self.answer(403)
                    return self.answer(200, body)
                self.answer(404)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


def test_credentials_from_the_instance_a_container_and_a_credential_process_are_used(
        cli, dataset, env, moto, keys, tmp_path):
    sts = moto.client("sts", *keys)
    c = sts.assume_role(RoleArn=ROLE["arn"], RoleSessionName="instance")["Credentials"]
    SECRET_MARKERS.extend([c["SecretAccessKey"], c["SessionToken"]])
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_EC2_METADATA_DISABLED"):
        del env[k]
    server = CredentialsServer(c)
    try:
        # The instance's role, through IMDSv2; one round trip for the whole process,
        # whatever the number of connections.
        imds = dict(env, AWS_EC2_METADATA_SERVICE_ENDPOINT=server.url)
        assert run(cli.binary, "verify", URL, env=imds).stdout.startswith(f"{URL}: OK: ")
        assert server.requests == [
            "PUT /latest/api/token", "GET /latest/meta-data/iam/security-credentials/",
            "GET /latest/meta-data/iam/security-credentials/trainer"], server.requests
        # A container's endpoint with its token; a wrong token is named, the token not.
        container = dict(env, AWS_CONTAINER_CREDENTIALS_FULL_URI=f"{server.url}/container/"
                         "credentials", AWS_CONTAINER_AUTHORIZATION_TOKEN="container-secret",
                         AWS_EC2_METADATA_DISABLED="true")
        assert run(cli.binary, "verify", URL, env=container).stdout.startswith(f"{URL}: OK: ")
        container["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "not-the-container-secret"
        p = run(cli.binary, "info", URL, env=container, expect=2)
        assert ("the container's credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI): "
                f"{server.url}/container/credentials: HTTP 403") in p.stderr, p.stderr
        assert "container-secret" not in p.stderr
    finally:
        server.close()
    # A profile's credential_process (as `aws configure export-credentials` is used).
    script = tmp_path / "creds.sh"
    script.write_text("#!/bin/sh\ncat <<'EOF'\n" + json.dumps(
        {"Version": 1, "AccessKeyId": c["AccessKeyId"], "SecretAccessKey": c["SecretAccessKey"],
         "SessionToken": c["SessionToken"]}) + "\nEOF\n")
    (Path(env["HOME"]) / ".aws").mkdir()
    (Path(env["HOME"]) / ".aws" / "config").write_text(
        f"[profile trainer]\ncredential_process = /bin/sh {script}\n")
    process = dict(env, AWS_PROFILE="trainer", AWS_EC2_METADATA_DISABLED="true")
    assert run(cli.binary, "verify", URL, env=process).stdout.startswith(f"{URL}: OK: ")
    assert_no_secret_in(env["SHARDPACK_CACHE_DIR"])


def test_an_overwrite_whose_upload_failed_still_deletes_the_replaced_objects_on_rerun(
        cli, image_tree, env, moto, keys, tmp_path):
    url = f"s3://{BUCKET}/replaced-later"
    run(cli.binary, "convert", image_tree.root, url, "--size", "16x16", "--shard-records", "4",
        "--quiet", env=env)
    args = ["convert", image_tree.root, url, "--size", "16x16", "--shard-records", "12",
            "--overwrite", "--staging", tmp_path / "staging", "--quiet"]
    proxy = PutFailingProxy(moto.port, fail="shard-00000-of-00001.tfrecord")
    try:
        run(cli.binary, *args, env=dict(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}"),
            expect=2)
    finally:
        proxy.close()
    # The old manifest is gone, its shards are not; the staging directory remembers them.
    left = objects(moto, keys, "replaced-later")
    assert "manifest.json" not in left and "shard-00002-of-00003.tfrecord" in left, left
    assert (tmp_path / "staging" / ".shardpack-replaced-manifest.json").is_file()
    p = run(cli.binary, *args, env=env)
    assert "deleted: 6 objects of the replaced dataset" in p.stdout, p.stdout
    assert sorted(objects(moto, keys, "replaced-later")) == [
        "manifest.json", "rejects.tsv", "shard-00000-of-00001.idx",
        "shard-00000-of-00001.tfrecord"]
    assert run(cli.binary, "verify", url, env=env).stdout.startswith(f"{url}: OK: ")


def test_s3_over_https_checks_the_certificate_against_aws_ca_bundle(cli, dataset, env, moto,
                                                                    tmp_path):
    """nginx with a self-signed certificate in front of moto (TLS ends there; the Host
    header is passed on, so the signatures still hold)."""
    nginx = Path("/usr/sbin/nginx")
    if not nginx.exists() or subprocess.run(["which", "openssl"], capture_output=True).returncode:
        pytest.skip("nginx-light and openssl are needed (scripts/install-deps.sh)")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", tmp_path / "key.pem", "-out", tmp_path / "cert.pem"],
                   check=True, capture_output=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "nginx.conf").write_text(f"""daemon off; master_process off;
pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;
events {{ }}
http {{
  access_log off; client_body_temp_path {tmp_path}/body; proxy_temp_path {tmp_path}/proxy;
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {tmp_path}/cert.pem; ssl_certificate_key {tmp_path}/key.pem;
    client_max_body_size 0;
    location / {{ proxy_pass {moto.endpoint}; proxy_set_header Host $http_host; }}
  }}
}}
""")
    proc = subprocess.Popen([str(nginx), "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")])
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, \
                    (tmp_path / "error.log").read_text()
                time.sleep(0.05)
        https = dict(env, AWS_ENDPOINT_URL=f"https://127.0.0.1:{port}")
        https.pop("CURL_CA_BUNDLE", None)  # the machine's own, where one is set
        p = run(cli.binary, "info", URL, env=https, expect=2)
        assert "AWS_CA_BUNDLE for s3://" in p.stderr, p.stderr
        https["AWS_CA_BUNDLE"] = str(tmp_path / "cert.pem")
        assert run(cli.binary, "verify", URL, env=https).stdout.startswith(f"{URL}: OK: ")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_missing_bucket_and_a_missing_key_are_named(cli, dataset, env):
    p = run(cli.binary, "info", "s3://no-such-bucket/ds", env=env, expect=2)
    assert "s3://no-such-bucket/ds/manifest.json: HTTP 404 NoSuchBucket (the bucket does not " \
           "exist)" in p.stderr, p.stderr
    p = run(cli.binary, "verify", f"s3://{BUCKET}/elsewhere", env=env, expect=2)
    assert f"s3://{BUCKET}/elsewhere/manifest.json: HTTP 404 NoSuchKey (no object has this " \
           "key)" in p.stderr, p.stderr


def test_a_partitioned_conversion_to_s3_or_an_s3_source_is_refused_saying_how(
        cli, image_tree, env, tmp_path):
    p = run(cli.binary, "convert", image_tree.root, f"s3://{BUCKET}/new", "--size", "8x8",
            "--part", "0/2", "--quiet", env=env, expect=2)
    assert "a partitioned conversion (part, --mpi) cannot write to s3://" in p.stderr, p.stderr
    assert f"aws s3 sync DIR s3://{BUCKET}/new" in p.stderr, p.stderr
    p = run(cli.binary, "convert", f"s3://{BUCKET}/ds", tmp_path / "out", "--size", "8x8",
            "--quiet", env=env, expect=2)
    assert "this path must be a local file or directory" in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


# ---- Writing to S3 ---------------------------------------------------------------------

def objects(moto, keys, prefix):
    """{name: size} of the objects under s3://BUCKET/PREFIX/."""
    listed = moto.client("s3", *keys).list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/")
    return {o["Key"][len(prefix) + 1:]: o["Size"] for o in listed.get("Contents", [])}


def requests_logged(moto, prefix):
    """The requests moto logged for objects under PREFIX, in order: "PUT name?query"."""
    moto.log.flush()
    found = []
    for line in Path(moto.log.name).read_text().splitlines():
        # moto colours some lines (DELETE) with terminal escapes.
        m = re.search(r'"(?:\x1b\[[0-9;]*m)*(PUT|POST|DELETE|HEAD|GET) /%s/%s/([^ ]*) HTTP'
                      % (BUCKET, prefix), line)
        if m:
            found.append(f"{m.group(1)} {m.group(2)}")
    return found


def test_convert_to_s3_uploads_the_manifest_last_and_reads_back_as_the_local_dataset(
        cli, samples_dir, dataset, image_tree, env, moto, keys):
    url = f"s3://{BUCKET}/written"
    p = run(cli.binary, "convert", image_tree.root, url, "--size", "16x16", "--shard-records",
            "4", "--quiet", env=env)
    assert "uploaded: 8 objects" in p.stdout, p.stdout  # 3 shards, 3 indexes, rejects, manifest
    local = {f.name: f.stat().st_size for f in dataset.iterdir() if f.name != ".lock"}
    assert objects(moto, keys, "written") == local
    puts = [r for r in requests_logged(moto, "written") if r.startswith("PUT ")]
    assert len(puts) == len(local) and puts[-1] == "PUT manifest.json", puts
    # The staging directory (under the cache by default) is gone once uploaded.
    staging = Path(env["SHARDPACK_CACHE_DIR"]) / "staging"
    assert not staging.exists() or not any(staging.iterdir())
    assert run(cli.binary, "verify", url, env=env).stdout.startswith(f"{url}: OK: ")
    remote = run(samples_dir / "train_loop", url, "--epochs", "1", "--batch-size", "4",
                 env=env).stdout
    local_run = run(samples_dir / "train_loop", dataset, "--epochs", "1", "--batch-size", "4",
                    env=env).stdout
    checksum = re.search(r"checksum \d+", local_run)
    assert checksum and checksum.group(0) in remote
    # A dataset is not replaced without overwrite.
    p = run(cli.binary, "convert", image_tree.root, url, "--size", "16x16", "--quiet", env=env,
            expect=2)
    assert f"{url} holds a dataset (manifest.json): overwrite replaces it" in p.stderr, p.stderr


def test_overwrite_replaces_the_dataset_and_deletes_only_the_objects_it_replaced(
        cli, image_tree, env, moto, keys, tmp_path):
    url = f"s3://{BUCKET}/replaced"
    run(cli.binary, "convert", image_tree.root, url, "--size", "16x16", "--shard-records", "4",
        "--quiet", env=env)
    moto.client("s3", *keys).put_object(Bucket=BUCKET, Key="replaced/README.txt", Body=b"mine")
    before = objects(moto, keys, "replaced")
    assert "shard-00002-of-00003.tfrecord" in before
    # One shard instead of three: the six files of the old shards are listed by nothing.
    p = run(cli.binary, "convert", image_tree.root, url, "--size", "16x16", "--shard-records",
            "12", "--overwrite", "--quiet", env=env)
    assert "deleted: 6 objects of the replaced dataset" in p.stdout, p.stdout
    after = objects(moto, keys, "replaced")
    assert sorted(after) == ["README.txt", "manifest.json", "rejects.tsv",
                             "shard-00000-of-00001.idx", "shard-00000-of-00001.tfrecord"], after
    logged = requests_logged(moto, "replaced")
    # The old manifest deleted before any upload; the old shards after the new manifest.
    overwrite = logged.index("DELETE manifest.json")
    assert min(i for i, r in enumerate(logged) if r.startswith("PUT shard-00000-of-00001")) \
        > overwrite, logged
    manifest_put = len(logged) - 1 - logged[::-1].index("PUT manifest.json")
    deletes = [i for i, r in enumerate(logged) if r.startswith("DELETE shard-")]
    assert len(deletes) == 6 and min(deletes) > manifest_put, logged
    assert run(cli.binary, "verify", url, env=env).stdout.startswith(f"{url}: OK: ")


class PutFailingProxy(Proxy):
    """Answers every PUT whose path contains `fail` with S3's 403 AccessDenied without
    relaying it; relays the rest."""

    def __init__(self, upstream_port, fail):
        self.fail = fail.encode()
        super().__init__(upstream_port)

    @property
    def failed(self):
        return self.faults

    def serve(self, client, first):
        head = self.read_head(client)
        if not head:
            client.close()
            return
        request_line = head.split(b"\r\n", 1)[0]
        if request_line.startswith(b"PUT ") and self.fail in request_line:
            self.answer_error(client, "403 Forbidden", "AccessDenied", "Access Denied")
            return
        self.relay(client, head)


@pytest.mark.parametrize("connections", ["1", "4"])
def test_a_failed_upload_publishes_no_manifest_and_the_same_command_again_does(
        cli, image_tree, env, moto, keys, tmp_path, connections):
    prefix = f"halfway-{connections}"
    url = f"s3://{BUCKET}/{prefix}"
    staging = tmp_path / "staging"
    args = ["convert", image_tree.root, url, "--size", "16x16", "--shard-records", "4",
            "--staging", staging, "--quiet"]
    proxy = PutFailingProxy(moto.port, fail="shard-00001-of-00003.tfrecord")
    try:
        failing = dict(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}",
                       SHARDPACK_CONNECTIONS=connections)
        p = run(cli.binary, *args, env=failing, expect=2)
    finally:
        proxy.close()
    assert proxy.failed == 1  # AccessDenied is not retried
    assert f"{url}/shard-00001-of-00003.tfrecord: HTTP 403 AccessDenied" in p.stderr, p.stderr
    assert f"nothing was published: {url} has no manifest.json" in p.stderr, p.stderr
    assert f"the converted dataset is kept in {staging}" in p.stderr, p.stderr
    uploaded = objects(moto, keys, prefix)
    assert "manifest.json" not in uploaded
    if connections == "1":  # in the manifest's order: the first shard went up before
        assert "shard-00000-of-00003.tfrecord" in uploaded
    assert (staging / "manifest.json").is_file()
    assert_no_secret_in(staging)
    # Again, without the fault (and over the default 16 connections): the conversion is
    # found complete, what was uploaded is not sent again, the rest and then the manifest
    # are.
    p = run(cli.binary, *args, env=env)
    assert "uploaded: " in p.stdout, p.stdout
    # Over both runs every object reached moto once (the refused PUT never did).
    puts = [r for r in requests_logged(moto, prefix) if r.startswith("PUT ")]
    assert len(set(puts)) == len(puts) == 8, puts
    assert puts[-1] == "PUT manifest.json", puts
    assert not staging.exists()
    assert run(cli.binary, "verify", url, env=env).stdout.startswith(f"{url}: OK: ")


class DelayingProxy(Proxy):
    """Holds every request `delay` seconds before relaying it, counting the requests held
    at once: what shows that files move over several connections at a time. (A client
    sends its next request only once answered, so no more are held than it has
    connections.)"""

    def __init__(self, upstream_port, delay):
        self.delay = delay
        self.in_flight = 0
        self.most_in_flight = 0
        super().__init__(upstream_port)

    def serve(self, client, first):
        head = self.read_head(client)
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(self.delay)
        with self.lock:
            self.in_flight -= 1
        self.relay(client, head)


def test_files_are_downloaded_and_uploaded_over_as_many_connections_as_asked(
        cli, image_tree, dataset, env, moto, keys):
    url = f"s3://{BUCKET}/parallel"
    proxy = DelayingProxy(moto.port, delay=0.3)
    try:
        slow = dict(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}",
                    SHARDPACK_CONNECTIONS="3")
        # 7 files go up 3 at a time (each PUT, then its HEAD), the manifest after them.
        run(cli.binary, "convert", image_tree.root, url, "--size", "16x16", "--shard-records",
            "4", "--quiet", env=slow)
        assert 2 <= proxy.most_in_flight <= 3, proxy.most_in_flight
        puts = [r for r in requests_logged(moto, "parallel") if r.startswith("PUT ")]
        assert len(puts) == 8 and puts[-1] == "PUT manifest.json", puts
        # And down again, 3 at a time, into an empty cache.
        proxy.most_in_flight = 0
        assert run(cli.binary, "verify", url, env=slow).stdout.startswith(f"{url}: OK: ")
        assert 2 <= proxy.most_in_flight <= 3, proxy.most_in_flight
        slow["SHARDPACK_CONNECTIONS"] = "1"
        proxy.most_in_flight = 0
        assert run(cli.binary, "verify", url, env=slow).stdout.startswith(f"{url}: OK: ")
        assert proxy.most_in_flight == 1, proxy.most_in_flight
    finally:
        proxy.close()


def test_a_shard_above_the_multipart_threshold_is_uploaded_in_parts(
        cli, image_tree, env, moto, keys):
    url = f"s3://{BUCKET}/multipart"
    env.update(SHARDPACK_S3_MULTIPART_BYTES="5M", SHARDPACK_S3_PART_BYTES="5M")
    # 12 samples of 512x512x3: one 9.4 MB shard, two parts (moto, as S3, refuses parts
    # below 5 MiB but the last).
    run(cli.binary, "convert", image_tree.root, url, "--size", "512x512", "--shard-records",
        "12", "--quiet", env=env)
    shard = "shard-00000-of-00001.tfrecord"
    assert objects(moto, keys, "multipart")[shard] > 5 << 20
    logged = requests_logged(moto, "multipart")
    assert f"POST {shard}?uploads=" in logged, logged
    parts = [r for r in logged if r.startswith(f"PUT {shard}?partNumber=")]
    # The parts go up at once, over two connections: in either order.
    assert sorted(r.split("=")[1].split("&")[0] for r in parts) == ["1", "2"], logged
    assert any(r.startswith(f"POST {shard}?uploadId=") for r in logged), logged
    assert logged.index([r for r in logged if r.startswith("PUT manifest.json")][0]) > \
        max(logged.index(p) for p in parts)
    assert run(cli.binary, "verify", url, env=env).stdout.startswith(f"{url}: OK: ")


def test_parts_go_up_at_once_and_a_failed_part_aborts_the_upload(
        cli, image_tree, env, moto, keys, tmp_path):
    url = f"s3://{BUCKET}/parts"
    env.update(SHARDPACK_S3_MULTIPART_BYTES="5M", SHARDPACK_S3_PART_BYTES="5M",
               SHARDPACK_CONNECTIONS="3")
    # 12 samples of 640x640x3: one 14.7 MB shard, three parts.
    args = ["convert", image_tree.root, url, "--size", "640x640", "--shard-records", "12",
            "--staging", tmp_path / "staging", "--quiet"]
    shard = "shard-00000-of-00001.tfrecord"
    proxy = PutFailingProxy(moto.port, fail="partNumber=2&")
    try:
        p = run(cli.binary, *args, env=dict(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}"),
                expect=2)
    finally:
        proxy.close()
    assert f"part 2 of 3: {url}/{shard}: HTTP 403 AccessDenied" in p.stderr, p.stderr
    logged = requests_logged(moto, "parts")
    assert any(r.startswith(f"DELETE {shard}?uploadId=") for r in logged), logged  # aborted
    assert not any(r.startswith("PUT manifest.json") for r in logged), logged
    # Again, each request held 0.3 s: the three parts are sent at once.
    proxy = DelayingProxy(moto.port, delay=0.3)
    try:
        run(cli.binary, *args, env=dict(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}"))
    finally:
        proxy.close()
    assert 2 <= proxy.most_in_flight <= 3, proxy.most_in_flight
    logged = requests_logged(moto, "parts")
    completed = [i for i, r in enumerate(logged) if r.startswith(f"POST {shard}?uploadId=")]
    assert len(completed) == 1 and logged.index("PUT manifest.json") > completed[0], logged
    assert run(cli.binary, "verify", url, env=env).stdout.startswith(f"{url}: OK: ")


def test_a_wrong_secret_names_signature_does_not_match_and_publishes_nothing(
        cli, image_tree, env, moto, keys, tmp_path):
    env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret-for-writing-0123"
    SECRET_MARKERS.append(env["AWS_SECRET_ACCESS_KEY"])
    url = f"s3://{BUCKET}/refused"
    p = run(cli.binary, "convert", image_tree.root, url, "--size", "16x16", "--staging",
            tmp_path / "staging", "--quiet", env=env, expect=2)
    assert (f"{url}/manifest.json: HTTP 403 SignatureDoesNotMatch (the secret key does not "
            "match the access key)") in p.stderr, p.stderr
    assert objects(moto, keys, "refused") == {}
    assert not (tmp_path / "staging").exists()  # found before converting anything


def binding_in(env, monkeypatch):
    """The Python binding, with this process's AWS_*, SHARDPACK_*, HOME and NO_PROXY made
    those of `env` (the binding reads them where the CLI runs would)."""
    shardpack = pytest.importorskip(
        "shardpack", reason="the binding is not installed here: run bash "
        "scripts/install-python.sh, then bash scripts/install-interop.sh")
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    for k, v in env.items():
        if k.startswith(("AWS_", "SHARDPACK_", "HOME", "NO_PROXY")):
            monkeypatch.setenv(k, v)
    return shardpack


def test_the_python_convert_writes_to_s3_through_a_staging_directory(
        cli, image_tree, env, monkeypatch, tmp_path, moto, keys):
    shardpack = binding_in(env, monkeypatch)
    url = f"s3://{BUCKET}/from-python"
    s = shardpack.convert(image_tree.root, url, size=16, shard_records=4,
                          staging=tmp_path / "staging")
    assert s.written == 12 and s.uploaded_files == 8 and s.staging == str(tmp_path / "staging")
    assert not (tmp_path / "staging").exists()
    assert "manifest.json" in objects(moto, keys, "from-python")
    assert run(cli.binary, "verify", url, env=env).stdout.startswith(f"{url}: OK: ")


class FaultyProxy(Proxy):
    """One fault: either the first connection whose response reaches `drop_after` bytes is
    cut there (moto closes each connection after one response, so this picks the first
    response that long), or the first connection is answered with S3's 503 SlowDown
    without reaching moto (`slow_down`)."""

    def __init__(self, upstream_port, drop_after=None, slow_down=False):
        self.drop_after = drop_after
        self.slow_down = slow_down
        super().__init__(upstream_port)

    def serve(self, client, first):
        if first and self.slow_down:
            self.read_head(client)
            self.answer_error(client, "503 Slow Down", "SlowDown",
                              "Please reduce your request rate.")
            return
        self.relay(client, cut_at=self.drop_after)


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
    shardpack = binding_in(env, monkeypatch)

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
