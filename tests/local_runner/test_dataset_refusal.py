"""processing.tokenize_in "fine_tune" on the local runner: a bad dataset fails the execution at DatasetValid with the
claim's refusal (the lines ValidateAndTokenize prints), and no job step starts. Built from the settings with local
deploy-time values (no synth), uploaded as `make upload-dataset` uploads it; no job runs, so it is fast."""

from __future__ import annotations

import json
import shutil

from config import load_settings
from local_runner.assembly import LocalAccount, resolve_intrinsics
from local_runner.trigger import upload_dataset
from pipeline_steps import names
from pipeline_steps.definition import definition_json
from tests.local_runner.test_runner import SAMPLE, runner_for


def test_a_bad_dataset_fails_at_dataset_valid_with_the_claims_lines_before_any_job(cdk_context, tmp_path):
    settings = load_settings(cdk_context)  # processing.tokenize_in "fine_tune", the default
    account = LocalAccount()
    values = account.deploy_time_values("code-bucket", "code.tar.gz", "0" * 64)
    definition = json.loads(resolve_intrinsics({"Fn::Sub": definition_json(settings, values)}, account.pseudo()))
    dataset = tmp_path / "dataset"
    shutil.copytree(SAMPLE, dataset)
    train = dataset / "train" / "train.jsonl"
    lines = train.read_text().splitlines()
    bad = {**json.loads(lines[1]), "question": ""}
    train.write_text("\n".join([lines[0], json.dumps(bad), *lines[2:]]) + "\n")

    runner = runner_for(definition, tmp_path)
    datasets = settings.bucket_name("datasets", account.account, account.region)
    key, version = upload_dataset(runner.store, dataset, datasets, "squad", "v1")
    result = runner.run({names.DATASET_BUCKET: datasets, names.MANIFEST_KEY: key, names.MANIFEST_VERSION_ID: version})

    assert result.status == "Failed"
    expected = (
        "1 problem(s) in the dataset:\n"
        f"  - train/train.jsonl:line 2 id={bad['id']} field=question: is empty (fix: remove the record or fill in "
        "'question')\nerror: dataset rejected (1 problem(s)); fix them, or pass --skip-invalid true to drop invalid "
        "records"
    )
    assert result.failure is not None and expected in result.failure
    assert [step.name for step in result.steps] == [
        names.CLAIM_STEP,
        names.PARAMETERS_STEP,
        names.FIRST_DELIVERY_STEP,
        names.DATASET_VALID_STEP,
        names.DATASET_FAIL_STEP,
    ]
    assert result.resources == {} and not any(step.type in ("Processing", "Training") for step in result.steps)
    # No job step started: no processing or training job folder.
    assert not (tmp_path / result.execution_id).exists() or not any((tmp_path / result.execution_id).iterdir())
