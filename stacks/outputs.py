"""Ids of the stack outputs that readers of a synthesized template look up (the local runner reads the bucket
names from cdk.out). No CDK import here, so a reader loads no CDK."""

DATASETS_BUCKET_OUTPUT = "DatasetsBucketName"
ARTIFACTS_BUCKET_OUTPUT = "ArtifactsBucketName"
