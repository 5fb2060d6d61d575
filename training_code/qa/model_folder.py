"""A Hugging Face model folder as `make stage-model` and `make train` take it (tools/stage_model.py, the local
runner): its files, whether its tokenizer fits its config.json, a hub id's snapshot. Standard library only, but for
the hub download (huggingface_hub, imported when a hub id is fetched: never in the containers, never in tests)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

# What a staged model folder needs (the training job loads it with `from_pretrained`).
MODEL_CONFIG = "config.json"
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin")
SKIPPED_PARTS = {".git", ".cache", "onnx", "openvino", "coreml", "tf_model.h5", "flax_model.msgpack", "rust_model.ot"}
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


class ModelFolderError(ValueError):
    """A model folder or hub id that cannot be staged; the message is one line naming the fix."""


def _fail(message: str) -> NoReturn:
    raise ModelFolderError(message)


def missing_model_parts(relative_names: Iterable[str]) -> list[str]:
    """What a model folder with these files lacks at its top level (where `from_pretrained` looks): config,
    tokenizer or weights (empty when complete)."""
    names = [name for name in relative_names if "/" not in name]
    missing = []
    if MODEL_CONFIG not in names:
        missing.append(MODEL_CONFIG)
    if not any(name in TOKENIZER_FILES for name in names):
        missing.append(f"tokenizer ({' or '.join(TOKENIZER_FILES[:2])})")
    if not any(name.endswith(WEIGHT_SUFFIXES) for name in names):
        missing.append("weights (*.safetensors or *.bin)")
    return missing


def model_files(model_dir: Path) -> list[Path]:
    """The files to stage; fails when the folder is not a usable model."""
    files = sorted(
        p
        for p in model_dir.rglob("*")
        if p.is_file()
        and not SKIPPED_PARTS.intersection(p.relative_to(model_dir).parts)
        and p.name not in SKIPPED_PARTS
    )
    missing = missing_model_parts(p.relative_to(model_dir).as_posix() for p in files)
    if missing:
        _fail(f"{model_dir} lacks {', '.join(missing)}: pass a Hugging Face model folder (save_pretrained output)")
    return files


def tokenizer_ids(model_dir: Path) -> dict[str, int] | None:
    """Token -> id as the folder's tokenizer files define them (tokenizer.json, else vocab.json, else vocab.txt;
    then added_tokens.json), read without loading a tokenizer; None when none of these is there (a SentencePiece
    .model alone is not read here)."""
    ids: dict[str, int] | None = None
    fast = model_dir / "tokenizer.json"
    if fast.is_file():
        tokenizer = json.loads(fast.read_text(encoding="utf-8"))
        vocab = (tokenizer.get("model") or {}).get("vocab")
        if isinstance(vocab, dict):  # WordPiece, BPE, WordLevel
            ids = {str(token): int(index) for token, index in vocab.items()}
        elif isinstance(vocab, list):  # Unigram: [piece, score] pairs in id order
            ids = {str(entry[0]): index for index, entry in enumerate(vocab)}
        for added in tokenizer.get("added_tokens") or []:
            ids = (ids or {}) | {str(added["content"]): int(added["id"])}
    elif (model_dir / "vocab.json").is_file():
        ids = {str(k): int(v) for k, v in json.loads((model_dir / "vocab.json").read_text(encoding="utf-8")).items()}
    elif (model_dir / "vocab.txt").is_file():
        lines = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
        ids = {token: index for index, token in enumerate(lines)}
    added_file = model_dir / "added_tokens.json"
    if added_file.is_file():
        added = json.loads(added_file.read_text(encoding="utf-8"))
        ids = (ids or {}) | {str(k): int(v) for k, v in added.items()}
    return ids


def tokenizer_mismatch(model_dir: Path, config: dict[str, Any]) -> str:
    """ "" when the folder's tokenizer fits its config.json, else one line naming the difference and the fix: every
    token id must have an embedding row (id < vocab_size), and the padding token must be the config's pad_token_id
    (a RoBERTa tokenizer beside a BERT config gives ids the model never learned)."""
    ids = tokenizer_ids(model_dir)
    if not ids:
        return ""
    model = f"model_type {config.get('model_type', '?')!r}"
    problem = ""
    vocab_size = config.get("vocab_size")
    if isinstance(vocab_size, int) and max(ids.values()) >= vocab_size:
        problem = f"its token ids reach {max(ids.values())}, and config.json ({model}) has vocab_size {vocab_size}"
    settings_file = model_dir / "tokenizer_config.json"
    pad = json.loads(settings_file.read_text(encoding="utf-8")).get("pad_token") if settings_file.is_file() else None
    pad = pad.get("content") if isinstance(pad, dict) else pad
    pad_id, config_pad_id = ids.get(pad) if isinstance(pad, str) else None, config.get("pad_token_id")
    if not problem and isinstance(config_pad_id, int) and pad_id is not None and pad_id != config_pad_id:
        problem = (
            f"its padding token {pad!r} is id {pad_id}, and config.json ({model}) has pad_token_id {config_pad_id}"
        )
    if not problem:
        return ""
    return (
        f"the tokenizer in {model_dir} is not this model's: {problem}; save the model and its own tokenizer from one "
        f"checkpoint (AutoTokenizer.from_pretrained(<model>).save_pretrained({model_dir}))"
    )


def checked_model(model_dir: Path) -> dict[str, Any]:
    """config.json of a model folder fit to stage (model_files, tokenizer_mismatch); fails naming the fix."""
    model_files(model_dir)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    problem = tokenizer_mismatch(model_dir, config)
    if problem:
        _fail(problem)
    return dict(config)


def download(model_id: str) -> Path:
    """The hub snapshot of `model_id` (config, tokenizer, safetensors weights)."""
    import httpx
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )

    try:
        return Path(snapshot_download(model_id, allow_patterns=["*.json", "*.txt", "*.safetensors", "*.model"]))
    except RepositoryNotFoundError:
        _fail(
            f"the model hub {constants.ENDPOINT} has no model {model_id!r} you may read: check the model id "
            "(for a private or gated model, set HF_TOKEN)"
        )
    except HfHubHTTPError as err:  # before OSError: the hub answered, with an error status
        status = err.response.status_code if err.response is not None else "?"
        _fail(f"the model hub answered {status} for {model_id!r}: check the model id (and HF_TOKEN for gated models)")
    except (LocalEntryNotFoundError, OfflineModeIsEnabled, OSError, httpx.HTTPError) as err:
        _fail(
            f"cannot download {model_id!r} from the model hub {constants.ENDPOINT} ({type(err).__name__}) and "
            "there is no local folder of that name: run this where the hub is reachable, or pass a model folder"
        )


def local_model_dir(model: str) -> Path | None:
    """`model` as a local folder; None when it is a hub id; fails when it names a folder that is not there."""
    local = Path(model).expanduser()
    if local.is_dir():
        return local
    if local.exists():
        _fail(f"--model {model}: is a file; pass the model folder (with config.json) or a hub id")
    if not HUB_ID.match(model) or model.startswith((".", "~")) or Path(model).is_absolute():
        _fail(f"--model {model}: no such directory; pass an existing model folder or a hub id like org/name")
    return None


def own_name(model: str) -> str:
    """The folder name a model is staged under when nothing else names it: a folder's own name, or a hub id's
    last part (`org/name` -> `name`)."""
    return Path(model).expanduser().resolve().name if Path(model).expanduser().is_dir() else model.rsplit("/", 1)[-1]
