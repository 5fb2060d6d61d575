"""processing.tokenize_in = "fine_tune": train.py --tokenize_data validates and tokenizes the data channel itself
(preprocess.py's validate_and_tokenize, on local rank 0 of each node) while the node's other processes wait."""

from __future__ import annotations

import os
from pathlib import Path

import preprocess
import pytest
import train
from qa import benchmark, node_features
from qa.evaluation import ValidationSet
from qa.outputs import TOKENIZED_DONE, TOKENIZED_FAILED
from tasks import DEFAULT_TASK

from config.paths import SAMPLE_DATASET, bundled_model_dir
from tests.training_code.conftest import preprocess_sample_args

# 64-token windows, stride 16: most sample contexts make more than 2 windows.
TOO_MANY_WINDOWS = ("--max-seq-length", "64", "--doc-stride", "16", "--max-windows-per-example", "2")


class FakeClock:
    """A monotonic clock that sleeping advances."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def wait(directory: Path, launch: str, timeout: float = 5.0) -> str | None:
    clock = FakeClock()
    return node_features.wait(directory, launch, timeout, clock=clock, sleep=clock.sleep)


def test_a_waiting_process_goes_on_once_its_launch_marked_the_features_done(tmp_path):
    node_features.start(tmp_path / "tokenized")
    node_features.mark(tmp_path / "tokenized", True, "launch-1")
    assert wait(tmp_path / "tokenized", "launch-1") is None


def test_a_waiting_process_stops_with_one_line_when_the_tokenizer_failed(tmp_path):
    node_features.start(tmp_path)
    node_features.mark(tmp_path, False, "launch-1")
    problem = wait(tmp_path, "launch-1")
    assert problem is not None and "refused the dataset or failed" in problem and TOKENIZED_FAILED in problem


def test_a_waiting_process_gives_up_after_its_timeout_and_ignores_an_earlier_launchs_marker(tmp_path):
    node_features.mark(tmp_path, True, "an earlier launch")  # left in the folder: never this launch's features
    problem = wait(tmp_path, "launch-2", timeout=5.0)
    assert problem is not None and "within 5 s" in problem and TOKENIZED_DONE in problem
    assert wait(tmp_path, "an earlier launch") is None


def test_local_rank_0_or_a_single_process_tokenizes_and_the_others_wait():
    assert node_features.tokenizes_here({})
    assert node_features.tokenizes_here({"LOCAL_RANK": "0"})
    assert not node_features.tokenizes_here({"LOCAL_RANK": "3"})
    # mpirun's processes share its job id, torchrun's workers their agent (this process's parent here).
    assert node_features.launch_id({"OMPI_COMM_WORLD_RANK": "5", "OMPI_MCA_ess_base_jobid": "42"}) == "mpi:42"
    assert node_features.launch_id({"TORCHELASTIC_RUN_ID": "r"}) == f"r:{os.getppid()}"


def fine_tune_args(tmp_path: Path, *extra: str) -> list[str]:
    return [
        *("--tokenize_data", "true", "--data_dir", str(SAMPLE_DATASET)),
        *("--model_name_or_path", str(bundled_model_dir()), "--tokenized_dir", str(tmp_path / "tokenized")),
        *extra,
    ]


def test_another_local_rank_trains_on_the_features_its_node_tokenized(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    args = train.parse_args(fine_tune_args(tmp_path))
    node_features.start(args.tokenized_dir)
    node_features.mark(args.tokenized_dir, True, node_features.launch_id(os.environ))
    assert train.tokenize_on_node(args)
    assert (args.train_dir, args.validation_dir) == (tmp_path / "tokenized/train", tmp_path / "tokenized/validation")


def test_another_local_rank_stops_when_its_node_refused_the_dataset(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOCAL_RANK", "1")
    args = train.parse_args(fine_tune_args(tmp_path))
    node_features.start(args.tokenized_dir)
    node_features.mark(args.tokenized_dir, False, node_features.launch_id(os.environ))
    assert not train.tokenize_on_node(args)
    assert "error: this node's tokenizing process (local rank 0) refused the dataset" in capsys.readouterr().err


def test_a_record_over_max_windows_fails_fine_tune_before_training_with_preprocess_pys_lines(
    tmp_path, monkeypatch, capsys
):
    """The exact tokenizer finds the windows (no estimate): FineTune prints what ValidateAndTokenize prints for the
    same dataset, marks its node's features failed and exits 1 before the process group or any training step."""
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert preprocess.main(preprocess_sample_args(tmp_path / "processing", *TOO_MANY_WINDOWS)) == 1
    refused = capsys.readouterr().err
    assert "more than the 2 allowed (processing.max_windows_per_example)" in refused
    assert "error: dataset rejected" in refused

    flags = (
        "--max_seq_length",
        "64",
        "--doc_stride",
        "16",
        "--max_windows_per_example",
        "2",
        "--skip_invalid",
        "false",
    )
    assert train.main(fine_tune_args(tmp_path, *flags)) == 1
    out = capsys.readouterr()
    assert out.err == refused
    assert "step=" not in out.out and "tokenized " not in out.out
    assert (tmp_path / "tokenized" / TOKENIZED_FAILED).is_file()
    assert not (tmp_path / "tokenized" / "train").exists()


def test_fine_tune_passes_preprocess_py_only_the_values_it_was_given(tmp_path):
    argv = train.preprocess_argv(train.parse_args(fine_tune_args(tmp_path, "--skip_invalid", "true")))
    parsed = preprocess.parse_args(argv)
    assert parsed.manifest == SAMPLE_DATASET / "manifest.json" and parsed.data_dir == SAMPLE_DATASET
    assert parsed.output_dir == tmp_path / "tokenized" and parsed.skip_invalid is True
    assert parsed.max_seq_length == preprocess.parse_args([]).max_seq_length  # unset: preprocess.py's default
    assert parsed.benchmark_sha256 is None and "--benchmark-dir" not in argv
    with_benchmark = train.parse_args(fine_tune_args(tmp_path, "--benchmark_sha256", "ab" * 32))
    assert (
        preprocess.parse_args(train.preprocess_argv(with_benchmark)).benchmark_dir == with_benchmark.benchmark_data_dir
    )


@pytest.mark.parametrize("flag", ["--max_seq_length", "--max_windows_per_example"])
def test_a_bad_tokenization_flag_stops_the_job_before_any_work(flag, capsys):
    with pytest.raises(SystemExit):
        train.parse_args([flag, "0"])
    assert flag in capsys.readouterr().err


def staged_benchmark(root: Path) -> tuple[Path, str]:
    """The sample's validation split staged as `make stage-benchmark` stages it (a folder here); (its folder, the
    manifest's SHA-256 that evaluation.benchmark pins)."""

    def put(key: str, body: bytes) -> str:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(body)
        return "v1"

    _, sha256 = benchmark.stage(SAMPLE_DATASET, "bench", "v1", put, DEFAULT_TASK)
    return root / benchmark.prefix("bench", "v1"), sha256


def test_fine_tune_verifies_the_raw_benchmark_against_its_pin_and_tokenizes_it(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    folder, sha256 = staged_benchmark(tmp_path / "artifacts")
    args = train.parse_args(fine_tune_args(tmp_path, "--benchmark_data_dir", str(folder), "--benchmark_sha256", sha256))
    assert train.tokenize_on_node(args)
    assert len(ValidationSet.load(args.benchmark_dir).examples) == 84  # scored after validation, as from the channel
    # 420 + 84 examples, and the benchmark's 84 (the sample's validation split again).
    assert "tokenized 588 examples -> " in capsys.readouterr().out

    replaced = train.parse_args(
        fine_tune_args(tmp_path, "--benchmark_data_dir", str(folder), "--benchmark_sha256", "0" * 64)
    )
    assert not train.tokenize_on_node(replaced)
    assert f"not the pinned {'0' * 64}: it was replaced after" in capsys.readouterr().err
