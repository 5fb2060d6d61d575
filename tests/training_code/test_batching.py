"""Batching: the fast collator matches transformers' DataCollatorWithPadding; length grouping keeps
batches random across epochs on small datasets and cuts padding on large ones."""

from __future__ import annotations

import random
from importlib.metadata import version

import pytest
import torch
from packaging.version import Version
from qa.batching import IGNORED_LABEL, DynamicPaddingCollator, LengthGroupedSampler, builds_sdpa_masks
from qa.features import LABELS, MODEL_INPUTS

# transformers 5 builds attention masks with masking_utils (`create_bidirectional_mask`), which takes a prepared 4-D
# mask as it is; 4.49 (the SMDDP image's) has no masking_utils, so the collator keeps the 2-D mask there by design
# (qa.batching.builds_sdpa_masks). `make test-images` runs these tests under both.
MASKING_UTILS = Version(version("transformers")).major >= 5


def random_features(count: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    features = []
    for _ in range(count):
        length = rng.randint(5, 40)
        features.append(
            {
                "input_ids": [rng.randint(1000, 2000) for _ in range(length)],
                "token_type_ids": [0] * (length // 2) + [1] * (length - length // 2),
                "attention_mask": [1] * length,
                "start_positions": rng.randint(0, length - 1),
                "end_positions": rng.randint(0, length - 1),
            }
        )
    return features


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("multiple", [None, 8])
def test_collator_pads_model_inputs_like_data_collator_with_padding(tokenizer, padding_side, multiple):
    from transformers import DataCollatorWithPadding

    tokenizer = tokenizer.__class__.from_pretrained(tokenizer.name_or_path, padding_side=padding_side)
    features = random_features(7)
    expected = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=multiple)(features)
    actual = DynamicPaddingCollator.for_tokenizer(tokenizer, multiple)(features)
    assert actual.keys() == expected.keys()
    for name, tensor in expected.items():
        assert actual[name].dtype == tensor.dtype, name
        if name in MODEL_INPUTS:
            assert torch.equal(actual[name], tensor), name


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_answer_positions_point_at_the_same_tokens_after_padding(tokenizer, padding_side):
    tokenizer = tokenizer.__class__.from_pretrained(tokenizer.name_or_path, padding_side=padding_side)
    features = random_features(7)
    collator = DynamicPaddingCollator.for_tokenizer(tokenizer, 8)
    batch = collator(features)
    width = batch["input_ids"].shape[1]
    for row, feature in enumerate(features):
        for label in LABELS:
            position = int(batch[label][row])
            assert batch["input_ids"][row, position] == feature["input_ids"][feature[label]], (label, row)
        tokens = batch["input_ids"][row, collator.tokens(len(feature["input_ids"]), width)]
        assert tokens.tolist() == feature["input_ids"]


def test_collator_pads_input_ids_with_the_pad_token():
    batch = DynamicPaddingCollator(pad_token_id=7)(
        [{"input_ids": [1, 2, 3], "attention_mask": [1, 1, 1]}, {"input_ids": [4], "attention_mask": [1]}]
    )
    assert batch["input_ids"].tolist() == [[1, 2, 3], [4, 7, 7]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]


@pytest.mark.parametrize(
    ("padding_side", "expected"),
    [("right", [[5, -100, 6], [7, -100, -100]]), ("left", [[5, -100, 6], [-100, 7, -100]])],
)
def test_token_labels_are_padded_with_the_ignored_label_beside_their_tokens(padding_side, expected):
    """Token classification's `labels` (one per token, -100 where the loss skips) pad with -100 where the tokens pad,
    as DataCollatorForTokenClassification does; a scalar label (text classification) stays one per feature."""
    collator = DynamicPaddingCollator(pad_token_id=0, padding_side=padding_side)
    batch = collator([{"input_ids": [1, 2, 3], "labels": [5, -100, 6]}, {"input_ids": [4, 4], "labels": [7, -100]}])
    assert batch["labels"].tolist() == expected and IGNORED_LABEL == -100
    scalar = DynamicPaddingCollator(pad_token_id=0)(
        [{"input_ids": [1, 2], "labels": 3}, {"input_ids": [4], "labels": 0}]
    )
    assert scalar["labels"].tolist() == [3, 0]


def test_collator_pads_token_type_ids_with_the_tokenizers_pad_type():
    batch = DynamicPaddingCollator(pad_token_id=0, pad_token_type_id=3)(
        [{"input_ids": [1, 2], "token_type_ids": [0, 1]}, {"input_ids": [4], "token_type_ids": [0]}]
    )
    assert batch["token_type_ids"].tolist() == [[0, 1], [0, 3]]


def test_collator_names_a_tokenizer_without_a_pad_token(tokenizer):
    no_pad = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    no_pad.pad_token = None
    with pytest.raises(ValueError, match="has no pad token"):
        DynamicPaddingCollator.for_tokenizer(no_pad)


def test_collator_rejects_an_unknown_padding_side():
    with pytest.raises(ValueError, match="padding_side"):
        DynamicPaddingCollator(pad_token_id=0, padding_side="middle")


def batches(sampler: LengthGroupedSampler, epoch: int, size: int) -> list[frozenset[int]]:
    sampler.set_epoch(epoch)
    order = list(sampler)
    return [frozenset(order[i : i + size]) for i in range(0, len(order), size)]


def test_small_datasets_still_get_new_batches_every_epoch():
    lengths = [random.Random(i).randint(50, 384) for i in range(420)]  # the bundled sample's size
    sampler = LengthGroupedSampler(lengths, group_size=16, seed=42)
    first, second = batches(sampler, 0, 16), batches(sampler, 1, 16)
    assert sorted(list(sampler)) == list(range(420))
    assert len(set(first) & set(second)) < len(first) // 4, "batches repeat across epochs"


def test_length_grouping_cuts_padding_against_random_batches():
    lengths = [random.Random(i).randint(50, 384) for i in range(4000)]

    def padded_tokens(order: list[int]) -> int:
        return sum(max(lengths[i] for i in order[j : j + 8]) * 8 for j in range(0, len(order), 8))

    random_order = list(range(4000))
    random.Random(0).shuffle(random_order)
    grouped = padded_tokens(list(LengthGroupedSampler(lengths, group_size=8, seed=0)))
    assert grouped < 0.8 * padded_tokens(random_order)


@pytest.mark.skipif(not MASKING_UTILS, reason="transformers < 5: no masking_utils, the 2-D mask is kept by design")
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_prepared_sdpa_masks_give_the_model_the_same_attention(tiny_model_dir, tokenizer, padding_side):
    """No mask for a batch without padding, the 4-D key mask otherwise: bit-identical logits and gradients to
    the 2-D mask that transformers' masking_utils would check on the device."""
    from transformers import AutoModelForQuestionAnswering

    model = AutoModelForQuestionAnswering.from_pretrained(str(tiny_model_dir))
    assert builds_sdpa_masks(model)
    padded = random_features(6, seed=3)
    unpadded = [dict(padded[0]) for _ in range(3)]
    plain = DynamicPaddingCollator(tokenizer.pad_token_id, padding_side=padding_side)
    prepared = DynamicPaddingCollator(tokenizer.pad_token_id, padding_side=padding_side, sdpa_masks=True)
    for features, expect_mask in ((padded, True), (unpadded, False)):
        reference, batch = plain(features), prepared(features)
        assert ("attention_mask" in batch) == expect_mask
        if expect_mask:
            assert batch["attention_mask"].shape == (len(features), 1, 1, reference["input_ids"].shape[1])
            assert torch.equal(batch["attention_mask"][:, 0, 0], reference["attention_mask"].bool())
        outputs = []
        for inputs in (reference, batch):
            model.zero_grad()
            out = model(**inputs)
            out.loss.backward()
            outputs.append((out.start_logits, out.end_logits, [p.grad.clone() for p in model.parameters()]))
        (starts, ends, grads), (prepared_starts, prepared_ends, prepared_grads) = outputs
        assert torch.equal(starts, prepared_starts) and torch.equal(ends, prepared_ends)
        assert all(torch.equal(a, b) for a, b in zip(grads, prepared_grads, strict=True))


def test_eager_attention_keeps_the_2d_mask(tiny_model_dir):
    from transformers import AutoModelForQuestionAnswering

    model = AutoModelForQuestionAnswering.from_pretrained(str(tiny_model_dir), attn_implementation="eager")
    assert not builds_sdpa_masks(model)


@pytest.mark.skipif(MASKING_UTILS, reason="transformers >= 5 builds masks with masking_utils: prepared masks are used")
def test_transformers_without_masking_utils_keeps_the_2d_mask(tiny_model_dir):
    from transformers import AutoModelForQuestionAnswering

    model = AutoModelForQuestionAnswering.from_pretrained(str(tiny_model_dir))
    assert model.config._attn_implementation == "sdpa" and not builds_sdpa_masks(model)


def exact_length_batches(lengths: list[int], batch: int, epoch: int, seed: int = 1) -> list[list[int]]:
    sampler = LengthGroupedSampler(lengths, group_size=4 * batch, seed=seed, batch_size=batch)
    sampler.set_epoch(epoch)
    order = list(sampler)
    return [order[i : i + batch] for i in range(0, len(order), batch)]


def test_exact_length_grouping_fills_whole_batches_of_one_length_and_keeps_every_feature():
    rng = random.Random(0)
    lengths = [rng.choice([384, 200, 150, 120]) if rng.random() < 0.6 else rng.randint(40, 383) for _ in range(2000)]
    batches = exact_length_batches(lengths, 8, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(2000))
    assert all(len(b) == 8 for b in batches[:-1])
    one_length = sum(len({lengths[i] for i in b}) == 1 for b in batches)
    before = LengthGroupedSampler(lengths, group_size=32, seed=1)
    order = list(before)
    grouped = [order[i : i + 8] for i in range(0, len(order), 8)]
    assert one_length > sum(len({lengths[i] for i in b}) == 1 for b in grouped)  # sorting splits some runs


def test_exact_length_batches_change_per_epoch_and_repeat_for_the_same_seed_and_epoch():
    lengths = [random.Random(i).choice([100, 120, 140]) for i in range(400)]
    first, again, second = (exact_length_batches(lengths, 8, e) for e in (0, 0, 1))
    assert first == again  # every rank draws the same order; a resumed run replays it
    assert len({frozenset(b) for b in first} & {frozenset(b) for b in second}) < len(first) // 4


def test_exact_length_grouping_needs_a_group_of_whole_batches():
    with pytest.raises(ValueError, match="group_size 12 must be a multiple of batch_size 8"):
        LengthGroupedSampler([10] * 20, group_size=12, seed=0, batch_size=8)


def test_collator_drops_the_mask_of_a_batch_without_padding_only():
    collate = DynamicPaddingCollator(0, drop_full_mask=True)
    same = [{"input_ids": [5, 6, 7], "attention_mask": [1, 1, 1]}] * 2
    mixed = [*same, {"input_ids": [5], "attention_mask": [1]}]
    assert "attention_mask" not in collate(same)
    assert collate(mixed)["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 1], [1, 0, 0]]


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_bert_without_an_attention_mask_gives_the_logits_of_an_all_ones_mask(tiny_model_dir, attention):
    """What dropping the mask of an unpadded batch relies on: no mask means every token attends."""
    from transformers import AutoModelForQuestionAnswering

    model = AutoModelForQuestionAnswering.from_pretrained(str(tiny_model_dir), attn_implementation=attention).eval()
    ids = torch.randint(1000, 2000, (3, 17), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        masked = model(input_ids=ids, attention_mask=torch.ones_like(ids))
        unmasked = model(input_ids=ids)
    assert torch.equal(masked.start_logits, unmasked.start_logits)
    assert torch.equal(masked.end_logits, unmasked.end_logits)
