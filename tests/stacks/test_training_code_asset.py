"""TrainingCodeAsset alone in a bare stack: a reproducible tarball, downloadable by exactly one grantee."""

from __future__ import annotations

import gzip
import io
import tarfile

from aws_cdk.assertions import Template

from stacks.pipeline import TRAINING_CODE, TrainingCodeAsset
from stacks.source_bundle import build_source_tarball
from tests.stacks.conftest import grantee, statements_of


def test_code_asset_is_a_reproducible_tarball_of_training_code():
    first, second = build_source_tarball(TRAINING_CODE), build_source_tarball(TRAINING_CODE)
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(first))) as tar:
        names = tar.getnames()
        assert {"train.py", "preprocess.py", "inference.py", "pipeline_functions.py", "qa/checkpoints.py"} <= set(names)
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        assert {m.mtime for m in tar.getmembers()} == {0}


def test_grant_download_reads_exactly_the_code_object(bare_stack, dev_settings, tmp_path):
    stack = bare_stack(dev_settings)
    code = TrainingCodeAsset(stack, "TrainingCode", build_dir=tmp_path / "build")
    code.grant_download(grantee(stack))
    template = Template.from_stack(stack)
    object_key = stack.resolve(code.asset.s3_object_key)
    assets_bucket = {"Fn::Sub": "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}"}
    bucket_arn = ["arn:", {"Ref": "AWS::Partition"}, ":s3:::", assets_bucket]
    assert statements_of(template) == [
        {
            "Sid": "ReadTrainingCode",
            "Action": "s3:GetObject",
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", [*bucket_arn, f"/{object_key}"]]},
        },
        {
            "Sid": "ListTrainingCode",
            "Action": "s3:ListBucket",
            "Condition": {"StringEquals": {"s3:prefix": [object_key]}},
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", bucket_arn]},
        },
    ]
