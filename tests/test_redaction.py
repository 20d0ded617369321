"""One redaction for every recorded environment value and command line."""

import json
import sys

import pytest

from ttfr.measure.executors import Executors
from ttfr.redaction import REDACTED, is_secret_name, redact_argv, redact_env, redact_value
from ttfr.pipeline import interleaved as ab
from ttfr.measure.spec import RunRequest, build_spec

SECRETS = {"HF_TOKEN": "hf_tok_4f9a", "DB_PASSWORD": "pw_77e1", "GPG_PASSPHRASE": "pp_9c2d", "GITHUB_PAT": "pat_31ab",
           "SSH_PRIVATE_KEY": "pk_5e0f", "CLIENT_CERT": "cert_8d44", "API_KEY": "key_12fe", "MY_SECRET": "sec_aa01",
           "AWS_SECRET_ACCESS_KEY": "aws_0b7c", "PASS": "bare_6d6d"}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_secret_names_are_recognised(name):
    assert is_secret_name(name) and redact_value(name, SECRETS[name]) == REDACTED


@pytest.mark.parametrize("name", ["PATH", "PYTHONPATH", "JAX_PLATFORMS", "MKL_NUM_THREADS", "XLA_FLAGS", "HOME",
                                  "TORCHINDUCTOR_AUTOGRAD_CACHE", "OMP_NUM_THREADS", "KEYBOARD_LAYOUT_DIR"])  # fmt: skip
def test_ordinary_names_stay_readable(name):
    assert not is_secret_name(name) and redact_value(name, "/usr/bin:x=1") == "/usr/bin:x=1"


def test_secrets_inside_ordinary_values_and_urls():
    assert redact_value("XLA_FLAGS", "--xla_dump_to=/tmp --x_token=abc,y=2") == f"--xla_dump_to=/tmp --x_token={REDACTED},y=2"
    assert redact_value("PIP_INDEX_URL", "https://me:hunter2@example.org/simple") == f"https://me:{REDACTED}@example.org/simple"


def test_command_lines_keep_their_shape():
    argv = ["ttfr", "ab", "--b-env", "HF_TOKEN=abc", "--a-env=DB_PASSWORD=def", "--token", "ghi", "--api-key=jkl",
            "--cases", "numpy_matmul_64_f32", "--out", "/tmp/x"]  # fmt: skip
    assert redact_argv(argv) == ["ttfr", "ab", "--b-env", f"HF_TOKEN={REDACTED}", f"--a-env=DB_PASSWORD={REDACTED}",
                                 "--token", REDACTED, f"--api-key={REDACTED}", "--cases", "numpy_matmul_64_f32",
                                 "--out", "/tmp/x"]  # fmt: skip
    assert redact_env({"HF_TOKEN": "x", "JAX_PLATFORMS": "cpu"}) == {"HF_TOKEN": REDACTED, "JAX_PLATFORMS": "cpu"}


class _Quick:
    """A fake executor: every run succeeds at once (the secrets are what is tested)."""

    def __call__(self, job, env, timeout_s, python=None):
        from conftest import PASSED_CHECK, fake_record, fake_result, fake_warm

        return fake_result(fake_record(check=PASSED_CHECK if job.check else None,
                                       warm=fake_warm() if job.samples else None))  # fmt: skip


def test_no_secret_of_an_ab_run_reaches_any_file_it_writes(tmp_path, monkeypatch, capsys):
    # The reported leak: --a-env/--b-env values in plan.json, both manifests, comparison.json
    # and comparison.md (the pull-request comment), and on the command line.
    for name, value in SECRETS.items():
        monkeypatch.setenv(f"XLA_{name}", value)  # an allowed prefix with a secret name
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_x_token=flag_tok_19")
    a_env = [f"{name}={value}" for name, value in list(SECRETS.items())[:5]]
    b_env = [f"{name}={value}" for name, value in list(SECRETS.items())[5:]]
    argv = ["ttfr", "ab", *[w for item in a_env for w in ("--a-env", item)], *[w for item in b_env for w in ("--b-env", item)]]
    monkeypatch.setattr(sys, "argv", argv)
    run = build_spec(RunRequest(backends="numpy", workloads="matmul", sizes="64", policies="cold-cache,warm", seed=3))
    arms = (ab.Arm("A", sys.executable, ab.parse_env(a_env)), ab.Arm("B", sys.executable, ab.parse_env(b_env)))
    outcome = ab.execute(
        ab.AbSpec(run, arms, 3, 3, None, None), tmp_path, command_line=argv, executors=Executors(worker=_Quick())
    )
    written = {p: p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()}
    assert {p.name for p in written} >= {"plan.json", "manifest.json", "comparison.json", "comparison.md"}
    for value in [*SECRETS.values(), "flag_tok_19"]:
        leaked = [str(p) for p, text in written.items() if value in text]
        assert leaked == [], f"{value} leaked into {leaked}"
    arm_b = json.loads((outcome.root / "B" / "plan.json").read_text())["arm"]
    assert arm_b["env"]["API_KEY"] == REDACTED  # the name stays, so a reader knows it was set
    assert f"HF_TOKEN={REDACTED}" in (outcome.root / "comparison.md").read_text()


def test_free_text_loses_every_secret_value_of_the_environment_and_inline_pairs():
    from ttfr.redaction import redact_text

    env = {"HF_TOKEN": "hf_abcdef123", "PATH": "/usr/bin", "DB_PASSWORD": "s3cr3t!", "MY_PIN": "12"}
    text = (
        "Traceback: token hf_abcdef123 rejected\nconnecting to postgres://me:pw0rd@db/x with s3cr3t!\n"
        "XLA_FLAGS=--xla_api_key=K123 ok; PATH=/usr/bin; pin 12"
    )
    out = redact_text(text, env)
    for secret in ("hf_abcdef123", "pw0rd", "s3cr3t!", "K123"):
        assert secret not in out
    assert "PATH=/usr/bin" in out and "pin 12" in out  # not secrets, and too short to hunt for
    assert redact_text(None, env) is None and redact_text("", env) == ""


@pytest.mark.parametrize("name", ["MYSQL_PWD", "HTTP_AUTHORIZATION", "JWT", "BEARER", "SESSION_ID", "AWS_ACCESSKEY",
                                  "my_jwt_secret", "PG_PWD", "db.pwd", "X_BEARER_TOKEN", "FLASK_SESSION_KEY"])  # fmt: skip
def test_more_secret_names_are_recognised(name):
    assert is_secret_name(name) and redact_value(name, "v4lue") == REDACTED


@pytest.mark.parametrize("name", ["PWD", "OLDPWD", "PATH", "HOSTNAME", "LANG"])
def test_the_working_directory_is_not_a_secret(name):
    # `PWD` is the shell's current directory: readable, while `MYSQL_PWD` (a component) is a password.
    assert not is_secret_name(name) and redact_value(name, "/home/me") == "/home/me"
    assert redact_argv([f"{name}=/home/me", "MYSQL_PWD=hunter2"]) == [f"{name}=/home/me", f"MYSQL_PWD={REDACTED}"]


HEADER_AND_ITEM_SECRETS = [
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig_x-1", "eyJhbGciOiJIUzI1NiJ9", "Authorization: Bearer <redacted>"),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNz' https://x", "dXNlcjpwYXNz", "'Authorization: Basic <redacted>' https://x"),
    ("proxy-authorization: Digest username=me, response=0a1b2c3d", "0a1b2c3d", "proxy-authorization: Digest <redacted>"),
    ("retrying with Bearer tok.en_42= after 401", "tok.en_42", "retrying with Bearer <redacted> after 401"),
    ('{"token": "tok_99", "user": "me"}', "tok_99", '{"token": "<redacted>", "user": "me"}'),
    ("{'password': 'pw 42 x', 'n': 1}", "pw 42 x", "{'password': '<redacted>', 'n': 1}"),
    ("token: plain_77 more words\nnext line", "plain_77", "token: <redacted>\nnext line"),
    ("config: {api_key: k_9x9, size: 3}", "k_9x9", "config: {api_key: <redacted>"),
    ('session_id = 1 and SESSION_ID: "s3ss10n"', "s3ss10n", 'SESSION_ID: "<redacted>"'),
    ('db_password="two words" x=1', "two words", 'db_password="<redacted>" x=1'),
]


@pytest.mark.parametrize("text, secret, kept", HEADER_AND_ITEM_SECRETS, ids=[t[1] for t in HEADER_AND_ITEM_SECRETS])
def test_free_text_loses_http_credentials_and_secret_items(text, secret, kept):
    from ttfr.redaction import redact_text

    out = redact_text(text)
    assert secret not in out and kept in out, out


def test_free_text_keeps_what_only_looks_like_an_item():
    from ttfr.redaction import redact_text

    text = ("KeyError: 'HF_TOKEN'\nat 12:30:00 see https://example.org:8080/x, PYTHONPATH=/a:/b\n"
            'File "/x/y.py", line 3, in <module>\n{"passed": true, "user": "me"} PWD=/home/me')  # fmt: skip
    assert redact_text(text) == text


@pytest.mark.parametrize("name", ["--tokenizer", "TOKENIZERS_PARALLELISM", "max_new_tokens", "--max-tokens", "--pin-memory",
                                  "--num-sessions", "--key-size", "--sig", "TOKEN_LIMIT", "KEY_FILE"])  # fmt: skip
def test_ml_options_that_merely_contain_a_secret_word_stay_readable(name):
    """`--tokenizer gpt2` or `--key-size 256` hidden would make a command's record unreadable
    (and, for a command, unresumable); their values are not secrets."""
    assert not is_secret_name(name)
    assert redact_argv(["python", "t.py", name, "gpt2"]) == ["python", "t.py", name, "gpt2"]


@pytest.mark.parametrize("name", ["apiToken", "GH_TOKEN", "AWS_SESSION_TOKEN", "--access-token", "SESSION"])
def test_tokens_and_sessions_are_still_secrets(name):
    assert is_secret_name(name)
