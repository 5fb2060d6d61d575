"""Where things live in the artifacts bucket: one definition shared by the stacks (IAM scoping,
lifecycle rules) and the pipeline definition (S3 URIs)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ArtifactLayout:
    """Key prefixes (no leading or trailing slash) inside the artifacts bucket."""

    checkpoints: str = "checkpoints"
    processed: str = "processed"
    models: str = "models"
    evaluation: str = "evaluation"
    base_models: str = "base-models"
    pipeline_code: str = "pipeline-code"
    claims: str = "claims"  # one object per uploaded manifest version: the execution that owns it

    def writable_by_jobs(self) -> tuple[str, ...]:
        """Prefixes that training and processing jobs write to."""
        return (self.checkpoints, self.processed, self.models, self.evaluation, self.claims)
