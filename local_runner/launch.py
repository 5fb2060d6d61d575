"""How a training entry point is started on this machine: its command line (this interpreter, or torchrun for
several local workers) and the environment it inherits. The local runner, the training tests and the
benchmarks all start train.py through these."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping

# Variables that would tell a started job it runs inside another one: SageMaker's SM_* and torchrun's ranks.
OUTER_JOB_VARIABLES = ("SM_", "RANK", "LOCAL_RANK", "WORLD_SIZE")
# The interpreter that jobs start with, where not this one: an executable that runs `python [-u] script|-m|-c args`
# as Python would (the tests point it at a pre-imported Python, tests/warm_python.py, to skip ~8 s of imports a job).
JOB_PYTHON_ENV = "LOCAL_JOB_PYTHON"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def job_python() -> str:
    """The interpreter a job starts with: $LOCAL_JOB_PYTHON, else this one."""
    return os.environ.get(JOB_PYTHON_ENV) or sys.executable


def launcher(processes: int) -> list[str]:
    """The command before the script (or `-m module`): the job interpreter; with more than one process, under
    torchrun with `processes` local workers meeting on a free port of 127.0.0.1."""
    if processes == 1:
        return [job_python()]
    return [
        job_python(),
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={processes}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
    ]


def hyperparameter_args(hyperparameters: Mapping[str, object]) -> list[str]:
    """Hyperparameters as SageMaker passes them to the entry point: `--name value` each."""
    return [item for name, value in hyperparameters.items() for item in (f"--{name}", str(value))]


def job_environment() -> dict[str, str]:
    """This process's environment without the variables of an outer SageMaker job or torchrun worker."""
    return {name: value for name, value in os.environ.items() if not name.startswith(OUTER_JOB_VARIABLES)}
