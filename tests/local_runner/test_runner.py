"""The local runner executes the synthesized pipeline (the template's definition) end to end on CPU.

The tiny run that passes every step, registers a model and ignores a duplicate event is the dev run of
tests/test_make_demo.py (`make demo TINY=1`), and the run that ends at the F1 gate is its prod run, both asserted
there; here: the runs that stop early, recover, or read other dataset formats.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import re
import shutil
import tarfile
import time
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from local_runner.__main__ import main as run_local
from local_runner.demo_models import build_tiny_model
from local_runner.errors import UnsupportedDefinition
from local_runner.jobs import JOB_LOG
from local_runner.registry import LocalModelRegistry
from local_runner.runner import LocalPipelineRunner
from local_runner.store import LocalObjectStore
from pipeline_steps.walk import execution_order, find_step
from stacks.assembly import synthesized_definition
from tests.conftest import ROOT
from tests.local_runner.summary import table

pytestmark = pytest.mark.slow
SAMPLE = ROOT / "data" / "sample-squad"
# The user's model of the formats run: a tiny BERT whose hidden size no bundled model has.
USER_MODEL = "my-tiny-bert"
USER_MODEL_HIDDEN_SIZE = 48


def local_run(dev, tmp_path, *extra: str, dataset=SAMPLE) -> int:
    return run_local(
        [
            "--assembly",
            str(dev.assembly),
            "--stack",
            dev.stacks.pipeline.stack_name,
            "--work-dir",
            str(tmp_path),
            "--dataset",
            str(dataset),
            *([] if "--model" in extra else ["--tiny"]),
            "--param",
            "Epochs=1",
            *extra,
        ]
    )


def packages(tmp_path, dev):
    return LocalModelRegistry(tmp_path / "model-registry.sqlite").packages(dev.settings.model_package_group_name)


# One value per kind of refusal on the local runner's path (a float and an integer past their bounds in the claim
# step, a value of the wrong type before the execution starts); every parameter's bounds are checked against the
# shared rules in tests/training_code/test_parameter_rules.py.
@pytest.mark.parametrize(
    ("parameter", "says"),
    [
        ("Epochs=-1", "Parameter Epochs=-1.0 must be > 0 and at most"),
        ("TrainingInstanceCount=0", "Parameter TrainingInstanceCount=0 must be between 1 and"),
        ("Epochs=two", "parameter Epochs='two' is not of type Float"),
        # The per-run controls (each rule in tests/training_code/test_parameter_rules.py: one run each is slow).
        ("DocStride=300", "Parameter DocStride=300 must be between 1 and 191 (below half of MaxSeqLength)."),
        ("EarlyStoppingPatience=2", "Parameter EarlyStoppingPatience=2 needs evaluations during training"),
    ],
)
def test_a_bad_parameter_ends_before_any_job_with_one_line_naming_it(dev, tmp_path, capfd, parameter, says):
    assert local_run(dev, tmp_path, "--param", parameter) in (1, 2)
    out, err = capfd.readouterr()
    assert (out + err).count(says) == 1
    assert "> ValidateAndTokenize" not in out and "> FineTune" not in out


def test_an_interruption_that_can_never_happen_is_refused(dev, tmp_path, capfd):
    no_checkpoints = ("--hyperparameter", "checkpoint_minutes=0", "--hyperparameter", "checkpoint_steps=0")
    assert local_run(dev, tmp_path, *no_checkpoints, "--interrupt-mid-checkpoint") == 2
    assert "--interrupt-mid-checkpoint: no periodic checkpoint is taken" in capfd.readouterr().err


def test_a_conversion_that_would_overwrite_a_file_stops_before_anything_runs(dev, tmp_path, capfd):
    from datasets import Dataset

    dataset = tmp_path / "dataset"
    shutil.copytree(SAMPLE, dataset)
    train = dataset / "train" / "train.jsonl"
    records = [json.loads(line) for line in train.read_text().splitlines()]
    Dataset.from_list(records[:5]).to_parquet(str(train.with_suffix(".parquet")))
    assert local_run(dev, tmp_path / "run", dataset=dataset) == 2
    out, err = capfd.readouterr()
    assert "error: train/train.parquet converts to train/train.jsonl, which the dataset already has" in err
    assert "> ClaimManifest" not in out and "Traceback" not in err


def test_estimate_above_max_training_cost_stops_before_training(dev, tmp_path, capsys):
    assert local_run(dev, tmp_path, "--param", "MaxTrainingCostUSD=0") == 1
    out = capsys.readouterr().out
    assert "-> ElseSteps" in out
    assert "> FineTune" not in out
    assert re.search(
        r"Estimated training cost USD [0-9.e+-]+ \(on-demand list price\) exceeds MaxTrainingCostUSD 0.0", out
    )
    assert packages(tmp_path, dev) == []


def runner_for(definition, tmp_path):
    store = LocalObjectStore(tmp_path / "s3")
    registry = LocalModelRegistry(tmp_path / "registry.sqlite")
    return LocalPipelineRunner(definition, "p", store, registry, tmp_path)


def test_unknown_step_type_field_and_expression_are_rejected_by_name(dev, tmp_path):
    definition = json.loads(synthesized_definition(dev.templates["pipeline"])[0])
    bad = copy.deepcopy(definition)
    bad["Steps"].append({"Name": "Transform", "Type": "Transform", "Arguments": {}})
    bad["Steps"][0]["Arguments"]["X"] = {"Std:Concat": ["a", "b"]}
    find_step(bad, "FineTune")["Tags"] = []
    with pytest.raises(UnsupportedDefinition) as excinfo:
        runner_for(bad, tmp_path)
    message = str(excinfo.value)
    assert "step 'Transform': type 'Transform' is not supported" in message
    assert "expression 'Std:Concat' is not supported" in message
    assert "step 'FineTune': fields ['Tags'] are not supported" in message
    runner_for(definition, tmp_path)  # the real definition is accepted


def test_steps_run_in_dependency_order(dev):
    definition = json.loads(synthesized_definition(dev.templates["pipeline"])[0])
    assert [s["Name"] for s in execution_order(list(reversed(definition["Steps"])))] == [
        "ClaimManifest",
        "ParametersValid",
    ]
    # processing.tokenize_in "fine_tune": the claim's verdict, then the cost guard (no ValidateAndTokenize).
    assert [s["Name"] for s in find_step(definition, "FirstDelivery")["Arguments"]["IfSteps"]] == ["DatasetValid"]
    branch = find_step(definition, "DatasetValid")["Arguments"]["IfSteps"]
    assert [s["Name"] for s in execution_order(list(reversed(branch)))] == [
        "EstimateTrainingCost",
        "CheckTrainingCost",
    ]
    guarded = find_step(definition, "CheckTrainingCost")["Arguments"]["IfSteps"]
    assert [s["Name"] for s in execution_order(list(reversed(guarded)))] == ["FineTune", "RecordModel", "CheckF1"]


@dataclass(frozen=True)
class LocalRun:
    work_dir: Path
    exit_code: int
    out: str
    records: dict[str, list[dict]]


@pytest.fixture(scope="module")
def reclaimed_run_of_user_formats(dev, tmp_path_factory) -> LocalRun:
    """One tiny run for three behaviours, sparing CI's two cores a pipeline run (tests/conftest.py keeps this module
    on one worker). The dataset as users keep it (issues 22, 29): train as a Parquet file plus a CSV file,
    validation as the split of a `DatasetDict.save_to_disk` folder (validation/ is itself a save_to_disk folder).
    The graph is processing.tokenize_in = "fine_tune"'s: FineTune tokenizes, no processing job (cpu_job's graph runs
    in tests/test_make_demo.py). Its training job is reclaimed (SIGKILL to every process) just after step 10, with a
    checkpoint every 4 steps, and retried: the retry tokenizes again. The model is the user's too: a tiny BERT
    folder outside the work dir, passed as `make train MODEL=<folder> PARAMS="..."` passes it (--model, --params)."""
    import csv

    from datasets import Dataset, DatasetDict
    from qa.data import SPLITS, load_dataset_files, split_entries

    tmp_path = tmp_path_factory.mktemp("reclaimed-formats")
    records = load_dataset_files({split: split_entries(SAMPLE / split) for split in SPLITS}, SAMPLE).records
    dataset = tmp_path / "formats"
    DatasetDict({"validation": Dataset.from_list(records["validation"])}).save_to_disk(str(dataset))
    (dataset / "train").mkdir()
    half = len(records["train"]) // 2
    Dataset.from_list(records["train"][:half]).to_parquet(str(dataset / "train" / "part-a.parquet"))
    with (dataset / "train" / "part-b.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(records["train"][0]))
        writer.writeheader()
        writer.writerows({**r, "answers": json.dumps(r["answers"])} for r in records["train"][half:])

    work_dir = tmp_path / "run"
    model = build_tiny_model(tmp_path / USER_MODEL, hidden_size=USER_MODEL_HIDDEN_SIZE)
    reclaim = ("--hyperparameter", "checkpoint_steps=4", "--interrupt-training-after-steps", "10")
    out = io.StringIO()
    started = time.monotonic()
    with redirect_stdout(out):
        code = local_run(dev, work_dir, "--model", str(model), "--params", "F1Threshold=0", *reclaim, dataset=dataset)
    print(f"the tiny run of the user's formats and model took {time.monotonic() - started:.0f} s")
    return LocalRun(work_dir, code, out.getvalue(), records)


def test_parquet_csv_and_dataset_dict_copies_of_the_sample_run_end_to_end(dev, reclaimed_run_of_user_formats):
    """The runner uploads them as `make upload-dataset` does (columnar data as JSON Lines: the processing image
    has no pyarrow; a DatasetDict split's copy under its split folder, where ValidateAndTokenize's manifest reader
    looks), and the pipeline validates, trains, evaluates and registers."""
    run = reclaimed_run_of_user_formats
    assert run.exit_code == 0, run.out[-4000:]
    assert "converted train/part-a.parquet (parquet) to JSON Lines: train/part-a.jsonl" in run.out
    assert "converted validation (save_to_disk) to JSON Lines: validation/validation.jsonl" in run.out
    rows = table(run.out)
    assert ("RegisterModel-RegisterModel", "Succeeded") in rows
    # FineTune tokenized the pinned folder itself (each attempt: the retry too); no processing job ran.
    assert "ValidateAndTokenize" not in {name for name, _ in rows}
    assert not list(run.work_dir.rglob("ValidateAndTokenize")) and not list((run.work_dir / "s3").rglob("processed"))
    examples = len(run.records["train"]) + 84
    [job_log] = [p for p in run.work_dir.rglob(JOB_LOG) if p.parent.name == "FineTune" or "FineTune" in p.parts]
    tokenized = re.findall(
        rf"tokenized {examples} examples -> \d+ features in [0-9.]+ s on \d+ processes", job_log.read_text()
    )
    assert tokenized, job_log.read_text()[-3000:]


def test_the_users_model_folder_is_staged_under_its_name_trained_registered_and_answers(
    dev, reclaimed_run_of_user_formats
):
    """`make train`'s path (local_runner --model <folder> --params ...): the folder is staged where BaseModelUri
    points, that model (not the bundled MiniLM) is trained and registered, and the registered model answers."""
    run = reclaimed_run_of_user_formats
    assert run.exit_code == 0, run.out[-4000:]
    [staging] = [line for line in run.out.splitlines() if line.startswith("staged base model ")]
    assert re.fullmatch(
        rf"staged base model \S+/{USER_MODEL} -> s3://\S+/{dev.settings.layout.base_models}/{USER_MODEL}/", staging
    )
    [package] = packages(run.work_dir, dev)
    archive = LocalObjectStore(run.work_dir / "s3").path(package.model_data)
    with tarfile.open(archive) as tar:
        member = tar.extractfile("config.json")
        assert member is not None
        config = json.load(member)
    assert config["hidden_size"] == USER_MODEL_HIDDEN_SIZE
    assert re.search(r'^answer of the registered model: ".*" \(score ', run.out, re.MULTILINE)


def test_a_spot_reclaim_kills_training_and_the_retry_resumes_from_the_newest_complete_checkpoint(
    dev, reclaimed_run_of_user_formats
):
    run = reclaimed_run_of_user_formats
    assert run.exit_code == 0, run.out[-4000:]
    # dev's 1 x ml.g5.2xlarge runs as one process (multi-process reclaims: test_train_distributed.py).
    assert re.search(r">> spot reclaim: SIGKILL to all [1-9] processes of the job, just after: step=10 ", run.out)
    assert "stop requested" not in run.out  # no SIGTERM handler ran: the job was killed
    assert "restored" in run.out and "checkpoint file(s)" in run.out
    # Killed at an arbitrary moment after step 10: the retry resumes from the newest complete checkpoint.
    resumed = re.search(r"resumed from step-(\d{8}): step (\d+)", run.out)
    assert resumed and int(resumed.group(1)) == int(resumed.group(2)) in (8, 12)
    assert "resumed after a spot interruption, attempt 2" in run.out
    [package] = packages(run.work_dir, dev)
    # The retried job wrote its archive once; the package references RecordModel's content-addressed copy of it.
    [trained] = [p for p in (run.work_dir / "s3").rglob("models/*/output/model.tar.gz") if p.is_file()]
    digest = hashlib.sha256(trained.read_bytes()).hexdigest()
    assert package.model_data.endswith(f"/{dev.settings.layout.registry}/{digest}/model.tar.gz")


def test_property_files_and_json_get_are_refused_by_name_before_anything_runs():
    """The definition reads step properties only; a definition with a property file is refused up front."""
    from local_runner.runner import validate_definition

    definition = {
        "Steps": [
            {"Name": "Evaluate", "Type": "Processing", "Arguments": {}, "PropertyFiles": [{"PropertyFileName": "e"}]},
            {
                "Name": "Check",
                "Type": "Condition",
                "Arguments": {
                    "Conditions": [{"LeftValue": {"Std:JsonGet": {"PropertyFile": "e", "Path": "f1"}}}],
                    "IfSteps": [],
                    "ElseSteps": [],
                },
            },
        ]
    }
    with pytest.raises(UnsupportedDefinition) as refused:
        validate_definition(definition)
    assert "fields ['PropertyFiles'] are not supported" in str(refused.value)
    assert "expression 'Std:JsonGet' is not supported" in str(refused.value)
