"""Batches for training and serving: in-memory features, length-grouped sampling, dynamic padding."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qa.feature_files import read_features
from qa.features import LABELS, MODEL_INPUTS

IGNORED_LABEL = -100  # a token label the loss skips: the padding of token-level label columns (transformers' default)


class FeatureDataset(torch.utils.data.Dataset):
    """Tokenized training features held as Python lists (fast random access, no Arrow per item)."""

    def __init__(self, columns: dict[str, list[Any]]) -> None:
        self.columns = columns
        self.lengths = [len(ids) for ids in columns["input_ids"]]

    @classmethod
    def load(cls, directory: Path, label_columns: tuple[str, ...]) -> FeatureDataset:
        """The model inputs and the task's label columns of a split folder preprocess.py wrote (qa.feature_files)."""
        return cls(read_features(directory, (*MODEL_INPUTS, *label_columns)))

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {name: values[index] for name, values in self.columns.items()}


class LengthGroupedSampler(torch.utils.data.Sampler[int]):
    """Shuffled indices where neighbouring batches have similar lengths (less padding per batch).

    Indices are shuffled per epoch with (seed, epoch), cut into mega-batches of up to `group_size * 50`, and
    each mega-batch is sorted by length, longest first. Small datasets get smaller mega-batches (at least four
    per epoch), so batches still change from epoch to epoch instead of being one global sort. The order
    depends only on (seed, epoch), so a resumed run replays the same batches, and every rank draws the same
    order (Accelerate then deals the batches out across ranks).

    `batch_size` (the loader's per-device batch): exact-length grouping. Inside each mega-batch, features of
    exactly the same length fill whole batches first; the rest, sorted by length, fill the remaining batches
    (each padded to its own longest). The batches are then ordered longest first, a short last batch at the
    end, so the loader's consecutive `batch_size` slices are exactly these batches. A batch of one length needs
    no padding and so no attention mask (DynamicPaddingCollator `drop_full_mask`), which lets SDPA take its
    flash kernel. `group_size` must be a multiple of `batch_size` (the global batch is).
    """

    def __init__(
        self, lengths: Sequence[int], group_size: int, seed: int, shuffle: bool = True, batch_size: int | None = None
    ) -> None:
        self.lengths = list(lengths)
        group_size = max(1, group_size)
        if batch_size is not None and group_size % batch_size:
            raise ValueError(f"group_size {group_size} must be a multiple of batch_size {batch_size}")
        self.megabatch = group_size * min(50, max(1, len(self.lengths) // (4 * group_size)))
        self.seed = seed
        self.shuffle = shuffle
        self.batch_size = batch_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = (
            torch.randperm(len(self.lengths), generator=generator).tolist()
            if self.shuffle
            else list(range(len(self.lengths)))
        )
        for start in range(0, len(order), self.megabatch):
            chunk = order[start : start + self.megabatch]
            if self.batch_size is None:
                yield from sorted(chunk, key=lambda i: self.lengths[i], reverse=True)
            else:
                for batch in self.exact_length_batches(chunk, self.batch_size):
                    yield from batch

    def exact_length_batches(self, chunk: list[int], size: int) -> list[list[int]]:
        """`chunk` cut into batches of `size`: whole batches of one length first, then the rest by length."""
        by_length: dict[int, list[int]] = {}
        for index in chunk:  # in shuffled order: which features share a batch changes per epoch
            by_length.setdefault(self.lengths[index], []).append(index)
        batches, rest = [], []
        for same in by_length.values():
            whole = len(same) - len(same) % size
            batches += [same[i : i + size] for i in range(0, whole, size)]
            rest += same[whole:]
        rest.sort(key=lambda i: self.lengths[i], reverse=True)
        batches += [rest[i : i + size] for i in range(0, len(rest), size)]
        full = sorted((b for b in batches if len(b) == size), key=lambda b: self.lengths[b[0]], reverse=True)
        return full + [b for b in batches if len(b) < size]  # at most one short batch: the chunk's last


class DynamicPaddingCollator:
    """Pads each batch to its longest feature (optionally rounded up to a multiple) and returns int64 tensors.

    The same model inputs as transformers' DataCollatorWithPadding for tokenized features, built with one
    numpy array per column instead of `tokenizer.pad` (measured ~18x faster on a batch of 8; it runs on the
    training process between steps). Scalar columns become 1-D tensors; a label per token (token classification)
    is padded with IGNORED_LABEL, as transformers' DataCollatorForTokenClassification pads it. Unlike
    DataCollatorWithPadding, the answer positions (`start_positions`, `end_positions`) move with their tokens when
    padding goes on the left, so they keep pointing at the answer.

    `sdpa_masks` (for models that `builds_sdpa_masks`): the attention mask the model would build itself. From a
    2-D mask, transformers' masking_utils asks the device whether any token is padding (`padding_mask.all()`,
    a host sync in every forward pass) and then drops the mask or expands it. The collator knows the answer
    on the host: no mask when the batch has no padding, else the 4-D boolean key mask, which masking_utils
    passes through unchanged. Same attention, no sync.

    `drop_full_mask` (any model): no attention mask at all for a batch without padding; BERT-style models then
    attend to every token, as with an all-ones mask (tested), and SDPA may take its flash kernel, which takes
    no mask. Batches with padding keep the 2-D mask.
    """

    def __init__(
        self,
        pad_token_id: int,
        pad_to_multiple_of: int | None = None,
        padding_side: str = "right",
        pad_token_type_id: int = 0,
        sdpa_masks: bool = False,
        drop_full_mask: bool = False,
    ) -> None:
        if padding_side not in ("right", "left"):
            raise ValueError(f"padding_side must be 'right' or 'left', not {padding_side!r}")
        self.fill = {"input_ids": pad_token_id, "token_type_ids": pad_token_type_id, "attention_mask": 0}
        self.multiple = pad_to_multiple_of or 1
        self.left = padding_side == "left"
        self.sdpa_masks = sdpa_masks
        self.drop_full_mask = drop_full_mask

    @classmethod
    def for_tokenizer(
        cls,
        tokenizer: Any,
        pad_to_multiple_of: int | None = None,
        sdpa_masks: bool = False,
        drop_full_mask: bool = False,
    ) -> DynamicPaddingCollator:
        if tokenizer.pad_token_id is None:
            raise ValueError(
                f"tokenizer {tokenizer.name_or_path!r} has no pad token: batches of different lengths cannot be "
                "padded. Use an encoder whose tokenizer defines one (BERT, RoBERTa, DeBERTa, ELECTRA all do)."
            )
        return cls(
            tokenizer.pad_token_id,
            pad_to_multiple_of,
            tokenizer.padding_side,
            tokenizer.pad_token_type_id,
            sdpa_masks,
            drop_full_mask,
        )

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        lengths = np.asarray([len(feature["input_ids"]) for feature in features], dtype=np.int64)
        width = int(-(-lengths.max() // self.multiple) * self.multiple)
        batch = {}
        for name in features[0]:
            values = [feature[name] for feature in features]
            if name not in MODEL_INPUTS and isinstance(values[0], list):  # a label per token
                labels = np.full((len(values), width), IGNORED_LABEL, dtype=np.int64)
                for row, sequence in enumerate(values):
                    labels[row, self.tokens(len(sequence), width)] = sequence
                batch[name] = torch.from_numpy(labels)
                continue
            if name not in MODEL_INPUTS:
                column = np.asarray(values, dtype=np.int64)
                if name in LABELS and self.left:
                    column = column + (width - lengths)
                batch[name] = torch.as_tensor(column)
                continue
            array = np.full((len(values), width), self.fill[name], dtype=np.int64)
            for row, sequence in enumerate(values):
                array[row, self.tokens(len(sequence), width)] = sequence
            batch[name] = torch.from_numpy(array)
        padded = bool((lengths < width).any())
        if self.drop_full_mask and not padded:
            batch.pop("attention_mask", None)
        elif self.sdpa_masks and "attention_mask" in batch:
            batch.pop("attention_mask")
            if padded:  # decided here, on the host, from the lengths
                batch["attention_mask"] = torch.from_numpy(self.key_mask(lengths, width))
        return batch

    def key_mask(self, lengths: np.ndarray, width: int) -> np.ndarray:
        """(batch, 1, 1, width) booleans, True on each row's tokens: the key mask SDPA broadcasts over queries."""
        mask = np.zeros((len(lengths), 1, 1, width), dtype=bool)
        for row, length in enumerate(lengths):
            mask[row, 0, 0, self.tokens(int(length), width)] = True
        return mask

    def tokens(self, length: int, width: int) -> slice:
        """Where the `length` tokens of one feature sit in a row padded to `width`."""
        return slice(width - length, width) if self.left else slice(0, length)


def builds_sdpa_masks(model: torch.nn.Module) -> bool:
    """Whether `model` attends with PyTorch SDPA and builds its mask with transformers' masking_utils
    (`create_bidirectional_mask`, transformers >= 5), which takes a prepared 4-D mask as it is. Models of
    older transformers (4.49 in the SMDDP image) and eager attention keep the 2-D mask."""
    config = getattr(model, "config", None)
    modeling = sys.modules.get(type(model).__module__)
    return (
        getattr(config, "_attn_implementation", None) == "sdpa"
        and not getattr(config, "is_decoder", False)
        and hasattr(modeling, "create_bidirectional_mask")
    )


FeatureOutput = Callable[[Mapping[str, Any], int, slice], Any]  # a task's feature_output


def model_outputs(
    model: torch.nn.Module,
    collator: DynamicPaddingCollator,
    features: Sequence[dict[str, Any]],
    batches: Sequence[Sequence[int]],
    device: torch.device | str,
    feature_output: FeatureOutput,
) -> list[tuple[int, Any]]:
    """(feature index, its output) for the features in `batches` (lists of indices into `features`): one forward
    pass per batch in full precision (the weights as they are saved and served), the model's outputs as float32
    numpy arrays, each feature's cut to its tokens by the task's `feature_output(outputs, row, tokens)`."""
    results = []
    with torch.inference_mode():
        for indices in batches:
            chunk = [features[index] for index in indices]
            batch = collator([{k: f[k] for k in MODEL_INPUTS if k in f} for f in chunk])
            out = model(**{k: v.to(device) for k, v in batch.items()})
            arrays = {name: value.float().cpu().numpy() for name, value in out.items() if torch.is_tensor(value)}
            width = batch["input_ids"].shape[1]
            for row, (index, feature) in enumerate(zip(indices, chunk, strict=True)):
                tokens = collator.tokens(len(feature["input_ids"]), width)
                results.append((index, feature_output(arrays, row, tokens)))
    return results
