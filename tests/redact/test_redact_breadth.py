"""Token shapes at the breadth of gitleaks' default rules (issue 24, items 3-4).

Every built-in kind has a positive here or in tests/redact/test_redact.py; every
new shape has look-alikes that must stay untouched; the list of
detected secrets in docs/secrets.md is generated from the detector table (``_redact.TITLES``).

The samples are our own, built as gitleaks' rule generators build theirs
(``cmd/generate/config/rules/*.go``: the vendor's prefix plus a random body
of the rule's alphabet and length), at run time, so this file holds no
string a secret scanner would flag.
"""

from __future__ import annotations

import base64
import re
import string
from pathlib import Path

import pytest
from test_redact import _B62, POSITIVES, _b64url, body

from ststrace import Session
from ststrace._guard import MessageGuard
from ststrace._redact import KINDS, Redactor, describe, marker, readme_list, readme_uncovered

HEX = "0123456789abcdef"
UPPER = string.ascii_uppercase + string.digits
LOWER = string.ascii_lowercase + string.digits
B64 = _B62 + "+/"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
SECRETS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "secrets.md"

#: (kind, the secret, text with {} where it goes)
BREADTH: list[tuple[str, str, str]] = [
    # Slack: the browser-session token and the "d" cookie the README's xox?- promised.
    ("slack_token", "xoxc-" + "1234567890-1234567890123-" + body(40), "token={}"),
    ("slack_token", "xoxd-" + body(30) + "%2F" + body(20) + "%3D", "Cookie: d={}; d-s=1"),
    ("gitlab_token", "glpat-" + body(20), "GITLAB_TOKEN={}"),
    ("gitlab_token", "glrt-" + body(20), "runner token: {}"),
    ("gitlab_token", "glptt-" + body(40, HEX), "trigger {}"),
    ("gitlab_token", "gldt-" + body(20), '{{"deploy": "{}"}}'),
    ("pypi_token", "pypi-" + "AgEIcHlwaS5vcmc" + _b64url(70), "password = {}"),
    ("xai_key", "xai-" + body(80), "XAI_API_KEY={}"),
    ("perplexity_key", "pplx-" + body(48), "api_key='{}'"),
    ("onepassword_key", "A3-" + body(6, UPPER) + "-" + body(11, UPPER) + "-" + "-".join(body(5, UPPER) for _ in range(3)), "{}"),
    ("onepassword_token", "ops_" + "eyJ" + body(260, B64), "OP_SERVICE_ACCOUNT_TOKEN={}"),
    ("adobe_secret", "p8e-" + body(32), "client_secret: {}"),
    ("age_secret_key", "AGE-SECRET-KEY-1" + "".join(body(58, BECH32)), "# {}"),
    ("aws_bedrock_key", "bedrock-api-key-" + "YmVkcm9jay5hbWF6b25hd3MuY29t" + body(60, B64), "key {}"),
    ("aws_bedrock_key", "ABSK" + body(132, B64), "AWS_BEARER_TOKEN_BEDROCK={}"),
    ("cloudflare_origin_ca_key", "v1.0-" + body(24, HEX) + "-" + body(146, HEX), "origin_ca_key = {}"),
    ("frameio_token", "fio-u-" + _b64url(64), "{}"),
    ("flutterwave_key", "FLWSECK_TEST-" + body(32, "abcdefgh0123456789") + "-X", "secret: {}"),
    ("heroku_key", "HRKU-AA" + _b64url(58), "HEROKU_API_KEY={}"),
    ("infracost_token", "ico-" + body(32), "INFRACOST_API_KEY={}"),
    ("postman_token", "PMAK-" + body(24, HEX) + "-" + body(34, HEX), "x-api-key: {}"),
    ("pulumi_token", "pul-" + body(40, HEX), "PULUMI_ACCESS_TOKEN={}"),
    ("scalingo_token", "tk-us-" + _b64url(48), "{}"),
    ("sendinblue_key", "xkeysib-" + body(64, HEX) + "-" + body(16), "api-key: {}"),
    ("octopus_key", "API-" + body(26, UPPER), "X-Octopus-ApiKey: {}"),
    ("square_token", "sq0atp-" + _b64url(22), "SQUARE_TOKEN={}"),
    ("npm_token", "npm_" + body(36), "//registry.npmjs.org/:_authToken={}"),
    ("stripe_webhook_secret", "whsec_" + body(32), "STRIPE_WEBHOOK_SECRET={}"),
    ("groq_key", "gsk_" + body(52), "GROQ_API_KEY={}"),
    ("replicate_token", "r8_" + body(37), "REPLICATE_API_TOKEN={}"),
    ("linear_key", "lin_api_" + body(40), "{}"),
    ("hf_token", "api_org_" + body(34, string.ascii_letters), "use_auth_token='{}'"),
    ("shopify_token", "shpat_" + body(32, HEX), "X-Shopify-Access-Token: {}"),
    ("shopify_token", "shpss_" + body(32, HEX), "{}"),
    ("digitalocean_token", "dop_v1_" + body(64, HEX), "DIGITALOCEAN_TOKEN={}"),
    ("digitalocean_token", "doo_v1_" + body(64, HEX), "{}"),
    ("prefect_token", "pnu_" + body(36), "PREFECT_API_KEY={}"),
    ("clojars_token", "CLOJARS_" + body(60, LOWER), "{}"),
    ("duffel_token", "duffel_test_" + _b64url(43), "{}"),
    ("grafana_token", "glsa_" + body(32) + "_" + body(8, HEX), "{}"),
    ("grafana_token", "glc_" + body(48, B64), "{}"),
    ("notion_token", "ntn_" + body(11, string.digits) + body(35), "NOTION_TOKEN={}"),
    ("planetscale_token", "pscale_tkn_" + _b64url(43), "{}"),
    ("planetscale_token", "pscale_pw_" + _b64url(43), "password: {}"),
    ("readme_token", "rdme_" + body(70, LOWER), "{}"),
    ("rubygems_token", "rubygems_" + body(48, HEX), ":rubygems_api_key: {}"),
    ("sentry_token", "sntryu_" + body(64, HEX), "SENTRY_AUTH_TOKEN={}"),
    ("settlemint_token", "sm_pat_" + body(16), "{}"),
    ("shippo_token", "shippo_live_" + body(40, HEX), "{}"),
    ("sourcegraph_token", "sgp_" + body(40, HEX), "SRC_ACCESS_TOKEN={}"),
    ("flyio_token", "fo1_" + _b64url(43), "FLY_API_TOKEN={}"),
    ("gitlab_session", body(32, LOWER), "Cookie: _gitlab_session={}"),
    ("url_token", body(32), "GET https://graph.example.com/v1/me?fields=id&access_token={} HTTP/1.1"),
    ("url_token", _b64url(40), "https://api.example.com/data?api_key={}"),
    ("sendgrid_key", "SG." + _b64url(22) + "." + _b64url(43), "SENDGRID_API_KEY={}"),
    ("twilio_key", "SK" + body(32, HEX), "TWILIO_API_KEY={}"),
    ("azure_storage_key", body(86, B64) + "==", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core.windows.net"),
    ("artifactory_key", "AKCp" + body(69), "X-JFrog-Art-Api: {}"),
    ("slack_webhook", body(24), "https://hooks.slack.com/services/T01AB2CD3EF/B04GH5IJ6KL/{}"),
    ("google_oauth_token", "ya29." + "a0" + _b64url(150) + "-x_", "access token: {}"),
    ("stripe_key", "sk_" + "prod_" + body(40), "{}"),
    ("bearer_token", base64.b64encode(b"admin:" + body(16).encode()).decode(), "Authorization: Basic {}"),
    ("bearer_token", body(40), "authorization: bearer {}"),
    ("bearer_token", body(40), '{{"authorization": "token {}"}}'),
    # Issue 31, item 1: gitleaks rules with a distinctive anchor.
    ("azure_ad_secret", body(3) + "8Q~" + _b64url(34).replace("-", "~"), "AZURE_CLIENT_SECRET={}"),
    ("azure_ad_secret", "a1B" + "2Q~" + body(31), '{{"clientSecret": "{}"}}'),
    ("teams_webhook", f"{body(8, HEX)}-{body(4, HEX)}-{body(4, HEX)}-{body(4, HEX)}-{body(12, HEX)}@"
     f"{body(8, HEX)}-{body(4, HEX)}-{body(4, HEX)}-{body(4, HEX)}-{body(12, HEX)}/IncomingWebhook/{body(32, HEX)}/"
     f"{body(8, HEX)}-{body(4, HEX)}-{body(4, HEX)}-{body(4, HEX)}-{body(12, HEX)}",
     "post to https://contoso.webhook.office.com/webhookb2/{} now"),
    ("curl_credential", "S3cr" + body(12), "curl -u admin:{} https://api.example.com/v1"),
    ("curl_credential", body(24), "curl --user 'deploy:{}' https://ci.example.com"),
    ("curl_credential", body(32), "curl -s -H 'X-API-Key: {}' https://api.example.com/items"),
    ("curl_credential", body(32), 'curl https://api.example.com \\\n  --header "x-auth-token: {}"'),
    # Item 2: agent credentials.
    ("openrouter_key", "sk-" + "or-v1-" + body(64, HEX), "OPENROUTER_API_KEY={}"),
    ("langsmith_key", "lsv2_" + "pt_" + body(32, HEX) + "_" + body(10, HEX), "LANGSMITH_API_KEY={}"),
    ("langsmith_key", "lsv2_" + "sk_" + body(32, HEX) + "_" + body(10, HEX), "{}"),
    ("tavily_key", "tvly-" + body(32), "TAVILY_API_KEY={}"),
    ("tavily_key", "tvly-" + "dev-" + body(32), "api_key: {}"),
    ("pinecone_key", "pcsk_" + body(5) + "_" + body(64), "PINECONE_API_KEY={}"),
    ("supabase_token", "sbp_" + body(40, HEX), "SUPABASE_ACCESS_TOKEN={}"),
    ("google_oauth_secret", "GOCSPX-" + _b64url(28), '{{"client_secret": "{}"}}'),
    ("aws_session_token", "IQoJb3JpZ2luX2Vj" + body(300, B64) + "=", "AWS_SESSION_TOKEN={}"),
    ("openshift_token", "sha256~" + _b64url(43), "oc login --token={} --server=https://api.example.com:6443"),
    # Follow-up: shapes anchored on "/" and "=" (memchr gates).
    ("discord_webhook", _b64url(68), "curl -X POST https://discord.com/api/webhooks/1234567890123456789/{} -d @msg.json"),
    ("discord_webhook", _b64url(68), '{{"url": "https://discordapp.com/api/webhooks/987654321098765432/{}"}}'),
    ("discord_webhook", _b64url(68), "url=https://canary.discord.com/api/v10/webhooks/123456789012345678/{}"),
    ("jdbc_password", "S3cr" + body(12), "jdbc:mysql://db.example.com:3306/app?user=app&password={}&useSSL=true"),
    ("jdbc_password", body(16), "url = jdbc:sqlserver://db.example.com:1433;databaseName=app;user=sa;password={};encrypt=true"),
    ("jdbc_password", body(16), 'spring.datasource.url="jdbc:postgresql://db/app?password={}"'),
    ("connection_string_password", "S3cr" + body(12),
     'Server=tcp:db.example.com,1433;Initial Catalog=app;User ID=sa;Password={};Encrypt=True;'),
    ("connection_string_password", body(16), '{{"ConnectionStrings": {{"Default": "Password={};Data Source=db;Database=app"}}}}'),
    ("connection_string_password", body(16), "Host=db;Username=app;password={}"),
]

#: Look-alikes of the new shapes: prose, code, placeholders, kebab/snake-case words.
NEGATIVES: list[str] = [
    "npm_config_cache=/tmp/npm and npm_package_version",
    "my-glpat-helper-for-tests and glpat-xxxxxxxxxxxxxxxxxxxx",
    "API-REFERENCE-DOCUMENTATION-PAGES is long",
    "SKIPPED: 12 tests; SKU 0123; SKETCHY",
    "Basic authentication is described in RFC 7617. Authorization: Basic realm",
    "curl 'https://api.example.com/v1?api_key=YOUR_API_KEY&format=json'",
    "https://example.com/cb?access_token=${ACCESS_TOKEN}",
    "client = OpenAI(api_key=api_key, base_url=base_url)",
    "url = f'{base}?access_token={token}'",
    "webhook: https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "ya29.example and ya29.a0-placeholder",
    "SG.com is a site; SG.example.test",
    "whsec_placeholder and gsk_test_helper",
    "r8_something_here and lin_api_docs",
    "shpat_, dop_v1_ and pnu_ are prefixes; see the docs",
    "xoxc-is-a-kebab-case-word and xoxd-not-a-cookie",
    "The authorization header holds a token; authorization: Bearer <token>",
    "AccountKey=<your-account-key>; AccountName=dev",
    "version v1.0-beta and v1.0-rc1",
    "A3-style paper and AGE-SECRET-KEY-1 is the prefix of an age key",
    "def load_config(path): return safe_load(open(path)) - KNOWN_KEYS",
    # Look-alikes of the shapes of issue 31.
    "~/src/project and ~user/.bashrc; 2Q~ and x8Q~short; a~b~c",
    "the sum 1Q~2 and Q~ at 3Q~ in prose",
    "https://contoso.webhook.office.com/webhookb2/<your-webhook-id>",
    "curl -u user:password https://example.com and curl -u admin:$PASSWORD https://x",
    "curl -u alice https://example.com (prompts for the password); ls -u; sort -u",
    "curl -H 'X-API-Key: YOUR_API_KEY' https://x and curl -H \"X-API-Key: $API_KEY\" https://x",
    "grep -H 'token: something' file and git log -u; ps -u root",
    "sk-or-v1-placeholder and sk-or-v1-xxxxxxxxxxxxxxxx",
    "lsv2_pt_ and lsv2_sk_<key>; tvly-YOUR_KEY; pcsk_ is Pinecone's prefix",
    "sbp_ prefix; GOCSPX-example and GOCSPX-<secret>",
    "IQoJb3JpZ2luX2Vj is how AWS session tokens begin",
    "sha256~ prefix and sha256~abc; image@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "uuid 123e4567-e89b-12d3-a456-426614174000 -u -H sha 3f786850e387550fdab836ed7e6dc881de23001b",
    # Look-alikes of the follow-up's shapes, and of the two still uncovered.
    "https://discord.com/api/webhooks/1234567890123456789 and discord.com/api/webhooks/<id>/<token>",
    "https://discord.com/api/webhooks/123456789012345678/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "https://example.com/webhooks/1234567890123456789/" + "AbCdEfGhIj" * 7,
    "jdbc:mysql://db/app?user=app&password=&useSSL=true; jdbc:postgresql://db/app?password=${PASSWORD}",
    "jdbc:mysql://db/app?user=app&password=<password> and jdbc:mysql://db/app?password=****",
    "db.connect(host=host, password=password); login(user, password=os.environ['PW'])",
    "Server=db;Database=app;User Id=sa;Password=;Encrypt=True and Server=db;Password=myPassword;",
    "Server=db;Database=app;Password={0}; Host=db;Password=%(pw)s; Uid=sa;Password=<your password>;",
    "the password=hunter2 rule in prose; password=S3cretValue42 without a connection string",
    "the atlasv1 API and atlasv1.example; pat.name, pat.value and pat.x.y.z in code",
    "a/b and/or 1/2; x == y; a=b; c != d",
]


@pytest.fixture()
def redactor() -> Redactor:
    return Redactor(env=False)


@pytest.mark.parametrize("kind, secret, template", BREADTH, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(BREADTH)])
def test_positive_is_redacted(redactor: Redactor, kind: str, secret: str, template: str) -> None:
    text = template.format(secret)
    out, counts = redactor.redact(text)
    assert secret not in out
    assert counts == {kind: 1}, out
    assert out == template.format(marker(kind))


@pytest.mark.parametrize("kind, secret, template", BREADTH, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(BREADTH)])
def test_positive_is_redacted_in_a_session(tmp_path: Path, kind: str, secret: str, template: str) -> None:
    """Through the guard's screen (s.user, a tool result), not only Redactor.find."""
    with Session(tmp_path) as s:
        s.user(template.format(secret))
        s.tool("call_1", template.format(secret))
    assert s.path is not None and secret not in s.path.read_text()
    assert s.stats()["redactions"] == {kind: 2}


@pytest.mark.parametrize("text", NEGATIVES, ids=range(len(NEGATIVES)))
def test_negative_is_untouched(redactor: Redactor, text: str) -> None:
    assert redactor.find(text) == []


@pytest.mark.parametrize(
    "unit",
    ["://a:b@", "curl -u a:b ", " -H 'X-Key: ", "8Q~", "sha256~", "IQoJb3JpZ2luX2Vj", "sk-or-v1-",
     "://x.webhook.office.com/webhookb2/", "discord.com/api/webhooks/12345678901234567/", ";Password=a",
     "jdbc:x?password=a", "/webhooks/", "password="],
)
def test_adversarial_text_for_the_shapes_of_issue_31_stays_linear(redactor: Redactor, unit: str) -> None:
    """One new anchor repeated: ten times the text costs about ten times the CPU,
    not a hundred (CPU time of this thread, so the machine's load does not count)."""
    import time

    def cost(size: int) -> float:
        text = unit * (size // len(unit))
        t0 = time.thread_time()
        redactor.find(text)
        return time.thread_time() - t0

    small, large = cost(100_000), cost(1_000_000)
    assert large < 30 * small + 0.05, (small, large)


def test_every_kind_has_a_positive() -> None:
    assert {k for k, _, _ in POSITIVES} | {k for k, _, _ in BREADTH} == set(KINDS)


def test_every_kind_has_a_title() -> None:
    table = describe()
    assert sorted(kind for kind, _ in table) == sorted(KINDS)
    assert all(title for _, title in table)


def test_the_secrets_page_lists_the_detector_table() -> None:
    """docs/secrets.md's list between the markers is generated from the table: regenerate
    with ``python -c 'import ststrace._redact as r; print(r.readme_list(), end="")'``."""
    text = SECRETS_PAGE.read_text(encoding="utf-8")
    m = re.search(r"<!-- detectors:start -->\n(.*?)<!-- detectors:end -->", text, re.S)
    assert m is not None, "docs/secrets.md lacks the <!-- detectors:start --> ... <!-- detectors:end --> block"
    assert m.group(1) == readme_list()


def test_the_secrets_page_lists_the_uncovered_table() -> None:
    """docs/secrets.md's list of shapes not detected is generated from ``_redact.UNCOVERED``:
    regenerate with ``python -c 'import ststrace._redact as r; print(r.readme_uncovered(), end="")'``."""
    text = SECRETS_PAGE.read_text(encoding="utf-8")
    m = re.search(r"<!-- uncovered:start -->\n(.*?)<!-- uncovered:end -->", text, re.S)
    assert m is not None, "docs/secrets.md lacks the <!-- uncovered:start --> ... <!-- uncovered:end --> block"
    assert m.group(1) == readme_uncovered()


def test_the_screen_passes_no_positive() -> None:
    """The guard's screen flags every positive (the one-pass screen of the hot path)."""
    guard = MessageGuard(Redactor(env=False))
    for _, secret, template in BREADTH:
        assert guard.screen(template.format(secret)), template


def test_no_detector_fires_on_the_fixtures(redactor: Redactor) -> None:
    """The real sessions and converter inputs of tests/fixtures hold no secret:
    a hit there is a false positive (243 MB of site-packages text was checked
    the same way when these shapes were added; see CHANGELOG)."""
    root = Path(__file__).resolve().parents[1] / "fixtures"
    hits = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in (".jsonl", ".json", ".txt", ".md"):
            text = path.read_text(encoding="utf-8", errors="replace")
            hits += [(path.name, kind, text[a:b][:40]) for kind, a, b in redactor.find(text)]
    assert hits == []
