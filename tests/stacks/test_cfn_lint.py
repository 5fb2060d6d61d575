"""cfn-lint over every synthesized template: no errors, and the warnings we accept listed explicitly."""

from __future__ import annotations

import pytest

from tests.stacks.conftest import cfn_lint_problems


@pytest.mark.parametrize("env_name", ["dev", "prod"])
@pytest.mark.parametrize("which", ["data", "network", "pipeline"])
def test_cfn_lint_clean(synthesized, env_name, which):
    assert cfn_lint_problems(synthesized[env_name].templates[which]) == []


def test_cfn_lint_clean_with_the_cpu_job(synthesized_cpu_job):
    """processing.tokenize_in "cpu_job" changes the pipeline stack only (the claim's size, the estimate's read, the
    processing job's grants)."""
    assert cfn_lint_problems(synthesized_cpu_job["dev"].templates["pipeline"]) == []


def test_cfn_lint_catches_errors():
    bad = {"Resources": {"B": {"Type": "AWS::S3::Bucket", "Properties": {"BucketNam": "x"}}}}
    assert [problem.split()[0] for problem in cfn_lint_problems(bad)] == ["E3002"]
