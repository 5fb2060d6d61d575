"""Each step's Arguments against AWS's own API model (botocore), expressions replaced by typed dummies;
every `Get` reference resolves; the hyperparameters are exactly what train.py accepts."""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator

from pipeline_steps.walk import all_steps, expressions, is_expression
from tests.pipeline_steps.conftest import step

OPERATIONS = {
    "Processing": "CreateProcessingJob",
    "Training": "CreateTrainingJob",
    "RegisterModel": "CreateModelPackage",
}
NAME_FIELDS = {"Processing": {"ProcessingJobName": "job"}, "Training": {"TrainingJobName": "job"}}
DUMMIES = {"string": "dummy", "integer": 1, "long": 1, "float": 1.0, "double": 1.0, "boolean": True}


def sagemaker_model():
    return botocore.session.get_session().get_service_model("sagemaker")


def with_dummies(value: Any, shape) -> Any:
    """Replace pipeline expressions by a value of the type the API shape expects there."""
    if is_expression(value):
        return DUMMIES[shape.type_name]
    if shape.type_name == "structure" and isinstance(value, dict):
        return {k: with_dummies(v, shape.members[k]) if k in shape.members else v for k, v in value.items()}
    if shape.type_name == "list" and isinstance(value, list):
        return [with_dummies(v, shape.member) for v in value]
    if shape.type_name == "map" and isinstance(value, dict):
        return {k: with_dummies(v, shape.value) for k, v in value.items()}
    return value


@pytest.mark.parametrize("step_type", sorted(OPERATIONS))
def test_arguments_match_the_api_shape(definition, cpu_job_definition, step_type):
    """Every job step of both graphs (ValidateAndTokenize is in the cpu_job graph only)."""
    model = sagemaker_model()
    steps = [s for d in (definition, cpu_job_definition) for s in all_steps(d["Steps"]) if s["Type"] == step_type]
    assert steps
    for candidate in steps:
        shape = model.operation_model(OPERATIONS[step_type]).input_shape
        params = with_dummies({**NAME_FIELDS.get(step_type, {}), **candidate["Arguments"]}, shape)
        report = ParamValidator().validate(params, shape)
        assert not report.has_errors(), f"{candidate['Name']}: {report.generate_report()}"


# Lambda steps have no botocore shape: the Pipelines definition reference names their fields - FunctionArn,
# OutputParameters (OutputName, OutputType: String | Integer | Boolean | Float), Arguments (the function's event)
# (https://docs.aws.amazon.com/sagemaker/latest/dg/build-and-manage-steps-types.html#step-type-lambda).
LAMBDA_STEP_FIELDS = {"Name", "Type", "Arguments", "FunctionArn", "OutputParameters", "Description", "DependsOn"}


def test_lambda_steps_have_the_fields_the_definition_reference_names(definition):
    lambdas = [s for s in all_steps(definition["Steps"]) if s["Type"] == "Lambda"]
    assert {s["Name"] for s in lambdas} == {"ClaimManifest", "EstimateTrainingCost", "RecordModel"}
    for candidate in lambdas:
        assert set(candidate) <= LAMBDA_STEP_FIELDS, candidate["Name"]
        assert candidate["FunctionArn"].startswith("${") and candidate["FunctionArn"].endswith("FunctionArn}")
        outputs = candidate["OutputParameters"]
        assert outputs and all(o["OutputType"] in ("String", "Integer", "Boolean", "Float") for o in outputs)
        # The event is one JSON object of flat values (structured inputs travel as JSON text).
        assert all(is_expression(v) or isinstance(v, (str, int, float, bool)) for v in candidate["Arguments"].values())


def test_the_validation_catches_unknown_keys_and_wrong_types(definition):
    shape = sagemaker_model().operation_model("CreateTrainingJob").input_shape
    args = json.loads(json.dumps(step(definition, "FineTune")["Arguments"]))
    args["StoppingCondition"]["MaxRuntimeInSeconds"] = "ten hours"
    args["Typo"] = 1
    report = ParamValidator().validate(with_dummies({"TrainingJobName": "x", **args}, shape), shape)
    assert "Typo" in report.generate_report() and "MaxRuntimeInSeconds" in report.generate_report()


def get_references(node: Any) -> list[str]:
    """What every `{"Get": ...}` in `node` refers to."""
    return [expression["Get"] for expression in expressions(node) if "Get" in expression]


def test_every_get_reference_resolves(definition):
    parameters = {p["Name"] for p in definition["Parameters"]}
    steps = {s["Name"]: s for s in all_steps(definition["Steps"])}
    seen = get_references(definition["Steps"])
    assert seen
    for ref in seen:
        kind, _, rest = ref.partition(".")
        if kind == "Parameters":
            assert rest in parameters, ref
        elif kind == "Execution":
            assert rest in ("PipelineExecutionId", "PipelineName", "PipelineExecutionArn"), ref
        elif kind == "Steps":
            name, _, path = rest.partition(".")
            assert name in steps, ref
            if path.startswith("PropertyFiles."):
                declared = {p["PropertyFileName"] for p in steps[name].get("PropertyFiles", [])}
                assert path.split(".")[1] in declared, ref
            elif path.startswith("ProcessingOutputConfig.Outputs["):
                output = path.split("['")[1].split("']")[0]
                outputs = steps[name]["Arguments"]["ProcessingOutputConfig"]["Outputs"]
                assert output in {o["OutputName"] for o in outputs}, ref
            elif path.startswith("OutputParameters["):
                output = path.split("['")[1].split("']")[0]
                assert output in {o["OutputName"] for o in steps[name].get("OutputParameters", [])}, ref
            elif path.startswith("FinalMetricDataList["):
                metric = path.split("['")[1].split("']")[0]
                definitions = steps[name]["Arguments"]["AlgorithmSpecification"]["MetricDefinitions"]
                assert metric in {d["Name"] for d in definitions} and path.endswith("].Value"), ref
            else:
                assert path.startswith("ModelArtifacts."), ref
        else:
            pytest.fail(f"unknown reference {ref}")


def test_hyperparameters_are_exactly_what_train_py_parses(cpu_job_definition, env_definition):
    """In both graphs: processing.tokenize_in = "cpu_job" (features from ValidateAndTokenize) and "fine_tune"."""
    for tokenizes, built in ((False, cpu_job_definition), (True, env_definition)):
        args, defaults = parsed_hyperparameters(built)
        assert args["epochs"] == defaults["Epochs"] and args["learning_rate"] == defaults["LearningRate"]
        assert args["precision"] == "bf16"
        # FineTune tokenizes with ValidateAndTokenize's values (its arguments: the next test).
        assert args["tokenize_data"] is tokenizes
        if tokenizes:
            assert (args["max_seq_length"], args["doc_stride"], args["skip_invalid"]) == (384, 128, False)
            assert args["manifest_version"] == defaults["ManifestVersionId"]
            channels = {c["ChannelName"] for c in step(built, "FineTune")["Arguments"]["InputDataConfig"]}
            assert (args["benchmark_sha256"] is not None) is ("benchmark_data" in channels)


def parsed_hyperparameters(definition) -> tuple[dict[str, Any], dict[str, Any]]:
    """train.py's parse of FineTune's hyperparameters (each one must be a flag of it), and the parameter defaults."""
    import train

    defaults = {p["Name"]: p["DefaultValue"] for p in definition["Parameters"]}
    hyperparameters = step(definition, "FineTune")["Arguments"]["HyperParameters"]
    argv = []
    for name, value in hyperparameters.items():
        if name.startswith("sagemaker_"):  # consumed by the SageMaker training toolkit
            continue
        if is_expression(value):
            [ref] = get_references(value)
            value = str(defaults[ref.split(".", 1)[1]])
        else:
            value = json.loads(value) if value.startswith('"') else value
        argv += [f"--{name}", str(value)]
    args = vars(train.parse_args(argv))
    user_hps = {k for k in hyperparameters if not k.startswith("sagemaker_")}
    assert user_hps <= set(args)
    return args, defaults


def test_container_arguments_are_exactly_what_preprocess_py_parses(cpu_job_definition):
    definition = cpu_job_definition
    """ValidateAndTokenize passes preprocess.py's flags by name: each must parse, each value reach its option."""
    import preprocess

    defaults = {p["Name"]: p["DefaultValue"] for p in definition["Parameters"]}
    program, *argv = step(definition, "ValidateAndTokenize")["Arguments"]["AppSpecification"]["ContainerArguments"]
    assert program == "preprocess.py"
    resolved = [str(defaults[get_references(a)[0].split(".", 1)[1]]) if is_expression(a) else a for a in argv]
    args = vars(preprocess.parse_args(resolved))
    passed = {
        flag.removeprefix("--").replace("-", "_"): value
        for flag, value in zip(resolved[::2], resolved[1::2], strict=True)
    }
    assert set(passed) <= set(args)
    assert {name: str(args[name]) for name in passed} == {
        name: value if name != "skip_invalid" else str(value == "true") for name, value in passed.items()
    }


def resolved(value: Any, run_time: dict[str, str]) -> str:
    """A definition value with each `Get` replaced by its run-time value and each Std:Join joined."""
    if isinstance(value, dict) and "Get" in value:
        return run_time[value["Get"]]
    if isinstance(value, dict) and "Std:Join" in value:
        join = value["Std:Join"]
        return join["On"].join(resolved(v, run_time) for v in join["Values"])
    return str(value)


@pytest.mark.parametrize("which", ["definition", "prod_definition"])
def test_model_metadata_fits_the_api_for_the_longest_values_the_claim_accepts(request, which):
    """CustomerMetadataProperties: keys of 1-128 and values of 1-256 characters of one pattern
    (API_CreateModelPackage, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModelPackage.html;
    botocore's CustomerMetadataKey/Value). RegisterModel runs after FineTune is billed, so every value must fit for
    the longest start ClaimManifest lets through: a 63-character bucket, a dataset name and version of 100
    characters each, a 256-character ManifestVersionId and UploadedBy; prod's benchmark adds its pin's values.
    Before, `dataset_manifest` was the s3:// URI: 293."""
    definition = request.getfixturevalue(which)
    from pipeline_functions import manifest_key_pattern
    from qa.parameter_rules import metadata_value_problem, parameter_error

    from tests.training_code.test_parameter_rules import S3_VERSION_ID, start_event

    bucket, key = "b" * 63, f"datasets/{'n' * 100}/{'v' * 100}/manifest.json"
    start = start_event(DatasetBucket=bucket, ManifestKey=key, ManifestVersionId="a" * 256, UploadedBy="u" * 256)
    assert manifest_key_pattern("datasets").fullmatch(key) and parameter_error(start) == ""
    parameters = ("DatasetBucket", "ManifestKey", "ManifestVersionId", "UploadedBy")
    run_time = {f"Parameters.{name}": str(start[name]) for name in parameters}
    run_time |= {
        "Steps.RecordModel.OutputParameters['ModelSha256']": "f" * 64,
        # S3 documents version ids of up to 1,024 bytes, and this one exists only after FineTune: a real one.
        "Steps.RecordModel.OutputParameters['ModelVersionId']": S3_VERSION_ID,
        "Steps.FineTune.FinalMetricDataList['eval:f1'].Value": "87.123456789",
        # The longest partition and a long region; a name_prefix of 20 characters; execution ids have 12.
        "Execution.PipelineExecutionArn": f"arn:aws-us-gov:sagemaker:ap-southeast-5:123456789012:pipeline/{'p' * 20}"
        "-qa-fine-tuning/execution/abcdefghijkl",
        "Steps.FineTune.FinalMetricDataList['benchmark:f1'].Value": "86.123456789",
        "Steps.ClaimManifest.OutputParameters['ManifestSha256']": "f" * 64,
    }
    model = sagemaker_model()
    key_shape, value_shape = model.shape_for("CustomerMetadataKey"), model.shape_for("CustomerMetadataValue")
    # The pattern qa.parameter_rules implements (Unicode categories L, Z, N and _.:/=+-@), for keys and values.
    assert key_shape.metadata["pattern"] == "([\\p{L}\\p{Z}\\p{N}_.:\\/=+\\-@]*)${1,128}"
    metadata = step(definition, "RegisterModel-RegisterModel")["Arguments"]["CustomerMetadataProperties"]
    for name, value in metadata.items():
        assert key_shape.metadata["min"] <= len(name) <= key_shape.metadata["max"] and not metadata_value_problem(name)
        text = resolved(value, run_time)
        assert value_shape.metadata["min"] <= len(text) <= value_shape.metadata["max"], (name, len(text))
        assert not metadata_value_problem(text), name
