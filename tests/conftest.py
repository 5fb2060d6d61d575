"""Session-wide fixtures: one synthesized App (dev + prod stacks) shared by every stack test (one per pytest-xdist
worker: `make test` runs two), and how `make test` shares the tests between its workers."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Must be set before aws_cdk starts its node process: CDK's built-in template validator runs in exactly
# one test (tests/stacks/test_offline_synth.py); here it would only add seconds to every synth.
os.environ["CDK_VALIDATION"] = "false"
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
# Under pytest-xdist each worker holds one core: one OpenMP thread for torch here and in the jobs it starts,
# rather than two workers spinning two threads each over the same two cores.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from xdist.scheduler import LoadScopeScheduling

from config import Settings, load_settings, read_cdk_json_context
from config.paths import PROJECT_ROOT
from local_runner.launch import JOB_PYTHON_ENV, free_port
from stacks.app_builder import ProjectStacks, build_stacks
from tests.demo_runs import sequence  # noqa: F401  (the session's make synth / make demo runs, a fixture)

# The SDK logs its config-file lookups at INFO when test modules import it (as definition_cache does for synth).
logging.getLogger("sagemaker.config").setLevel(logging.WARNING)
ROOT = PROJECT_ROOT
# For entry points started in a subprocess: the import roots that the Makefile exports as PYTHONPATH.
ENTRY_POINT_PYTHONPATH = os.pathsep.join((str(ROOT), str(ROOT / "training_code")))


@dataclass(frozen=True)
class SynthesizedEnvironment:
    """The stacks of one environment, their settings and their synthesized templates."""

    settings: Settings
    stacks: ProjectStacks
    templates: dict[str, dict[str, Any]]
    assembly: Path  # the cloud assembly folder (cdk.out) holding both environments

    def template(self, which: str) -> Template:
        """`aws_cdk.assertions.Template` of the data, network or pipeline stack (or "pipeline:<task>")."""
        return Template.from_json(self.templates[which])


@pytest.fixture(scope="session", autouse=True)
def warm_python() -> Iterator[Path]:
    """Jobs started by this worker's tests (and by the commands they run) fork from a pre-imported Python
    (tests/warm_python.py): the client's path, also $LOCAL_JOB_PYTHON for the session."""
    from tests import warm_python as warm

    folder = Path(tempfile.mkdtemp(prefix="warm-python-"))  # short: a Unix socket's path has at most 107 bytes
    server_socket = folder / "server.sock"
    client = warm.write_client(folder / "bin", server_socket)
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    with (folder / "server.log").open("w") as log:
        server = subprocess.Popen(
            [sys.executable, warm.__file__, str(server_socket)], env=environment, stdout=log, stderr=log
        )
    for _ in range(100):  # the socket is bound before the imports: clients queue while they run
        if server_socket.exists() or server.poll() is not None:
            break
        time.sleep(0.05)
    os.environ[JOB_PYTHON_ENV] = str(client)
    try:
        yield client
    finally:
        os.environ.pop(JOB_PYTHON_ENV, None)
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def cold_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs of this test start a fresh interpreter, as outside the tests."""
    monkeypatch.delenv(JOB_PYTHON_ENV, raising=False)


@pytest.fixture(scope="session")
def cdk_context() -> dict[str, Any]:
    return read_cdk_json_context(ROOT / "cdk.json")


@pytest.fixture(scope="session")
def synthesized(cdk_context, tmp_path_factory) -> dict[str, SynthesizedEnvironment]:
    """Environment name -> its synthesized stacks; one App and one synth for the whole session."""
    return synthesize(cdk_context, tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def synthesized_cpu_job(cdk_context, tmp_path_factory) -> dict[str, SynthesizedEnvironment]:
    """The same with processing.tokenize_in = "cpu_job" (ValidateAndTokenize validates and tokenizes before
    FineTune; the default is "fine_tune")."""
    return synthesize({**cdk_context, "processing.tokenize_in": "cpu_job"}, tmp_path_factory.mktemp("cdk.out-cpu"))


def synthesize(
    cdk_context: dict[str, Any], outdir: Path, env_names: tuple[str, ...] = ("dev", "prod")
) -> dict[str, SynthesizedEnvironment]:
    """Environment name -> its stacks, synthesized in one App: templates "data", "network", "pipeline" (the
    environment's own task) and "pipeline:<task>" for each pipeline of its `pipelines` setting."""
    app = cdk.App(context=cdk_context, outdir=str(outdir))
    environments = {}
    for env_name in env_names:
        settings = load_settings({**cdk_context, "env": env_name})
        environments[env_name] = (settings, build_stacks(app, settings))
    assembly = app.synth()
    result = {}
    for env_name, (settings, stacks) in environments.items():
        roles = ("data", "network", "pipeline", *(f"pipeline:{p.task}" for p in settings.deployed_pipelines[1:]))
        templates = {
            which: assembly.get_stack_by_name(stack.stack_name).template
            for which, stack in zip(roles, stacks.all(), strict=True)
        }
        result[env_name] = SynthesizedEnvironment(
            settings=settings, stacks=stacks, templates=templates, assembly=outdir
        )
    return result


@pytest.fixture(scope="session")
def dev(synthesized) -> SynthesizedEnvironment:
    return synthesized["dev"]


@pytest.fixture(scope="session")
def prod(synthesized) -> SynthesizedEnvironment:
    return synthesized["prod"]


# `make test` runs `pytest -n 2` (pytest-xdist). Modules whose module- or session-scoped fixtures are too costly to
# build on both workers run on one worker, as one work unit per group: make synth + two tiny demos (which the demo
# tests and the benchmark gate's read); the uninterrupted runs that the spot tests resume to; the local run that two
# tests assert on; the finished tiny runs that three modules read.
KEPT_TOGETHER = {
    "tests/test_make_demo.py": "make-demo",
    "tests/security/test_benchmark_gate.py": "make-demo",
    "tests/local_runner/test_evaluate.py": "make-demo",
    "tests/training_code/test_train_distributed.py": "uninterrupted-runs",
    "tests/local_runner/test_runner.py": "reclaimed-local-run",
    "tests/training_code/test_evaluation.py": "finished-runs",
    "tests/training_code/test_sagemaker_contract.py": "finished-runs",
    "tests/training_code/test_training_curves.py": "finished-runs",
}


def work_unit(nodeid: str) -> str:
    """The test itself, or the group of its module when that is KEPT_TOGETHER."""
    module = nodeid.split("::", 1)[0]
    return KEPT_TOGETHER.get(module, nodeid)


class OneTestAtATime(LoadScopeScheduling):
    """xdist's `load` distribution, one test per work unit handed to whichever worker runs low, except that the
    tests of a KEPT_TOGETHER group form one unit (handed out first: units are ordered by size, then as collected).
    Session fixtures (the synthesized App, the moto server and its deployment, the tiny models, the preprocessed
    sample) are built once per worker; those that only a group uses, only on the worker that runs it.
    (xdist_group marks cannot do this: pytest 9.2 ignores the node ids they rename.)"""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> OneTestAtATime | None:
    return OneTestAtATime(config, log) if config.getvalue("dist") == "load" else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker the slow tests come first, so they start first and both workers end on short tests."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: collection order otherwise


def resources_of_type(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """Logical id -> resource for every resource of one type."""
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def policy_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every statement of every AWS::IAM::Policy in a template."""
    return [
        statement
        for policy in resources_of_type(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def longest_name_prefix(name: str) -> int:
    """The longest name_prefix task `name`'s pipeline allows: its pattern's 20 characters, or fewer where the task's
    RESOURCE_INFIX would make RecordModel's role name <prefix><infix>-record-model-<region> longer than IAM's 64
    characters (reference_iam-quotas.html) in the longest region name (ap-southeast-5)."""
    from tasks import task

    return min(20, 64 - len(f"{task(name).RESOURCE_INFIX}-record-model-ap-southeast-5"))


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def render(value: Any) -> str:
    """A template value as text: Refs of pseudo parameters as ${...}, joins concatenated, an `Fn::Sub` string as it
    stands (its ${AWS::...} the same placeholders)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"].startswith("AWS::"):
        return "${" + value["Ref"] + "}"
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(render(part) for part in parts)
    if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
        return value["Fn::Sub"]
    raise AssertionError(f"cannot render {value!r}")


def unshare_works() -> bool:
    """Whether this machine can run a command in a fresh network namespace (root or user namespaces)."""
    unshare = shutil.which("unshare")
    return unshare is not None and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0


def run_without_network(args: list[str], env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    """Run `args` from the repository root under `unshare -n` (no network at all) with exactly `env`."""
    unshare = shutil.which("unshare")
    assert unshare is not None, "unshare is not installed: skip with unshare_works()"
    return subprocess.run([unshare, "-n", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


# An AWS API emulator (moto server) for code that calls AWS: what it models and ignores is listed in
# tests/tools/conftest.py. REGION is where the emulated deployment lives.
REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_url(tmp_path_factory) -> Iterator[str]:
    """Start `moto_server` on a free local port for the session; stopped by its process id."""
    port = free_port()
    log = (tmp_path_factory.mktemp("moto") / "moto_server.log").open("w")
    server = Path(sys.executable).with_name("moto_server")
    process = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):  # up to ~30 s on a busy machine
            if process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {process.returncode}; see {log.name}")
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"moto_server did not answer on {url}; see {log.name}")
        yield url
    finally:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        log.close()


@pytest.fixture(scope="session")
def deployed_session(moto_url, dev) -> Any:
    """The dev stacks deployed once per session on moto server (tests/tools/conftest.py `deploy`)."""
    from tests.tools.conftest import deploy

    return deploy(moto_url, dev)


@pytest.fixture
def deployed(deployed_session, moto_url) -> Iterator[Any]:
    """boto3 pointed at the deployed region; the buckets are emptied again after the test."""
    with pointed_at(aws_environment(moto_url)):
        yield deployed_session
        deployed_session.empty_buckets()


@pytest.fixture
def deployed_env(deployed, moto_url) -> dict[str, str]:
    """The environment of a command run against the deployed region."""
    return aws_environment(moto_url)


def aws_environment(moto_url: str, region: str = REGION) -> dict[str, str]:
    """Dummy credentials and a region for the emulator; no profile, config or credentials file is read."""
    return {
        "AWS_ENDPOINT_URL": moto_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",  # no instance-metadata probe when credentials are missing
    }


@contextmanager
def pointed_at(environment: dict[str, str]) -> Iterator[None]:
    """boto3 in this process uses `environment` (and no profile or session token from outside)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
            patch.delenv(name, raising=False)
        for name, value in environment.items():
            patch.setenv(name, value)
        yield
