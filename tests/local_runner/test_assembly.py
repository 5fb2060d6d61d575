"""Reading the synthesized stacks with local values: the pipeline, its trigger, the buckets it works in."""

from __future__ import annotations

from local_runner.assembly import LocalAccount, load_synthesized_pipeline


def test_the_buckets_are_the_data_stacks_outputs_resolved_locally(dev):
    account = LocalAccount()
    pipeline = load_synthesized_pipeline(dev.assembly, dev.settings.stack_name("pipeline"), account)
    for purpose, bucket in (("datasets", pipeline.datasets_bucket), ("artifacts", pipeline.artifacts_bucket)):
        assert bucket == dev.settings.bucket_name(purpose, account.account, account.region)
