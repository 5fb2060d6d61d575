"""How training jobs are started here: the launcher and the environment they inherit."""

from __future__ import annotations

import sys

from local_runner.launch import hyperparameter_args, job_environment, launcher


def test_the_environment_of_a_started_job_drops_an_outer_jobs_variables(monkeypatch):
    outer = {"SM_HPS": "{}", "SM_CHANNEL_TRAIN": "/x", "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}
    for name, value in {**outer, "QA_KEEP": "yes"}.items():
        monkeypatch.setenv(name, value)
    environment = job_environment()
    assert not set(outer) & set(environment)
    assert environment["QA_KEEP"] == "yes"


def test_one_process_runs_the_interpreter_and_more_run_torchrun_on_a_local_free_port():
    assert launcher(1) == [sys.executable]
    command = launcher(2)
    assert command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert {"--nproc_per_node=2", "--master_addr=127.0.0.1"} <= set(command)
    [port] = [part.removeprefix("--master_port=") for part in command if part.startswith("--master_port=")]
    assert 0 < int(port) < 65536


def test_hyperparameters_are_passed_as_name_value_arguments():
    assert hyperparameter_args({"epochs": 3, "precision": "bf16"}) == ["--epochs", "3", "--precision", "bf16"]
