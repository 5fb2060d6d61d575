"""Where AWS keeps what this project grants access to or links to: SageMaker's job log groups and the console's
pages. The stacks (IAM scoping, notification texts) and the tools (log reading, links) import them from here."""

from __future__ import annotations

# SageMaker writes a job's logs to /aws/sagemaker/TrainingJobs or /aws/sagemaker/ProcessingJobs, one stream
# per instance named <job name>/algo-<n>-<epoch> (training) or <job name>/<instance> (processing):
# https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html
JOB_LOG_GROUPS = {"TrainingJob": "/aws/sagemaker/TrainingJobs", "ProcessingJob": "/aws/sagemaker/ProcessingJobs"}

# The log retentions (days) the project sets: whole weeks, months and years among the values CloudWatch Logs accepts
# ("Possible values are: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
# 2922, 3288, and 3653": https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutRetentionPolicy.html).
LOG_RETENTION_DAYS = (7, 14, 30, 90, 180, 365, 731, 1827, 3653)


def log_retention_days(days: int) -> int:
    """The shortest of LOG_RETENTION_DAYS that keeps logs at least `days` days (the longest, if none does)."""
    return next((value for value in LOG_RETENTION_DAYS if value >= days), LOG_RETENTION_DAYS[-1])


# Console pages (their addresses are the console's, not a documented API: links for a person to open). `region`
# may be a CDK token (the notification texts).
def console_url(region: str, fragment: str) -> str:
    return f"https://{region}.console.aws.amazon.com/{fragment}"


def pipeline_console_url(region: str, pipeline_name: str) -> str:
    return console_url(region, f"sagemaker/home?region={region}#/pipelines/{pipeline_name}")


def execution_console_url(region: str, pipeline_name: str, execution_arn: str) -> str:
    execution_id = execution_arn.rsplit("/", 1)[-1]
    return f"{pipeline_console_url(region, pipeline_name)}/executions/{execution_id}"


def job_console_url(region: str, kind: str, job_name: str) -> str:
    """`kind`: TrainingJob or ProcessingJob."""
    page = {"TrainingJob": "jobs", "ProcessingJob": "processing-jobs"}[kind]
    return console_url(region, f"sagemaker/home?region={region}#/{page}/{job_name}")
