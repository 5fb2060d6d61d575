"""checkov's accepted findings are inline skips with a reason, on exactly the resources README "checkov" names:
every Lambda function (three checks) and the access-log bucket (one); nothing else is skipped."""

from __future__ import annotations

import pytest

from stacks.checkov import ACCESS_LOG_BUCKET_FINDINGS, LAMBDA_FINDINGS


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_only_the_accepted_findings_are_skipped_each_with_its_reason(synthesized, env_name):
    skipped = {}
    for which, template in synthesized[env_name].templates.items():
        for logical_id, resource in template["Resources"].items():
            checkov = resource.get("Metadata", {}).get("checkov")
            if checkov:
                skipped[(which, logical_id)] = (resource["Type"], {s["id"]: s["comment"] for s in checkov["skip"]})
    functions = [key for key, (kind, _) in skipped.items() if kind == "AWS::Lambda::Function"]
    assert len(functions) >= 3  # ClaimManifest, EstimateTrainingCost, RecordModel (+ CDK's handlers in dev)
    for key, (kind, findings) in skipped.items():
        expected = LAMBDA_FINDINGS if kind == "AWS::Lambda::Function" else ACCESS_LOG_BUCKET_FINDINGS
        assert findings == expected, key
        assert all(reason.strip() for reason in findings.values())
    [bucket] = [key for key, (kind, _) in skipped.items() if kind == "AWS::S3::Bucket"]
    assert bucket[0] == "data" and bucket[1].startswith("AccessLogs")
    every_function = [
        (which, logical_id)
        for which, template in synthesized[env_name].templates.items()
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Function"
    ]
    assert sorted(functions) == sorted(every_function)
