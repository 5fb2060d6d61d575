"""Ids of the stack outputs that readers of a synthesized template look up (the local runner reads the bucket
names from cdk.out). No CDK import here, so a reader loads no CDK."""

DATASETS_BUCKET_OUTPUT = "DatasetsBucketName"
ARTIFACTS_BUCKET_OUTPUT = "ArtifactsBucketName"
TASK_OUTPUT = "Task"  # a pipeline stack's: the task its pipeline trains (one stack per task of an environment)
