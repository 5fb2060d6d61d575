"""Where things live in the artifacts bucket: one definition shared by the stacks (IAM scoping,
lifecycle rules) and the pipeline definition (S3 URIs)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from types import ModuleType

from qa.outputs import BENCHMARKS_ROOT, DATASET_MANIFEST_FILE, DATASETS_ROOT, HELD_MANIFEST_FILE, datasets_root


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
    inputs: str = "inputs"  # per manifest version: its data files copied at the versions the manifest pins
    tensorboard: str = "tensorboard"  # FineTune's TensorBoardOutputConfig, one folder per execution
    mlflow: str = "mlflow"  # the managed MLflow tracking server's artifact store (tracking.managed_server)
    # RecordModel's content-addressed copies of trained archives, registry/<sha256>/model.tar.gz: what model
    # packages reference. Only RecordModel's role writes there (bucket policy), nothing there expires.
    registry: str = "registry"
    benchmarks: str = BENCHMARKS_ROOT  # the operator's benchmarks (`make stage-benchmark`; evaluation.benchmark)

    @classmethod
    def of_pipeline(cls, infix: str, checkpoints: str = "checkpoints") -> ArtifactLayout:
        """The layout of one pipeline of an environment (`infix`: its task's RESOURCE_INFIX, "" for question
        answering, whose prefixes stay the defaults): what its executions claim, pin, write and register lives under
        prefixes of its own (PIPELINE_PREFIXES + infix, as its dataset root is datasets<infix>/), so its roles, scoped
        by prefix, reach no other pipeline's; the staged base models, the pipeline code, the MLflow store and the
        benchmarks root are the environment's."""
        layout = cls(checkpoints=checkpoints)
        return replace(layout, **{name: getattr(layout, name) + infix for name in PIPELINE_PREFIXES})

    def writable_by_jobs(self, features_job: bool = True) -> tuple[str, ...]:
        """Prefixes that training and processing jobs write to (claims, inputs and evaluation reports are written
        by the pipeline's Lambda functions only); `features_job` False (processing.tokenize_in "fine_tune"): no
        ValidateAndTokenize, so nothing writes processed/."""
        features = (self.processed,) if features_job else ()
        return (self.checkpoints, *features, self.models, self.tensorboard)

    def listed_by_jobs(self, features_job: bool = True) -> tuple[str, ...]:
        """Prefixes SageMaker lists for the jobs, with the job role: the S3Prefix inputs (the base model and
        tokenizer under base-models/, the pinned data under inputs/, the features under processed/ when
        `features_job`) and the checkpoint folder it syncs back at the start of a (resumed) training job
        (model-checkpoints page). The job code lists nothing itself: the jobs are network-isolated."""
        features = (self.processed,) if features_job else ()
        return (self.base_models, self.inputs, *features, self.checkpoints)

    def expiring_versions(self) -> tuple[str, ...]:
        """Prefixes whose noncurrent object versions expire (the artifacts bucket's lifecycle rules): every prefix
        but those of what model packages reference (the registry copies, the evaluation reports of their
        ModelMetrics, the benchmark version that gated them) and the checkpoints', which have a rule of their own."""
        kept = {self.registry, self.evaluation, self.benchmarks, self.checkpoints}
        return tuple(p for p in (getattr(self, f.name) for f in fields(self)) if p not in kept)

    def deletable_by_jobs(self) -> tuple[str, ...]:
        """Prefixes where training jobs delete: SageMaker mirrors the script's checkpoint pruning to S3 ("If a
        checkpoint is deleted in the SageMaker AI container, it will also be deleted in the S3 folder",
        https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints.html)."""
        return (self.checkpoints,)


# The ArtifactLayout prefixes each pipeline has its own of (ArtifactLayout.of_pipeline).
PIPELINE_PREFIXES = ("checkpoints", "processed", "models", "evaluation", "claims", "inputs", "tensorboard", "registry")


@dataclass(frozen=True)
class DatasetLayout:
    """Where uploaded datasets live in the datasets bucket: `datasets/<name>/<version>/`, data files first,
    `manifest.json` last (its arrival is what starts the pipeline)."""

    root: str = DATASETS_ROOT
    manifest_name: str = DATASET_MANIFEST_FILE
    held_manifest_name: str = HELD_MANIFEST_FILE  # a held upload's: no trigger matches it (qa.outputs)

    @classmethod
    def of_task(cls, task: ModuleType) -> DatasetLayout:
        """The layout of the uploads of `task`'s pipeline: under its own root (qa.outputs.datasets_root)."""
        return cls(root=datasets_root(task.RESOURCE_INFIX))

    def prefix(self, name: str, version: str) -> str:
        return f"{self.root}/{name}/{version}/"

    def manifest_key(self, name: str, version: str, held: bool = False) -> str:
        return self.prefix(name, version) + (self.held_manifest_name if held else self.manifest_name)

    @staticmethod
    def manifest_body(bucket: str, prefix: str, keys: list[str]) -> list[object]:
        """The manifest (SageMaker's ManifestFile format): the S3 prefix, then every data key relative to it."""
        return [{"prefix": f"s3://{bucket}/{prefix}"}, *keys]

    @property
    def manifest_key_pattern(self) -> str:
        """An EventBridge wildcard that matches every manifest key; its `*` also spans `/`, so deeper keys ending in
        `/manifest.json` match too (stacks/trigger.py; the claim step ends those)."""
        return self.manifest_key("*", "*")
